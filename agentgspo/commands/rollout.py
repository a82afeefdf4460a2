"""`agentgspo rollout`: play episodes of an env with a policy and write `DIR/trajectories.jsonl`.

Each episode limit comes from, in order: its flag, the policy folder's ``agentgspo.json`` (what it was trained
with, when playing that env), the env's registered budget, the library default (see
:mod:`agentgspo.policy.policy_settings`).
"""

from __future__ import annotations

import argparse
import json
import sys

from agentgspo.core.chat import ChatRenderer
from agentgspo.core.sampling import SamplingParams
from agentgspo.core.trajectory import write_jsonl
from agentgspo.environments.registry import make
from agentgspo.models.tiny import tiny_policy_path
from agentgspo.policy.base import ScriptedPolicy
from agentgspo.policy.factory import add_backend_arguments, backend_options, close_backend, make_backend
from agentgspo.policy.loading import model_folder
from agentgspo.policy.policy_settings import LIMIT_DEFAULTS, read_policy_settings, resolve_episode_settings
from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner, summarize

# Stop reasons that mean an episode ran out of room, and the flag that gives it more.
_OUT_OF_ROOM = {"max_tokens": "--max-new-tokens", "context_overflow": "--max-context"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `rollout`."""
    parser.add_argument(
        "--env",
        default=None,
        help="registered env id, e.g. agentgspo/Calculator-v0; an env server's URL (http://HOST:PORT); or "
        "fleet:MANIFEST[#GROUP] for the env servers of `agentgspo fleet up` (default: the env a trained policy "
        "folder records in its agentgspo.json)",
    )
    parser.add_argument(
        "--policy",
        default="tiny",
        help="'tiny' (embedded tiny MoE), 'oracle' (the env's scripted expert) or a model folder, "
        "e.g. runs/quickstart/final",
    )
    add_backend_arguments(parser)  # --backend hf|vllm|server, --server-url, engine options
    parser.add_argument("--episodes", type=int, default=8, help="number of prompts (distinct seeds)")
    parser.add_argument("--group-size", type=int, default=4, help="samples per prompt")
    parser.add_argument(
        "--out",
        default=None,
        help="output folder (default: rollout/ beside a policy folder, e.g. runs/quickstart/rollout; "
        "runs/rollout-tiny or runs/rollout-oracle otherwise)",
    )
    parser.add_argument(
        "--env-kwargs",
        default=None,
        help="JSON keyword arguments of the env, e.g. '{\"system_prompt\": null}' (added to those "
        "the policy was trained with)",
    )
    parser.add_argument("--seed", type=int, default=0, help="first task seed; prompts use seed, seed+1, ...")
    parser.add_argument(
        "--requeue-limit",
        type=int,
        default=2,
        help="times an episode lost to infrastructure (a re-queueable ending: a dead sampler, sandbox or env server, "
        "a hung call) is played again with the same task and seeds before its failure stands (0: never)",
    )
    parser.add_argument(
        "--max-turns",
        type=int,
        default=None,
        help="assistant turns per episode (default: the policy's, else the env's budget)",
    )
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="ids per assistant turn (default: the policy's, else the env's budget)",
    )
    parser.add_argument(
        "--max-context",
        type=int,
        default=None,
        help="ids per episode, prompt included (default: the policy's, else the env's budget)",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="sampling temperature, 0 for greedy (default: the policy's, else 1.0)",
    )
    parser.add_argument(
        "--top-p", type=float, default=None, help="nucleus sampling mass (default: the policy's, else 1.0)"
    )
    parser.add_argument(
        "--top-k",
        type=int,
        default=None,
        help="sample among the k most likely ids, 0 for off (default: the policy's, else 0)",
    )
    add_time_limit_arguments(parser, env_call=300.0, env_budget=1800.0, sampler=600.0)


def _seconds_or_none(text: str) -> float | None:
    """A time limit in seconds; 0 means none."""
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0 (0: no limit), got {text}")
    return value or None


def add_time_limit_arguments(
    parser: argparse.ArgumentParser, *, env_call: float, env_budget: float, sampler: float
) -> None:
    """The three per-episode time limits of :class:`~agentgspo.rollouts.rollout.RolloutConfig`, with these defaults."""
    parser.add_argument(
        "--env-call-timeout",
        type=_seconds_or_none,
        default=env_call,
        help=f"seconds one env call (make, reset, step) may run; past it the episode ends as "
        f"env_timeout, not trained (default {env_call:g}; 0: no limit)",
    )
    parser.add_argument(
        "--env-budget",
        type=_seconds_or_none,
        default=env_budget,
        help=f"seconds an episode may spend inside env calls in all, not counting time waiting "
        f"for the sampler; the call that passes it ends the episode as env_budget, its reward "
        f"kept (default {env_budget:g}; 0: no budget)",
    )
    parser.add_argument(
        "--sampler-timeout",
        type=_seconds_or_none,
        default=sampler,
        help=f"seconds one sampler call (an assistant turn) may take; past it the episode ends as "
        f"sampler_error, not trained (default {sampler:g}; 0: no limit)",
    )
    parser.add_argument("--episode-timeout", type=float, default=None, help=argparse.SUPPRESS)  # removed


def time_limits(args: argparse.Namespace) -> dict[str, float | None]:
    """``RolloutConfig`` keyword arguments of :func:`add_time_limit_arguments`' flags."""
    if args.episode_timeout is not None:
        raise ValueError(
            "--episode-timeout was removed (it counted time waiting for the sampler against the "
            "episode); use --env-call-timeout, --env-budget and --sampler-timeout"
        )
    return {
        "env_call_timeout_s": args.env_call_timeout,
        "env_budget_s": args.env_budget,
        "sampler_timeout_s": args.sampler_timeout,
    }


def parse_env_kwargs(text: str | None) -> dict | None:
    """``--env-kwargs`` as a dict (``None`` when not given); a clear error for anything but a JSON object."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--env-kwargs must be a JSON object, got {text!r} ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError(f"--env-kwargs must be a JSON object, got {text!r}")
    return value


def out_of_room_warnings(summary: dict) -> list[str]:
    """One line per stop reason that means the episodes ran out of room, naming the flag that gives more."""
    reasons = summary.get("stop_reasons", {})
    lines = []
    for reason, flag in _OUT_OF_ROOM.items():
        if reasons.get(reason):
            lines.append(
                f"{reasons[reason]} of {summary['episodes']} episodes stopped at {reason}: they ran out "
                f"of room; raise {flag} if the policy needs more"
            )
    return lines


def default_out(policy: str):
    """Where a rollout writes without ``--out``: ``rollout/`` beside a policy folder (``runs/quickstart/final`` ->
    ``runs/quickstart/rollout``), else ``runs/rollout-NAME``."""
    from pathlib import Path

    if policy in ("tiny", "oracle"):
        return Path("runs") / f"rollout-{policy}"
    return Path(policy).resolve().parent / "rollout"


def build_policy(name: str, env_id: str, env_kwargs: dict, backend: str = "hf", **options):
    """The policy backend ``--policy`` names and its chat renderer (the one place a rollout's policy is built);
    ``backend`` and ``options`` go to :func:`agentgspo.policy.factory.make_backend`.

    ``oracle`` loads no model: the env's scripted expert, rendered with the tiny policy's tokenizer.
    """
    if name == "oracle":
        from transformers import AutoTokenizer

        env = make(env_id, **env_kwargs)
        oracle = env.unwrapped.oracle
        env.close()
        if oracle is None:
            raise ValueError(f"{env_id} has no oracle policy; use --policy tiny or a model folder")  # stderr, 2
        renderer = ChatRenderer(AutoTokenizer.from_pretrained(tiny_policy_path()))
        return ScriptedPolicy(oracle, renderer), renderer
    policy = make_backend(name, backend, **options)
    return policy, policy.renderer


def run(args: argparse.Namespace) -> int:
    """Roll out, write the records, print a summary."""
    import time
    from pathlib import Path

    env_kwargs = parse_env_kwargs(args.env_kwargs)
    trained = None if args.policy == "oracle" else read_policy_settings(model_folder(args.policy))
    explicit = {name: getattr(args, name) for name in LIMIT_DEFAULTS}  # the limit flags (None: not given)
    settings = resolve_episode_settings(
        args.env, explicit, env_kwargs, trained, policy_label=f"--policy {args.policy!r}"
    )
    make(settings.env_id, **settings.env_kwargs).close()  # fail fast on an unknown id or keyword (close matches)
    out = Path(args.out) if args.out is not None else default_out(args.policy)
    try:  # before playing: an unwritable --out found at the end threw the whole rollout away
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(
            f"--out {args.out!r}: cannot create the output folder ({exc.strerror}); pass a writable folder"
        ) from None
    policy, renderer = build_policy(
        args.policy, settings.env_id, settings.env_kwargs, args.backend, **backend_options(args)
    )
    limits = ", ".join(f"{name} {value} ({settings.sources[name]})" for name, value in settings.limits().items())
    print(f"rollout: {settings.env_id} env_kwargs {json.dumps(settings.env_kwargs)}; {limits}", file=sys.stderr)
    config = RolloutConfig(
        group_size=args.group_size,
        requeue_limit=args.requeue_limit,
        max_turns=settings.max_turns,
        max_context=settings.max_context,
        **time_limits(args),
        sampling=SamplingParams(
            temperature=settings.temperature,
            top_p=settings.top_p,
            top_k=settings.top_k,
            max_new_tokens=settings.max_new_tokens,
        ),
    )
    runner = RolloutRunner(
        lambda: make(settings.env_id, **settings.env_kwargs), policy, renderer, config, env_id=settings.env_id
    )
    started = time.perf_counter()
    try:
        trajectories = runner.run_sync(range(args.seed, args.seed + args.episodes))
    finally:
        close_backend(policy)
    elapsed = time.perf_counter() - started
    count = write_jsonl(trajectories, out / "trajectories.jsonl")
    summary = summarize(trajectories)
    warnings = out_of_room_warnings(summary)
    summary = {
        **summary,
        "seconds": round(elapsed, 3),
        "path": str(out / "trajectories.jsonl"),
        "settings": {"env_kwargs": settings.env_kwargs, **settings.limits()},
        **({"warnings": warnings} if warnings else {}),
    }
    print(json.dumps(summary, indent=2))
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    return 0 if count else 1
