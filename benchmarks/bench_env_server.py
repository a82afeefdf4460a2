"""The remote env path's cost per env step beside the local one: 1,024 concurrent Calculator-v0 episodes with an
instant scripted policy, played in process and through `agentgspo env-server` (OpenEnv's WebSocket protocol on
127.0.0.1), alternated in one run.

For each path: wall ms per env step, the framework's share as benchmarks/bench_rollout.py defines it (wall minus
the env's and the policy's own thread CPU time, per step: for the remote path this includes waiting on the server),
and CPU ms per step of the client process and (remote) of the server process. The server runs in the openenv venv
(``.venv-openenv``, what `.ci/run` makes) with ``--max-concurrent-envs`` at least the episode count. Medians over
the repeats; on 2 cores client and server share the machine, so the remote wall time includes the server's CPU.

    python benchmarks/bench_env_server.py                  # 3 repeats of each, 128 seeds x group 8
    python benchmarks/bench_env_server.py --env-workers 256
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rollout import one_run  # noqa: E402 -- benchmarks/bench_rollout.py

ROOT = Path(__file__).resolve().parents[1]


def start_server(python: Path, capacity: int) -> tuple[subprocess.Popen, str]:
    """`agentgspo env-server --env agentgspo/Calculator-v0` on a free port; (process, URL) once it says where."""
    process = subprocess.Popen(
        [str(python), "-m", "agentgspo.cli", "env-server", "--env", "agentgspo/Calculator-v0", "--port", "0"]
        + ["--max-concurrent-envs", str(capacity)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    line = process.stdout.readline()
    if "http://" not in line:
        raise SystemExit(f"env-server did not start: {line!r}")
    return process, line[line.index("http://") :].split()[0]


def timed(renderer, seeds: int, group_size: int, env_workers: int, env_id: str, server: psutil.Process | None):
    """One run of bench_rollout.one_run, with the server's CPU seconds added (remote)."""
    before = sum(server.cpu_times()[:2]) if server else 0.0
    run = one_run(renderer, seeds, group_size, env_workers, env_id=env_id)
    run["server_cpu_s"] = sum(server.cpu_times()[:2]) - before if server else 0.0
    steps = run["steps"]
    return {
        "wall_ms_per_step": 1e3 * run["wall_s"] / steps,
        "framework_ms_per_step": run["framework_ms_per_step"],
        "client_cpu_ms_per_step": 1e3 * run["process_cpu_s"] / steps,
        "server_cpu_ms_per_step": 1e3 * run["server_cpu_s"] / steps,
        "steps_per_s": run["steps_per_s"],
    }


def main() -> None:
    """Start the server, alternate local and remote runs, print medians side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=128)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--env-workers", type=int, default=64, help="RolloutConfig.env_workers (its default: 64)")
    parser.add_argument("--openenv-python", type=Path, default=ROOT / ".venv-openenv" / "bin" / "python")
    args = parser.parse_args()

    from transformers import AutoTokenizer

    from agentgspo.models.tiny import tiny_policy_path
    from agentgspo.core.chat import ChatRenderer

    renderer = ChatRenderer(AutoTokenizer.from_pretrained(tiny_policy_path()))
    episodes = args.seeds * args.group_size
    process, url = start_server(args.openenv_python, max(episodes, 1))
    server = psutil.Process(process.pid)
    try:
        one_run(renderer, 8, 2)  # warm-up of both paths
        one_run(renderer, 8, 2, env_id=url)
        results: dict[str, list[dict[str, float]]] = {"local": [], "remote": []}
        for _ in range(args.repeats):
            for path, env_id in (("local", "agentgspo/Calculator-v0"), ("remote", url)):
                started = time.perf_counter()
                results[path].append(
                    timed(
                        renderer,
                        args.seeds,
                        args.group_size,
                        args.env_workers,
                        env_id,
                        server if path == "remote" else None,
                    )
                )
                print(f"  {path}: {time.perf_counter() - started:.1f} s", flush=True)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
    print(
        f"\nCalculator-v0, ScriptedPolicy(oracle), {episodes} concurrent episodes ({args.seeds} x {args.group_size}), "
        f"{args.env_workers} env workers, medians of {args.repeats} alternated repeats"
    )
    keys = list(results["local"][0])
    print(f"{'metric':<26}{'local':>12}{'remote':>12}{'remote/local':>14}")
    for key in keys:
        local = statistics.median(r[key] for r in results["local"])
        remote = statistics.median(r[key] for r in results["remote"])
        ratio = f"{remote / local:.2f}x" if local else "-"
        print(f"{key:<26}{local:>12.4g}{remote:>12.4g}{ratio:>14}")


if __name__ == "__main__":
    main()
