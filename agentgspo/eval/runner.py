"""Run an eval: every (problem, sample) attempt not yet in the results store, concurrently up to a limit, each
appended to ``results.jsonl`` as it ends (so a killed eval resumes with only the missing attempts).

Each attempt is one episode of ``agentgspo/CodeForces-v0`` (made through the registry by id) played by the agent
with :class:`~agentgspo.rollouts.rollout.RolloutRunner`: ``env.reset(seed=index)`` poses problem ``index``; the policy's
draws are seeded by ``(seed * 1_000_003 + sample, index, ...)``, so an attempt replays the same whatever else runs
and whichever run (first or resumed) plays it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol, runtime_checkable

from agentgspo.core.sampling import PolicyBackend
from agentgspo.eval.segments import segments
from agentgspo.eval.store import ResultsStore
from agentgspo.eval.summary import summarize
from agentgspo.environments.registry import make
from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner

__all__ = [
    "JudgedEnv",
    "PerSampleAgent",
    "ProblemSetRows",
    "final_verdict",
    "attempt_result",
    "pending_attempts",
    "run_attempts",
    "select_indices",
    "load_tasks",
    "evaluate",
]

ENV_ID = "agentgspo/CodeForces-v0"
SEED_STRIDE = 1_000_003


class ProblemSetRows(Protocol):
    """The rows of an eval's problem source that cannot be judged here, each naming its row and why."""

    skipped_rows: list[str]


class JudgedEnv(Protocol):
    """What an eval reads of its env, ``CodeForces-v0`` (``agentgspo.envs.codeforces.CodeforcesEnv``): the tasks,
    the tools and the problem set before the attempts; each attempt's submissions (``{"verdict", "lang", ...}``
    dicts), whether one was accepted and how many could not be judged after it."""

    tasks: list[Any]
    tool_schemas: list[dict[str, Any]]
    problem_set: ProblemSetRows
    submissions: list[dict[str, Any]]
    accepted: bool
    judge_errors: int


@runtime_checkable
class PerSampleAgent(Protocol):
    """An agent that plays each sample of a problem differently (the ``wrong`` agent cycles through the shipped wrong
    solutions): ``for_sample(sample)`` is the policy that plays sample ``sample``. Any other agent plays every sample
    itself."""

    def for_sample(self, sample: int) -> PolicyBackend:
        """The policy that plays sample ``sample``."""
        ...


def final_verdict(accepted: bool, submissions: Sequence[dict[str, Any]], stop_reason: str) -> str:
    """``AC`` when accepted; else the last submission's verdict; else ``JE`` (judge error) or ``none``."""
    if accepted:
        return "AC"
    if submissions:
        return str(submissions[-1]["verdict"])
    return "JE" if stop_reason == "judge_error" else "none"


def attempt_result(
    task: Any,
    index: int,
    sample: int,
    trajectory: Any,
    env: JudgedEnv | None,
    renderer: Any,
    seconds: float,
    agent: str,
) -> dict[str, Any]:
    """One results.jsonl line: the problem's metadata, the outcome, the trajectory and its decoded segments.

    ``env``: the attempt's env (unwrapped), ``None`` when none was made (no submission, none accepted).
    ``language``: the language that judged the final verdict (the last submission's: ``python3``, ``pypy3``, ``cpp``
    or ``c``; a Kattis package's Python runs under PyPy), ``None`` without a submission; each of ``submissions``
    records its own as ``lang``."""
    submissions = list(env.submissions) if env is not None else []
    accepted = env is not None and bool(env.accepted)
    judge_errors = int(env.judge_errors) if env is not None else 0
    record = trajectory.to_record().model_dump(mode="json")
    meta = task.metadata
    return {
        "problem_id": meta["id"],
        "index": index,
        "sample": sample,
        "agent": agent,
        "title": meta.get("title"),
        "rating": meta.get("rating"),
        "tags": meta.get("tags", []),
        "source": meta.get("source"),
        "accepted": accepted,
        "reward": trajectory.reward,
        "verdict": final_verdict(accepted, submissions, trajectory.stop_reason),
        "verdicts": [str(s["verdict"]) for s in submissions],
        "language": submissions[-1].get("lang") if submissions else None,
        "submissions": submissions,
        "judge_errors": judge_errors,
        "stop_reason": trajectory.stop_reason,
        "error": trajectory.metadata.get("error"),
        "turns": trajectory.num_turns,
        "sampled_tokens": trajectory.num_sampled_tokens,
        "seconds": round(seconds, 3),
        "segments": segments(record, renderer.decode),
        "trajectory": record,
    }


def pending_attempts(
    problem_ids: Sequence[str], indices: Sequence[int], samples: int, done: set[tuple[str, int]]
) -> list[tuple[int, int]]:
    """``(index, sample)`` of every attempt of ``indices`` x ``range(samples)`` not in ``done``."""
    return [(i, s) for i in indices for s in range(samples) if (problem_ids[i], s) not in done]


