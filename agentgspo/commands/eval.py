"""`agentgspo eval`: agents play `agentgspo/CodeForces-v0` on a problem set; pass@k, a rating estimate and a report.

Writes ``DIR/eval.json``, ``DIR/results.jsonl`` (one line per attempt, appended as it ends: rerun the same
command after an interruption and only the missing attempts run), ``DIR/summary.json``, ``DIR/report.md`` (+ plots)
and ``DIR/report.html``. See docs/eval.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

from agentgspo.commands.rollout import add_time_limit_arguments, parse_env_kwargs, time_limits
from agentgspo.core.sampling import SamplingParams
from agentgspo.eval import EVAL_TIME_LIMITS
from agentgspo.eval.agents import ChatEndpointAgent, ShippedSolutionAgent, load_renderer
from agentgspo.eval.codeelo import codeelo_rating, load_standings
from agentgspo.eval.passk import parse_ks
from agentgspo.eval.report import write_report
from agentgspo.eval.runner import ENV_ID, evaluate, load_tasks, select_indices
from agentgspo.eval.store import ResultsStore
from agentgspo.policy.factory import add_backend_arguments, backend_options, close_backend, make_backend
from agentgspo.policy.loading import model_folder
from agentgspo.policy.policy_settings import LIMIT_DEFAULTS, read_policy_settings, resolve_episode_settings
from agentgspo.rollouts.rollout import RolloutConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `eval`."""
    parser.add_argument(
        "--problems",
        default="builtin",
        help="'builtin' (the project's problem set), 'starter' (the five starter problems), or a "
        "PATH: a problem folder in any format `agentgspo judge` reads (problem.json, a Kattis "
        "problem.yaml or a Polygon problem.xml package), a folder of them, or a "
        ".jsonl/.json/.parquet file of open-r1/codeforces, code_contests or LiveCodeBench rows",
    )
    parser.add_argument(
        "--only",
        default=None,
        help="comma-separated problem ids (or 0-based indices) to evaluate, e.g. a held-out subset",
    )
    parser.add_argument(
        "--agent",
        choices=("policy", "chat", "reference", "wrong"),
        default="policy",
        help="policy (a model through --backend), chat (an OpenAI-compatible chat endpoint), "
        "reference / wrong (scripted: submit the shipped accepted / rejected solutions)",
    )
    parser.add_argument("--policy", default="tiny", help="--agent policy: 'tiny' or a model folder")
    parser.add_argument(
        "--chat-url", default=None, help="--agent chat: the API base URL, e.g. http://127.0.0.1:8000/v1"
    )
    parser.add_argument("--chat-model", default="default", help="--agent chat: the request's model name")
    parser.add_argument(
        "--chat-api-key-env",
        default="OPENAI_API_KEY",
        help="--agent chat: environment variable holding the API key (unset: no key sent)",
    )
    parser.add_argument(
        "--tokenizer",
        default="tiny",
        help="tokenizer for the recorded ids of chat and scripted agents ('tiny' or a folder)",
    )
    parser.add_argument("--samples", type=int, default=1, help="attempts per problem (n of pass@k)")
    parser.add_argument("--k", default="1", help="comma-separated k of pass@k, each <= --samples, e.g. 1,5")
    parser.add_argument("--out", required=True, help="output folder (rerun into it to resume)")
    parser.add_argument("--concurrency", type=int, default=4, help="attempts played at once")
    parser.add_argument("--max-submissions", type=int, default=3, help="submissions per attempt")
    parser.add_argument("--sandbox", default="local", help="judge backend: local, docker or remote")
    parser.add_argument(
        "--time-limit-scale",
        type=float,
        default=1.0,
        metavar="F",
        help="judge under the problems' time limits times F (0.5: as a machine 2x slower would; 2: 2x faster)",
    )
    parser.add_argument("--env-kwargs", default=None, help="more JSON keyword arguments of CodeForces-v0")
    parser.add_argument(
        "--max-turns",
        type=int,
        default=None,
        help="assistant turns per attempt (default: the policy's, else the env's budget)",
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
        help="ids per attempt, prompt included (default: the policy's, else the env's budget)",
    )
    parser.add_argument("--temperature", type=float, default=None, help="sampling temperature (0: greedy)")
    parser.add_argument("--top-p", type=float, default=None, help="nucleus sampling mass")
    parser.add_argument("--top-k", type=int, default=None, help="sample among the k most likely ids (0: off)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed of the eval")
    parser.add_argument(
        "--standings", default=None, help="a standings JSON file (docs/eval.md): also report the CodeElo rating"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    limits = EVAL_TIME_LIMITS  # generous: a judge's long calls, a chat API's long turns
    add_time_limit_arguments(
        parser,
        env_call=limits["env_call_timeout_s"],
        env_budget=limits["env_budget_s"],
        sampler=limits["sampler_timeout_s"],
    )
    add_backend_arguments(parser)


def problems_source(text: str) -> str | None:
    """``data_files`` of CodeForces-v0 for ``--problems``: ``None`` (starter), ``"builtin"`` or an absolute path."""
    if text == "starter":
        return None
    if text == "builtin":
        return "builtin"
    path = Path(text).expanduser()
    if not path.exists():
        raise FileNotFoundError(
            f"--problems {text!r} does not exist; pass 'builtin', 'starter', a problem folder or a rows file"
        )
    return str(path.resolve())


def run(args: argparse.Namespace) -> int:
    """Evaluate, write the results and the report, print the headline numbers."""
    if args.samples < 1:
        raise ValueError(f"--samples: expected >= 1, got {args.samples}")
    ks = parse_ks(args.k, args.samples)
    if not (math.isfinite(args.time_limit_scale) and args.time_limit_scale > 0):
        raise ValueError(
            f"--time-limit-scale: expected a finite number > 0 (e.g. 0.5 or 2), got {args.time_limit_scale}"
        )
    if args.agent == "chat" and not args.chat_url:
        raise ValueError("--agent chat needs --chat-url, e.g. http://127.0.0.1:8000/v1")
    env_kwargs = {
        **(parse_env_kwargs(args.env_kwargs) or {}),
        "data_files": problems_source(args.problems),
        "max_submissions": args.max_submissions,
        "sandbox": args.sandbox,
    }
    if args.time_limit_scale != 1.0:  # a key only when set: earlier runs' folders keep resuming
        env_kwargs["time_limit_scale"] = args.time_limit_scale
    trained = None
    if args.agent == "policy":
        trained = read_policy_settings(model_folder(args.policy))
    explicit = {name: getattr(args, name) for name in LIMIT_DEFAULTS}  # the limit flags (None: not given)
    settings = resolve_episode_settings(ENV_ID, explicit, None, trained, policy_label=f"--policy {args.policy!r}")
    env_kwargs = {**{k: v for k, v in settings.env_kwargs.items() if k != "data_files"}, **env_kwargs}
    tasks, tool_schemas, skipped = load_tasks(env_kwargs)
    indices = select_indices(tasks, args.only)
    agent_label = {
        "policy": f"policy {args.policy} ({args.backend})",
        "chat": f"chat {args.chat_url} model {args.chat_model}",
    }.get(args.agent, f"{args.agent} solutions")
    limits = settings.limits()
    identity = {
        "problems": args.problems if env_kwargs["data_files"] in (None, "builtin") else env_kwargs["data_files"],
        "agent": args.agent,
        "agent_label": agent_label,
        "env_kwargs": env_kwargs,
        "limits": limits,
        "seed": args.seed,
        "tokenizer": args.tokenizer if args.agent != "policy" else None,
    }
    store = ResultsStore(args.out, identity, {"samples": args.samples, "k": ks, "only": args.only})
    print(
        f"eval: {len(indices)} problems x {args.samples} samples, {len(store.results)} attempts already in "
        f"{store.path}; {agent_label}; limits {json.dumps(limits)}",
        file=sys.stderr,
    )
    if store.requeued:
        print(
            f"eval: {store.requeued} of them ended in a re-queueable way (a failed sampler or judge, a hung env "
            "call...) and are played again",
            file=sys.stderr,
        )
    if skipped:
        print(
            f"eval: {len(skipped)} rows of the source cannot be judged here and are skipped (listed in "
            f"summary.json's skipped_rows), e.g. {skipped[0]}",
            file=sys.stderr,
        )

    if args.agent == "policy":
        agent = make_backend(args.policy, args.backend, **backend_options(args))
        renderer = agent.renderer
    else:
        renderer = load_renderer(args.tokenizer)
        if args.agent == "chat":
            api_key = os.environ.get(args.chat_api_key_env) or None
            agent = ChatEndpointAgent(
                args.chat_url,
                args.chat_model,
                renderer,
                tool_schemas,
                api_key=api_key,
                max_concurrency=args.concurrency,
            )
        else:
            if args.agent == "reference":
                missing = [tasks[i].metadata["id"] for i in indices if not tasks[i].references]
                if missing:
                    raise ValueError(
                        f"--agent reference: problems {missing[:5]} ship no reference solution "
                        f"({len(missing)} in all); leave them out with --only or use another agent"
                    )
            agent = ShippedSolutionAgent(args.agent, tasks, renderer)
    # An API model's context (and a script's) is not the local tokenizer's: its count is only for the record.
    unbounded = 1 << 30
    max_context = settings.max_context if args.agent == "policy" else unbounded
    max_new_tokens = settings.max_new_tokens if args.agent in ("policy", "chat") else unbounded
    config = RolloutConfig(
        group_size=1,
        max_turns=settings.max_turns,
        max_context=max_context,
        **time_limits(args),
        sampling=SamplingParams(settings.temperature, settings.top_p, max_new_tokens, top_k=settings.top_k),
    )
    try:
        played, summary, results = evaluate(
            agent,
            renderer,
            store,
            tasks,
            env_kwargs,
            indices=indices,
            samples=args.samples,
            ks=ks,
            config=config,
            concurrency=args.concurrency,
            seed=args.seed,
            agent_name=args.agent,
            progress=not args.no_progress,
        )
    finally:
        close_backend(agent)
    summary["skipped_rows"] = skipped
    summary["dropped_duplicates"] = store.dropped_duplicates
    if args.standings:
        summary["codeelo"] = codeelo_rating(load_standings(args.standings), results)
    paths = write_report(args.out, summary, {**identity, "problems": args.problems}, results)
    headline = {k: v for k, v in summary.items() if k.startswith("pass@")}
    print(
        json.dumps(
            {
                "played": played,
                "attempts": summary["attempts"],
                **headline,
                "verdicts": summary["verdicts"],
                "judge_error_rate": summary["judge_error_rate"],
                "rating": summary["rating_fit"]["description"],
                **({"codeelo": summary["codeelo"]["rating"]} if "codeelo" in summary else {}),
                "report": str(paths["html"]),
            },
            indent=2,
        )
    )
    return 0
