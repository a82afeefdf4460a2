"""`agentgspo check-env ENV_ID [ENV_ID ...]`: run the contract checks on registered environments."""

from __future__ import annotations

import argparse

from agentgspo.environments.env_checker import EnvContractError, check_env
from agentgspo.environments.registry import UnknownEnvError, make, registered_ids


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `check-env`."""
    parser.add_argument("env_ids", nargs="*", metavar="ENV_ID", help="ids to check (default: every agentgspo/ id)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the scripted episodes")


def run(args: argparse.Namespace) -> int:
    """Check each env; exit status 1 if any fails."""
    import gymnasium as gym

    ids = args.env_ids or registered_ids()
    failed = 0
    for env_id in ids:
        try:
            env = make(env_id)
        except UnknownEnvError:
            raise  # bad input, not a failing env: exit status 2 with the close matches (see cli.main)
        except gym.error.Error as exc:
            print(f"FAIL {env_id}: {exc}")
            failed += 1
            continue
        try:
            check_env(env, seed=args.seed)
            print(f"ok   {env_id}")
        except EnvContractError as exc:
            print(f"FAIL {env_id}: {exc}")
            failed += 1
        finally:
            env.close()
    return 1 if failed else 0