async def run_attempts(
    make_env: Callable[[], Any],
    tasks: Sequence[Any],
    agent: Any,
    renderer: Any,
    store: ResultsStore,
    *,
    indices: Sequence[int],
    samples: int,
    config: RolloutConfig,
    concurrency: int = 4,
    seed: int = 0,
    agent_name: str = "",
    progress: bool = True,
) -> int:
    """Play the missing attempts; returns how many were played. ``config.group_size`` is ignored (one per run)."""
    if concurrency < 1:
        raise ValueError(f"--concurrency: expected >= 1, got {concurrency}")
    problem_ids = [t.metadata["id"] for t in tasks]
    todo = pending_attempts(problem_ids, indices, samples, store.done())
    if not todo:
        return 0
    one = dataclasses.replace(config, group_size=1, env_workers=2)
    semaphore = asyncio.Semaphore(concurrency)
    bar = _progress_bar(len(todo), progress)

    async def attempt(index: int, sample: int) -> None:
        async with semaphore:
            made: list[Any] = []

            def make() -> Any:
                env = make_env()
                made.append(env)
                return env

            policy = agent.for_sample(sample) if isinstance(agent, PerSampleAgent) else agent
            runner = RolloutRunner(make, policy, renderer, one, env_id=ENV_ID)
            started = time.perf_counter()
            trajectory = (await runner.run([index], sampling_seed=seed * SEED_STRIDE + sample))[0]
            trajectory.group_id, trajectory.sample_id = index, sample
            env = made[0].unwrapped if made else None
            store.append(
                attempt_result(
                    tasks[index], index, sample, trajectory, env, renderer, time.perf_counter() - started, agent_name
                )
            )
            bar.update(1)

    try:
        await asyncio.gather(*(attempt(i, s) for i, s in todo))
    finally:
        bar.close()
    return len(todo)


def _progress_bar(total: int, enabled: bool) -> Any:
    """A tqdm bar on stderr (disabled: a no-op object)."""
    from tqdm import tqdm

    return tqdm(
        total=total, desc="eval attempts", unit="attempt", file=sys.stderr, disable=not enabled, dynamic_ncols=True
    )


def select_indices(tasks: Sequence[Any], only: str | Sequence[str] | None) -> list[int]:
    """Indices of the problems ``only`` names (ids or 0-based indices, a list or a comma-separated string); all
    problems for ``None``. Errors name unknown ones."""
    if not only:
        return list(range(len(tasks)))
    if isinstance(only, str):
        only = only.split(",")
    ids = {t.metadata["id"]: i for i, t in enumerate(tasks)}
    indices = []
    for part in (str(p).strip() for p in only if str(p).strip()):
        if part in ids:
            indices.append(ids[part])
        elif part.isdigit() and int(part) < len(tasks):
            indices.append(int(part))
        else:
            raise ValueError(f"--only: no problem {part!r}; ids are e.g. {', '.join(list(ids)[:5])}")
    return sorted(set(indices))


def load_tasks(env_kwargs: dict[str, Any]) -> tuple[list[Any], list[dict[str, Any]], list[str]]:
    """The tasks and tool schemas of ``CodeForces-v0`` made with ``env_kwargs`` (through the registry), and the
    source's rows that cannot be judged here (each naming its row and why; skipped, never silently)."""
    env = make(ENV_ID, **env_kwargs)
    try:
        judged: JudgedEnv = env.unwrapped
        return list(judged.tasks), judged.tool_schemas, list(judged.problem_set.skipped_rows)
    finally:
        env.close()


def evaluate(
    agent: Any,
    renderer: Any,
    store: ResultsStore,
    tasks: Sequence[Any],
    env_kwargs: dict[str, Any],
    *,
    indices: Sequence[int],
    samples: int,
    ks: Sequence[int],
    config: RolloutConfig,
    concurrency: int = 4,
    seed: int = 0,
    agent_name: str = "",
    progress: bool = True,
    run: Callable[[Coroutine[Any, Any, int]], int] = asyncio.run,
) -> tuple[int, dict[str, Any], list[dict]]:
    """Play the missing attempts, then summarise the wanted ones: ``(played, summary, results)``.

    ``run`` runs the attempts' coroutine to completion and returns its result: ``asyncio.run`` (a new event loop)
    by default. A backend serves one event loop at a time
    (:class:`~agentgspo.policy.base.EventLoopConflict`), so an eval during asynchronous training passes the
    producer's ``run`` (``RolloutProducer.run``): the attempts then sample on the loop the rollouts use.
    """
    played = run(
        run_attempts(
            lambda: make(ENV_ID, **env_kwargs),
            tasks,
            agent,
            renderer,
            store,
            indices=indices,
            samples=samples,
            config=config,
            concurrency=concurrency,
            seed=seed,
            agent_name=agent_name,
            progress=progress,
        )
    )
    wanted = {(tasks[i].metadata["id"], s) for i in indices for s in range(samples)}
    results = [r for r in store.results if (r["problem_id"], r["sample"]) in wanted]
    return played, summarize(results, ks), results
