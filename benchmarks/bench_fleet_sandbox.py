"""The sandbox server of a fleet killed while it judges: do code-judging episodes survive, scored as without the kill?

Issue 24's acceptance run for sandboxes. The CodeForces-v0 recipe at its smoke size (the tiny policy; a warm start
whose demonstrations, played by the env's oracle and its `wrong` demonstrator, submit real programs to the judge)
runs twice:

- ``local``: with the env's own sandbox (bubblewrap, in the learner's process);
- ``fleet``: with ``--env-kwargs '{"sandbox": "remote"}'`` and ``AGENTGSPO_SANDBOX_URLS=fleet:MANIFEST``, judging on
  a fleet's sandbox server (``--launcher local``: a process here; ``ray``: a Ray actor on a one-node cluster started
  here). Once that server runs a submitted program (a descendant process appears), it is killed: ``process``
  SIGKILLs the server, ``actor`` its Ray actor's worker.

Then, on the same fleet, ``agentgspo rollout`` of the env's oracle plays ``--batch`` episodes at once and the server
is killed again while several of its submissions run (at least four judge processes).

Reported: the kills' timings (out of service, back), what the demonstrations scored in both runs and whether every
message matched (the same when no episode was lost or mis-scored), every episode's stop reason, the episodes lost and
re-queued, the oracle batch's rewards (all 1.0 when none was lost), the exit statuses, and that ``fleet down`` left
nothing. OUT/results.json holds it all.

    python benchmarks/bench_fleet_sandbox.py --launcher ray --kill actor --out runs/fleet_sandbox
    python benchmarks/bench_fleet_sandbox.py --launcher local --kill process --out runs/fleet_sandbox
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_fleet_learning import bench_fleet, watch_kill  # noqa: E402

from agentgspo.fleet.local import descendants  # noqa: E402

ROOT = HERE.parent
PARTS = """sandboxes:
  - {name: judge, cpus: 0}
"""


def recipe(folder: Path, args: argparse.Namespace, env_kwargs: dict, environ: dict) -> subprocess.Popen:
    """The CodeForces-v0 recipe at its smoke size with a judged warm start, writing to ``folder``."""
    command = [sys.executable, str(ROOT / "recipes" / "gspo_codeforces.py"), "--smoke", "--out", str(folder),
               "--seed", str(args.seed), "--warm-demos", str(args.demos), "--warm-steps", "2",
               "--warm-wrong-frac", "0.5", "--env-kwargs", json.dumps(env_kwargs),
               # room for whole demonstrations (the smoke's 1,024-token context cuts most of them before they submit)
               "--max-context", "16384", "--max-turns", "8", "--max-new-tokens", "1024"]  # fmt: skip
    log = open(folder.with_name(folder.name + ".log"), "w")
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **environ}, cwd=ROOT)


def outcome(folder: Path, exit_status: int) -> dict:
    """What a run shows: exit status, the demonstrations' success, stop reasons, judge errors, re-queued episodes."""
    summary = json.loads((folder / "summary.json").read_text())
    stops, lost, requeued, judge_errors = Counter(), Counter(), 0, 0
    for path in sorted(folder.rglob("*.jsonl")):
        if path.name == "metrics.jsonl":
            continue
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if "stop_reason" not in record:
                continue
            stops[record["stop_reason"]] += 1
            judge_errors += int(record.get("judge_errors") or record.get("metadata", {}).get("judge_errors") or 0)
            for ending in record.get("metadata", {}).get("requeued", []):
                lost[ending.split(":")[0]] += 1
            requeued += bool(record.get("metadata", {}).get("requeued"))
    warm = summary.get("warm_start") or summary.get("warm_log") or {}
    return {
        "exit": exit_status,
        "demonstrator_success": warm.get("demonstrator_success"),
        "stop_reasons": dict(stops),
        "judge_errors": judge_errors,
        "lost_endings": dict(lost),
        "requeued_episodes": requeued,
        "steps": summary.get("steps"),
    }


def wait_serving(manifest: Path, part_id: str):
    """The part's manifest entry once it serves (after a restart)."""
    from agentgspo.core.fleet_manifest import read_manifest

    while (part := read_manifest(manifest).part(part_id)).status != "healthy":
        time.sleep(0.05)
    return part


