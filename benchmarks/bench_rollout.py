"""Framework overhead of the rollout runner per env step, with an instant scripted policy.

Plays 1,024 concurrent Calculator-v0 episodes (128 seeds x group 8) with ``ScriptedPolicy(calculator_oracle)``
and splits the wall time into what the env itself spends (``make``, ``reset``, ``step``, ``close``), what the
policy's text function spends, and the rest: the framework (event loop, worker-thread hand-offs, tokenizing,
chat rendering of continuations, the full-render check, record building). Target: framework time per env step
<= 1.0x the env's own time per step, both measured in the same run (a ratio, so that it holds on a slower or busier
machine as on a faster one).

Env and policy time are measured as CPU time of the thread running them (``time.thread_time``), so a call that
waits for the GIL while another thread runs is not counted twice; the overhead is
``(wall - env - policy) / steps``, and ``framework_per_env`` is that over the env's time per step. Medians over the
repeats. On a shared machine the wall clock also counts other processes' time slices (the ratio rises with the
load average, printed); ``framework_cpu_ms_per_step`` (this process's CPU time less env and policy) does not.
Full garbage collections (``gc_full_collections`` per run; the time of one, measured after the repeats, is printed)
are in the wall time, in whichever thread allocated: a full collection walks every object of the process (torch and
transformers hold ~360,000), and comes every run or two. (Not timed with ``gc.callbacks``: Python code run inside a
collection lets threads switch inside the env's ``ast.parse``, which CPython 3.11.7 then fails with "AST constructor
recursion depth mismatch", gh-106905.)

The scripted oracle plays the same turns in every episode of a group, as a greedy or low-temperature policy would:
the renderer's caches (``ChatRenderer.render``, ``.encode``) then serve a group's continuations, not only its
shared prompt; ``--no-cache`` measures without them (a policy whose every turn is new).

    python benchmarks/bench_rollout.py                      # 5 repeats, 128 x 8
    python benchmarks/bench_rollout.py --repeats 3 --seeds 64 --profile   # + cProfile of one run, top 25
    python benchmarks/bench_rollout.py --no-cache           # every render and encode computed
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import statistics
import threading
import time
from typing import Any

import gymnasium as gym

TARGET_RATIO = 1.0  # framework time per env step / env time per step


class Stopwatch:
    """Thread-safe accumulator of thread CPU seconds and call counts by name."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def time(self, name: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Call ``fn(*args, **kwargs)``, adding its thread CPU seconds and one call under ``name``."""
        started = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent = time.thread_time() - started
            with self.lock:
                self.seconds[name] = self.seconds.get(name, 0.0) + spent
                self.calls[name] = self.calls.get(name, 0) + 1


class TimedEnv(gym.Wrapper):
    """Accumulates the env's own time in ``reset``, ``step`` and ``close``."""

    def __init__(self, env: gym.Env, watch: Stopwatch):
        super().__init__(env)
        self.watch = watch

    def reset(self, **kwargs: Any):
        """Reset the env, timed."""
        return self.watch.time("env", self.env.reset, **kwargs)

    def step(self, action: Any):
        """Step the env, timed; counts the step."""
        result = self.watch.time("env", self.env.step, action)
        with self.watch.lock:
            self.watch.calls["steps"] = self.watch.calls.get("steps", 0) + 1
        return result

    def close(self):
        """Close the env, timed."""
        return self.watch.time("env", self.env.close)


