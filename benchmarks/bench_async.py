"""Asynchronous vs synchronous GSPO: wall time per trained episode at max_staleness 0, 1 and 2, in one run.

The workload is long-tailed multi-turn episodes whose env calls take as long as CodeForces-v0's do with the real
judge: ``LatencyReplay-v0`` (below) replays, for each of its steps, a latency drawn from ``STEP_SECONDS``, the
env-call times of CodeForces-v0 episodes recorded once with the real judge (``--record``, below; the numbers in
the file are that recording), so the ratio cannot be tuned by choosing the latency. An episode takes 1 to 4 turns
(by its prompt's seed), its reward is the parity of its last reply's length (so every group has signal). The
policy is the embedded tiny MoE (``--policy larger``: the 31.9M MoE of bench_rollout_backends.py, whose learner
step is comparable to the rollouts) sampled by ``--backend``: hf (its own copy when S > 0), the in-process vLLM
engine, or a vLLM server (``agentgspo serve-policy``, started here), the weights streamed after each step.

Both sides of each run are pinned, one core each: the learner (this process's main thread) to core 0, the sampler
to core 1: the producer's thread and every thread it starts; with vLLM also the engine's driver thread, its
processes and their OpenMP threads (``VLLM_CPU_OMP_THREADS_BIND=1``), or the server's whole process tree. Torch
runs one thread in this process. Env calls sleep (a judge on
another machine). For each S the same steps, prompts and seeds; reported per S: wall seconds per trained episode,
the ratio to S = 0, and the idle shares the loop logs (learner: waiting for rollouts; sampler: no group in flight).
Idle time removed = 1 - (async idle seconds / sync idle seconds), both sides summed.

    python benchmarks/bench_async.py                       # S = 0, 1, 2; 12 steps of 8 prompts x 4
    python benchmarks/bench_async.py --backend vllm --policy larger --order completion
    python benchmarks/bench_async.py --backend server --policy larger --order completion
    python benchmarks/bench_async.py --record              # re-record STEP_SECONDS with the real judge
    python benchmarks/bench_async.py --staleness 1 --order completion --slow-group 40 --steps 30

``--slow-group F`` makes the group of data position ``--slow-position`` (default: the first of the third batch,
admitted while the learner is already training: the first batch is always waited for) F times slower (its reset
and each step at least F x the median recorded latency) and reports, from the saved trajectories, how often each
data position was trained, where the slow group trained, and its drops, and from the last checkpoint the positions
still pending at the stop: with completion order every position must train exactly once (or be pending at the
stop), the slow one included (``--max-drops``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # bench_rollout_backends: the models, the server helpers

# Seconds of each env.step of CodeForces-v0 episodes (the starter problems and the project's set, its oracle and
# its wrong policy, 40 episodes, 100 steps: median 0.337 s, max 25.8 s; `--record` on a 2-core AMD EPYC, bubblewrap
# judge, 2026-12-02, with other jobs running).
# fmt: off
STEP_SECONDS: list[float] = [
    0.1732, 1.673, 0.3271, 0.3356, 0.3156, 0.1317, 1.316, 0.2397, 0.1759, 0.16, 0.1919, 0.8349, 0.4565, 0.3202,
    0.3079, 0.2637, 4.366, 0.4538, 0.3599, 0.2759, 0.2057, 1.062, 0.3121, 0.3698, 0.2331, 0.0547, 0.1752, 0.1422,
    0.1644, 0.1398, 0.1073, 8.3204, 0.3388, 0.4045, 0.3376, 0.099, 24.1437, 0.3991, 0.224, 0.2518, 0.0918, 1.2003,
    0.3435, 0.3679, 0.4319, 0.1875, 1.272, 0.344, 0.2217, 0.2424, 1.2752, 3.272, 0.4659, 0.6675, 0.4183, 2.4674,
    18.9662, 0.3614, 0.2801, 0.2322, 0.1718, 22.6644, 0.3036, 0.2514, 0.2357, 2.0319, 3.1, 0.4837, 0.5604, 0.6875,
    2.7157, 25.768, 0.1718, 0.1962, 0.1674, 0.1588, 12.6783, 0.4823, 0.6888, 0.3711, 2.8276, 19.9776, 0.4826, 0.3875,
    0.4006, 0.1549, 3.4802, 0.2754, 0.312, 0.328, 0.1396, 2.6768, 0.3316, 0.1801, 0.2515, 2.5401, 6.9195, 0.2156,
    0.2047, 0.1998,
]
# fmt: on


def record(episodes: int) -> list[float]:
    """Play CodeForces-v0 episodes with its oracle (run the samples, then submit) and its wrong policy (submit a
    wrong program until the submissions run out), timing every ``env.step`` (the judge's real work)."""
    import gymnasium as gym

    import agentgspo  # noqa: F401 -- registers the env ids
    from agentgspo.envs.codeforces import codeforces_oracle, codeforces_wrong

    seconds = []
    env = gym.make("agentgspo/CodeForces-v0", data_files="builtin", disable_env_checker=True)
    for seed in range(episodes):
        policy = codeforces_oracle if seed % 2 == 0 else codeforces_wrong
        messages, _ = env.reset(seed=seed)
        history = list(messages)
        for _ in range(4):
            action = policy(history)
            started = time.perf_counter()
            new, _, terminated, truncated, _ = env.step(action)
            seconds.append(round(time.perf_counter() - started, 4))
            history += [{"role": "assistant", "content": action}, *new]
            if terminated or truncated:
                break
    env.close()
    return seconds


SLOW = {"factor": 1.0, "position": 0}  # --slow-group F, --slow-position P: data position P's latency factor


def register_replay_env() -> None:
    """``agentgspo/LatencyReplay-v0``: 1-4 turns (by seed), each step sleeping a replayed judge latency."""
    from agentgspo.training.train import TRAIN_SEED_BASE
    from agentgspo import ChatEnv, register

    class LatencyReplay(ChatEnv):
        """Long-tailed multi-turn episodes whose steps take CodeForces-v0's recorded times."""

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.turns_left = 1 + (seed or 0) % 4
            self.rng = random.Random(seed)
            self.factor = SLOW["factor"] if seed == TRAIN_SEED_BASE + SLOW["position"] else 1.0
            if self.factor > 1:  # the slow group: its reset too (a reply cut at max_new_tokens calls no step)
                time.sleep(statistics.median(STEP_SECONDS) * self.factor)
            return [{"role": "user", "content": f"Answer {self.turns_left} times ({seed})."}], {}

        def respond(self, action):
            latency = self.rng.choice(STEP_SECONDS)  # the slow group: F x the median at least, whatever it draws
            time.sleep(max(latency, statistics.median(STEP_SECONDS)) * self.factor if self.factor > 1 else latency)
            self.turns_left -= 1
            done = self.turns_left == 0
            reward = float(len(action.text) % 2 == 0) if done else 0.0
            return ([] if done else [{"role": "user", "content": "Again."}]), reward, done, False, {}

    register("agentgspo/LatencyReplay-v0", entry_point=LatencyReplay)


def pin_the_sampler(core: int) -> None:
    """Pin each producer's thread (the sampler, and the threads it starts) to ``core``; a vLLM engine's driver thread
    and its processes too (its workers' OpenMP threads are bound by ``VLLM_CPU_OMP_THREADS_BIND``)."""
    import psutil

    from agentgspo.policy import vllm
    from agentgspo.rollouts import producer

    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = str(core)
    original = producer.RolloutProducer.__init__

    def pinned(self, *args, **kwargs):
        original(self, *args, **kwargs)
        os.sched_setaffinity(self._thread.native_id, {core})

    producer.RolloutProducer.__init__ = pinned
    engine_init = vllm.VLLMPolicy.__init__

    def pinned_engine(self, *args, **kwargs):
        engine_init(self, *args, **kwargs)
        os.sched_setaffinity(self._driver.native_id, {core})
        for child in psutil.Process().children(recursive=True):
            for thread in child.threads():
                os.sched_setaffinity(thread.id, {core})

    vllm.VLLMPolicy.__init__ = pinned_engine


def start_pinned_server(policy: str, core: int, workdir: Path) -> tuple[str, object]:
    """An ``agentgspo serve-policy`` process tree on ``core`` alone, ready; its URL and process."""
    import subprocess

    from bench_rollout_backends import wait_ready

    from agentgspo.commands.serve_policy import server_command

    port = 19500 + os.getpid() % 400
    command, env = server_command(policy, port=port)
    env["VLLM_CPU_OMP_THREADS_BIND"] = str(core)
    log = open(workdir / "server.log", "w")
    process = subprocess.Popen(
        ["taskset", "-c", str(core), *command], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, process)
    return url, process


def run(staleness: int, args: argparse.Namespace, out: Path, policy: str, server_url: str) -> dict[str, float]:
    """One training run at ``staleness``; its numbers."""
    slow = args.slow_group > 1
    from agentgspo.recipes.quickstart import QUICKSTART
    from agentgspo.training.train import train

    config = QUICKSTART.config(
        out=str(out / f"s{staleness}"), env_id="agentgspo/LatencyReplay-v0", env_kwargs={}, warm_demos=0,
        warm_steps=0, steps=args.steps, prompts_per_step=args.prompts, group_size=args.group, max_turns=4,
        max_new_tokens=16, max_context=512, lr=1e-4, warmup_steps=0, logp_old="recompute", stop_success=None,
        max_minutes=0.0, final_eval_episodes=0, checkpoint_every=args.steps, trajectories_every=int(slow),
        max_staleness=staleness, rollout_order=args.order, memory_estimate=False, seed=args.seed, policy=policy,
        backend=args.backend, server_url=server_url,
    )  # fmt: skip
    started = time.perf_counter()
    train(config, QUICKSTART)
    wall = time.perf_counter() - started
    rows = [json.loads(line) for line in (out / f"s{staleness}" / "metrics.jsonl").read_text().splitlines()]
    episodes = sum(r["trained_episodes"] for r in rows)
    loop = sum(r["step_seconds"] for r in rows)  # the steps' wall time, from the first take (no setup)
    learner_idle = sum(r["rollout_seconds"] for r in rows)
    sampler_idle = sum((1 - r["sampler_busy_frac"]) * r["step_seconds"] for r in rows)
    return {
        "staleness": staleness, "wall_s": wall, "loop_s": loop, "episodes": episodes,
        "s_per_episode": loop / episodes, "learner_idle_s": learner_idle, "sampler_idle_s": sampler_idle,
        "learner_idle_frac": learner_idle / loop, "staleness_max": max(r["staleness_max"] for r in rows),
        "dropped_groups": sum(r["dropped_groups"] for r in rows),
        "trained_beyond_staleness": sum(r["trained_beyond_staleness"] for r in rows),
        **(trained_positions(out / f"s{staleness}", SLOW["position"]) if slow else {}),
    }  # fmt: skip


def trained_positions(folder: Path, slow_position: int) -> dict:
    """From the trajectories saved each step: how many times each data position was trained, the step where
    ``slow_position`` (the slow group) trained, and its records' drop counts."""
    counts: dict[int, int] = {}
    slow_step, slow_drops = None, None
    for path in sorted((folder / "trajectories").glob("step_*_rank0.jsonl")):
        records = [json.loads(line) for line in path.read_text().splitlines()]
        for position in {r["group_id"] for r in records}:
            counts[position] = counts.get(position, 0) + 1
        slow = [r for r in records if r["group_id"] == slow_position]
        if slow:
            slow_step, slow_drops = int(path.name.split("_")[1]), slow[0]["metadata"].get("drops")
    # Positions admitted but not yet trained when the run stopped are the last checkpoint's pending ones (played
    # first on a resume), not lost: "missing" is what is neither trained nor pending.
    last = max((folder / "checkpoints").glob("step-*"))  # zero-padded: the newest sorts last
    pending = {i for rank in json.loads((last / "run_state.json").read_text())["producer"] for i in rank["pending"]}
    return {
        "positions_trained": len(counts),
        "positions_trained_twice": sorted(p for p, n in counts.items() if n > 1),
        "positions_pending_at_stop": sorted(pending),
        "positions_missing": sorted(set(range(max(counts, default=-1) + 1)) - set(counts) - pending),
        "slow_group_trained_at_step": slow_step,
        "slow_group_drops": slow_drops,
    }


def main() -> None:
    """Run S = 0, 1, 2 side by side and print the table (or re-record the latencies)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--record", type=int, nargs="?", const=40, default=0, help="re-record N episodes' steps")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--staleness", default="0,1,2")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--order", default="data", choices=("data", "completion"), help="--rollout-order of S > 0")
    parser.add_argument("--backend", default="hf", choices=("hf", "vllm", "server"), help="who samples")
    parser.add_argument("--policy", default="tiny", choices=("tiny", "larger", "fine"), help="bench_rollout_backends'")
    parser.add_argument("--slow-group", type=float, default=1.0, help="the slow data position's latency factor")
    parser.add_argument("--slow-position", type=int, default=None, help="the slow data position (default 2 x prompts)")
    args = parser.parse_args()
    SLOW["factor"] = args.slow_group
    SLOW["position"] = 2 * args.prompts if args.slow_position is None else args.slow_position
    if args.record:
        seconds = record(args.record)
        print(json.dumps(seconds))
        print(f"{len(seconds)} steps: median {statistics.median(seconds):.3f} s, max {max(seconds):.3f} s")
        return
    import torch

    torch.set_num_threads(1)
    os.sched_setaffinity(0, {0})  # this (main) thread: the learner
    register_replay_env()
    pin_the_sampler(1)
    from bench_rollout_backends import build_model, stop

    policy = str(build_model(args.policy))
    results = []
    with tempfile.TemporaryDirectory() as folder:
        url, server = start_pinned_server(policy, 1, Path(folder)) if args.backend == "server" else ("", None)
        try:
            for staleness in map(int, args.staleness.split(",")):
                results.append(run(staleness, args, Path(folder), policy, url))
        finally:
            if server is not None:
                stop(server)
    sync = results[0]
    print(f"{args.backend} backend, {args.policy} policy, {args.order} order")
    print(f"{len(STEP_SECONDS)} replayed step latencies, median {statistics.median(STEP_SECONDS):.3f} s")
    print(
        "| S | s per trained episode | vs S=0 | learner idle | sampler idle | idle removed | staleness max | dropped |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        removed = 1 - (r["learner_idle_s"] + r["sampler_idle_s"]) / (sync["learner_idle_s"] + sync["sampler_idle_s"])
        print(
            f"| {r['staleness']} | {r['s_per_episode']:.3f} | {sync['s_per_episode'] / r['s_per_episode']:.2f}x | "
            f"{r['learner_idle_s']:.1f} s | {r['sampler_idle_s']:.1f} s | {removed:.0%} | {r['staleness_max']} | "
            f"{r['dropped_groups']:.0f} |"
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