def same_demonstrations(a: Path, b: Path) -> dict:
    """How many of the two runs' warm-start demonstrations (the same seeds, deterministic) ended alike: reward, stop
    reason and every message, the judge's times and memory masked (they vary from run to run)."""

    def key(line: str) -> tuple:
        record = json.loads(line)
        messages = [re.sub(r"\d+\.\d+ s|\d+ MB", "T", str(m.get("content"))) for m in record["messages"]]
        return record["seed"], record["reward"], record["stop_reason"], messages

    left = [key(line) for line in (a / "demonstrations.jsonl").read_text().splitlines()]
    right = [key(line) for line in (b / "demonstrations.jsonl").read_text().splitlines()]
    return {
        "demonstrations": len(left),
        "alike": sum(x == y for x, y in zip(left, right)) if len(left) == len(right) else 0,
    }


def oracle_batch(out: Path, episodes: int, environ: dict, env_kwargs: dict) -> subprocess.Popen:
    """``agentgspo rollout`` of CodeForces-v0's oracle: ``episodes`` episodes played at once, each one judged."""
    command = [sys.executable, "-m", "agentgspo.cli", "rollout", "--env", "agentgspo/CodeForces-v0", "--policy",
               "oracle", "--episodes", str(episodes), "--group-size", "1", "--out", str(out), "--env-kwargs",
               json.dumps(env_kwargs)]  # fmt: skip
    log = open(out.with_name(out.name + ".log"), "w")
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **environ}, cwd=ROOT)


def batch_outcome(out: Path) -> dict:
    """Rewards and stop reasons of an oracle batch."""
    records = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    return {
        "episodes": len(records),
        "rewards": dict(Counter(r["reward"] for r in records)),
        "stop_reasons": dict(Counter(r["stop_reason"] for r in records)),
        "requeued_episodes": sum(bool(r["metadata"].get("requeued")) for r in records),
    }


def main() -> None:
    """The recipe with its own sandbox, then with a fleet's sandbox killed under it; both outcomes as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="runs/fleet_sandbox")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--launcher", choices=("ray", "local"), default="ray")
    parser.add_argument("--kill", choices=("process", "actor"), default="actor")
    parser.add_argument("--demos", type=int, default=32, help="warm-start demonstrations (each one judged)")
    parser.add_argument("--batch", type=int, default=16, help="oracle episodes played at once, then (0: none)")
    args = parser.parse_args()
    if args.kill == "actor" and args.launcher != "ray":
        parser.error("--kill actor needs --launcher ray")
    from agentgspo.core.fleet_manifest import read_manifest

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    saved = out / "results.json"
    results = json.loads(saved.read_text()) if saved.exists() else {}
    if f"local-s{args.seed}" not in results:
        folder = out / f"local-s{args.seed}"
        results[folder.name] = outcome(folder, recipe(folder, args, {}, {}).wait())
        saved.write_text(json.dumps(results, indent=1))

    name = f"fleet-{args.launcher}-{args.kill}-s{args.seed}"
    folder, work = out / name, out / f"{name}-fleet"
    work.mkdir(parents=True, exist_ok=True)
    result: dict = {}
    with bench_fleet(work, args.launcher, PARTS, result) as (_, manifest):
        environ = {"AGENTGSPO_SANDBOX_URLS": f"fleet:{manifest}"}
        learner = recipe(folder, args, {"sandbox": "remote"}, environ)
        server = read_manifest(manifest).part("judge-0")
        idle = descendants(server.pid)
        while descendants(server.pid) <= idle and learner.poll() is None:  # until it runs a submitted program
            time.sleep(0.01)
        result["kill"] = watch_kill(manifest, "judge-0", args.kill) if learner.poll() is None else "learner ended"
        result.update(outcome(folder, learner.wait()))
        result["same_as_local"] = same_demonstrations(out / f"local-s{args.seed}", folder)
        if args.batch:  # several judge requests in flight when the server dies
            batch = oracle_batch(folder.with_name(name + "-batch"), args.batch, environ, {"sandbox": "remote"})
            server = wait_serving(manifest, "judge-0")
            idle = descendants(server.pid)
            while len(descendants(server.pid) - idle) < 4 and batch.poll() is None:
                time.sleep(0.01)
            in_flight = len(descendants(server.pid) - idle)
            result["batch_kill"] = {"processes_judging": in_flight, **watch_kill(manifest, "judge-0", args.kill)}
            result["batch_exit"] = batch.wait()
            result["batch"] = batch_outcome(folder.with_name(name + "-batch"))
    results[name] = result
    saved.write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