def one_run(
    renderer: Any,
    seeds: int,
    group_size: int,
    env_workers: int = 64,
    profile: bool = False,
    env_id: str = "agentgspo/Calculator-v0",
) -> dict[str, float]:
    """Play ``seeds`` x ``group_size`` Calculator-v0 episodes with the oracle; wall, env, policy and framework time
    (``profile``: under cProfile, printing the top entries). ``env_id`` may name an ``agentgspo env-server`` URL
    serving Calculator-v0 (benchmarks/bench_env_server.py)."""
    from agentgspo.envs.calculator import calculator_oracle
    from agentgspo.policy.base import ScriptedPolicy
    from agentgspo.environments.registry import make
    from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner

    watch = Stopwatch()

    def make_env() -> gym.Env:
        return TimedEnv(watch.time("env", make, env_id), watch)

    def oracle(messages):
        return watch.time("policy", calculator_oracle, messages)

    runner = RolloutRunner(
        make_env,
        ScriptedPolicy(oracle, renderer),
        renderer,
        RolloutConfig(
            group_size=group_size,
            env_call_timeout_s=None,
            env_budget_s=None,
            sampler_timeout_s=None,
            env_workers=env_workers,
        ),
        env_id=env_id,
    )
    profiler = cProfile.Profile() if profile else None
    full_collections = gc.get_stats()[2]["collections"]
    started, cpu_started = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    trajectories = runner.run_sync(range(seeds))
    if profiler:
        profiler.disable()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    full_collections = gc.get_stats()[2]["collections"] - full_collections
    assert all(t.reward == 1.0 for t in trajectories), "the oracle must solve every episode"
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    steps = watch.calls["steps"]
    env, policy = watch.seconds["env"], watch.seconds["policy"]
    # env.close runs fire-and-forget and may finish after run(); count only what finished (it is tiny).
    return {
        "wall_s": wall,
        "process_cpu_s": cpu,
        "env_s": env,
        "policy_s": policy,
        "framework_s": wall - env - policy,
        "steps": steps,
        "steps_per_s": steps / wall,
        "framework_ms_per_step": 1e3 * (wall - env - policy) / steps,
        "env_ms_per_step": 1e3 * env / steps,
        "framework_per_env": (wall - env - policy) / env,
        "framework_cpu_ms_per_step": 1e3 * (cpu - env - policy) / steps,
        "gc_full_collections": full_collections,
    }


def main() -> None:
    """Warm up, run the repeats and print the median, min and max of each metric against the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=128)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--env-workers", type=int, default=64, help="RolloutConfig.env_workers (its default: 64)")
    parser.add_argument("--profile", action="store_true", help="cProfile one extra run and print the top entries")
    parser.add_argument(
        "--no-cache", action="store_true", help="render and encode every text anew (ChatRenderer's caches off)"
    )
    args = parser.parse_args()

    from transformers import AutoTokenizer

    from agentgspo.core.chat import ChatRenderer
    from agentgspo.models.tiny import tiny_policy_path

    renderer = ChatRenderer(AutoTokenizer.from_pretrained(tiny_policy_path()))
    if args.no_cache:
        renderer.caching = False
    one_run(renderer, 8, 2)  # warm-up: imports, template compilation
    load = os.getloadavg()[0]
    runs = [one_run(renderer, args.seeds, args.group_size, args.env_workers) for _ in range(args.repeats)]
    episodes = args.seeds * args.group_size
    print(
        f"rollout runner, Calculator-v0, ScriptedPolicy(calculator_oracle), {episodes} concurrent episodes "
        f"({args.seeds} seeds x group {args.group_size}), {args.env_workers} env workers, {args.repeats} repeats"
        f"{', caches off' if args.no_cache else ''}; load average {load:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after, {os.cpu_count()} CPUs"
    )
    print(f"{'metric':<26}{'median':>12}{'min':>12}{'max':>12}")
    for key in runs[0]:
        values = [r[key] for r in runs]
        print(f"{key:<26}{statistics.median(values):>12.4g}{min(values):>12.4g}{max(values):>12.4g}")
    started = time.perf_counter()
    gc.collect()
    steps = statistics.median(r["steps"] for r in runs)
    full = statistics.median(r["gc_full_collections"] for r in runs)
    print(
        f"one full garbage collection: {1e3 * (time.perf_counter() - started):.0f} ms; "
        f"~{1e3 * full * (time.perf_counter() - started) / steps:.3f} ms per step at the median {full:g} per run"
    )
    ratio = statistics.median(r["framework_per_env"] for r in runs)
    print(
        f"\nframework / env time per step (median of {args.repeats}): {ratio:.2f}x, target <= {TARGET_RATIO}x: "
        f"{'OK' if ratio <= TARGET_RATIO else 'OVER TARGET'}"
    )
    if args.profile:
        one_run(renderer, args.seeds, args.group_size, args.env_workers, profile=True)


if __name__ == "__main__":
    main()
