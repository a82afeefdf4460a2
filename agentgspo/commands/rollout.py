"""`agentgspo rollout`: play episodes of an env with a policy and write `DIR/trajectories.jsonl`."""

from __future__ import annotations

import argparse
import json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `rollout`."""
    parser.add_argument("--env", required=True, help="registered env id, e.g. agentgspo/Calculator-v0")
    parser.add_argument("--policy", default="tiny",
                        help="'tiny' (embedded tiny MoE), 'oracle' (the env's scripted expert) or a model folder")
    parser.add_argument("--episodes", type=int, default=8, help="number of prompts (distinct seeds)")
    parser.add_argument("--group-size", type=int, default=4, help="samples per prompt")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--env-kwargs", default="{}", help='JSON keyword arguments of the env, e.g. \'{"system_prompt": null}\'')
    parser.add_argument("--seed", type=int, default=0, help="first task seed; prompts use seed, seed+1, ...")
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--max-context", type=int, default=1024)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--episode-timeout", type=float, default=300.0, help="wall-clock seconds per episode")


def run(args: argparse.Namespace) -> int:
    """Roll out, write the records, print a summary."""
    import time
    from pathlib import Path

    from agentgspo.policy.base import SamplingParams, ScriptedPolicy
    from agentgspo.policy.hf import HFPolicy
    from agentgspo.registry import make
    from agentgspo.rollout import RolloutConfig, RolloutRunner, summarize
    from agentgspo.trajectory import write_jsonl

    try:
        env_kwargs = json.loads(args.env_kwargs)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--env-kwargs must be a JSON object, got {args.env_kwargs!r} ({exc})") from exc
    if not isinstance(env_kwargs, dict):
        raise ValueError(f"--env-kwargs must be a JSON object, got {args.env_kwargs!r}")
    make(args.env, **env_kwargs).close()  # fail fast on an unknown id (with close matches) or bad kwargs
    out = Path(args.out)
    try:  # before playing: an unwritable --out found at the end threw the whole rollout away
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"--out {args.out!r}: cannot create the output folder ({exc.strerror}); "
                         "pass a writable folder") from None
    backend = HFPolicy.from_pretrained("tiny" if args.policy == "oracle" else args.policy)
    renderer = backend.renderer
    policy = backend
    if args.policy == "oracle":
        oracle = make(args.env, **env_kwargs).unwrapped.oracle
        if oracle is None:
            raise ValueError(f"{args.env} has no oracle policy; use --policy tiny or a model folder")  # stderr, 2
        policy = ScriptedPolicy(oracle, renderer)
    config = RolloutConfig(
        group_size=args.group_size, max_turns=args.max_turns, max_context=args.max_context,
        episode_timeout_s=args.episode_timeout,
        sampling=SamplingParams(temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens),
    )
    runner = RolloutRunner(lambda: make(args.env, **env_kwargs), policy, renderer, config, env_id=args.env)
    started = time.perf_counter()
    trajectories = runner.run_sync(range(args.seed, args.seed + args.episodes))
    elapsed = time.perf_counter() - started
    count = write_jsonl(trajectories, out / "trajectories.jsonl")
    summary = {**summarize(trajectories), "seconds": round(elapsed, 3), "path": str(out / "trajectories.jsonl")}
    print(json.dumps(summary, indent=2))
    return 0 if count else 1
