"""Does the quickstart learn through a supervised fleet as it does in one process, with replicas killed under it?

Issue 24's acceptance run. The quickstart's warm start runs once (``bench_async_learning.warm_policy``: the same
warm policy for every run); from it, GSPO with the quickstart's settings, asynchronous at staleness 1 with
``--logp-old recompute``, runs twice:

- ``single``: in one process (the HF sampler beside the learner), ``bench_async_learning``'s ``S1``;
- ``fleet``: ``agentgspo quickstart --backend server --server-url fleet:MANIFEST``, a process of its own, sampling
  from a fleet (``agentgspo fleet up``) of two vLLM (CPU build) replicas of the warm policy, each pinned to one core,
  and a sandbox server; with ``--launcher ray`` the fleet is placed on a one-node Ray cluster started here
  (``ray start --head`` on 127.0.0.1: ``--num-cpus 2``, a 100 MiB object store).

During the fleet run, at the GSPO steps of ``--kills`` (``STEP:process:PART`` SIGKILLs the replica's vLLM API server,
``STEP:actor:PART`` its Ray actor's worker process), a replica is killed; measured per kill: when the manifest took
it out of service, when it served again (a new incarnation), when it held the learner's current weights. Reported:
both success curves step by step, why and when each run stopped, final sampled and greedy success, the kills'
timings, the episodes lost to them (``metadata["requeued"]``: the endings they replaced) and every stop reason the
fleet run's trajectories show, and that ``fleet down`` left nothing running. OUT/results.json holds it all.

    python benchmarks/bench_fleet_learning.py --launcher ray --kills 4:process:policy-0,12:actor:policy-1 --out runs/fr
    python benchmarks/bench_fleet_learning.py --launcher local --kills 4:process:policy-0,12:process:policy-1 ...
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_async_learning import run as run_in_process  # noqa: E402
from bench_async_learning import warm_policy  # noqa: E402

SERVING = ("healthy", "needs_weights")
PARTS = """samplers:
  - {{name: policy, model: {model}, count: 2, cpus: 1, enforce_eager: true, max_num_seqs: 256}}
sandboxes:
  - {{name: judge, cpus: 0}}
"""


def agentgspo(*args: str, **kwargs) -> subprocess.CompletedProcess:
    """``agentgspo ARGS`` in a fresh process, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "agentgspo.cli", *args], text=True, **kwargs)


def start_ray(out: Path) -> tuple[subprocess.Popen, str]:
    """A one-node Ray cluster on 127.0.0.1 with honest resources; (its ``ray start --block`` process, address)."""
    from agentgspo.fleet.local import free_port

    port = free_port("127.0.0.1")
    temp = tempfile.mkdtemp(prefix="rayb", dir="/tmp")  # Ray's socket paths must fit 107 bytes
    command = [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", "--node-ip-address",
               "127.0.0.1", "--port", str(port), "--num-cpus", "2", "--object-store-memory", str(100 * 2**20),
               "--include-dashboard", "false", "--disable-usage-stats", "--temp-dir", temp]  # fmt: skip
    log = open(out / "ray-head.log", "w")
    head = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return head, f"127.0.0.1:{port}"


def stop_ray(head: subprocess.Popen) -> None:
    """Stop the cluster: SIGTERM to ``ray start --block``'s process group, then whatever is left of it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(head.pid, sig)
            head.wait(timeout=60)
            return
        except (ProcessLookupError, subprocess.TimeoutExpired):
            continue


@contextlib.contextmanager
def bench_fleet(work: Path, launcher: str, parts: str, result: dict):
    """The fleet of ``parts`` (the fleet file's groups) up with ``launcher`` for the block (``ray``: on a one-node
    cluster started here), then down, whatever happened; ``result`` gets ``fleet_up_s``, the last words of ``fleet
    down`` and what it left running. Yields (the fleet file, its manifest)."""
    from agentgspo.fleet.control import leftovers
    from agentgspo.core.fleet_manifest import manifest_path, read_manifest

    head, ray = None, ""
    if launcher == "ray":
        head, address = start_ray(work)
        ray = f'ray: {{address: "{address}", namespace: agentgspo-bench}}\n'
    spec = work / "fleet.yaml"
    spec.write_text(f"launcher: {launcher}\n{ray}max_restarts: 3\nprobes: {{interval_s: 5, timeout_s: 30}}\n{parts}")
    manifest = manifest_path(spec)
    try:
        started = time.monotonic()
        up = agentgspo("fleet", "up", str(spec), capture_output=True)
        result["fleet_up_s"] = round(time.monotonic() - started, 1)
        if up.returncode != 0:
            raise RuntimeError(f"fleet up failed:\n{up.stdout}\n{up.stderr}")
        yield spec, manifest
    finally:
        down = agentgspo("fleet", "down", str(spec), capture_output=True)
        result["fleet_down"] = down.stdout.strip().splitlines()[-1:] + down.stderr.strip().splitlines()[-3:]
        result["left_running"] = leftovers(read_manifest(manifest)) if manifest.exists() else None
        if head is not None:
            stop_ray(head)


def watch_kill(manifest: Path, part_id: str, how: str) -> dict:
    """Kill ``part_id`` (``process``: its server; ``actor``: its Ray actor's worker); time out-of-service, back, and
    holding the learner's current weights (the manifest polled every 20 ms)."""
    from agentgspo.core.fleet_manifest import read_manifest

    before = read_manifest(manifest).part(part_id)
    pid = before.pid if how == "process" else before.actor_pid
    if not pid:
        raise ValueError(f"{part_id} has no {'actor ' if how == 'actor' else ''}pid in the manifest ({how})")
    started = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    timings: dict = {"part": part_id, "killed": how, "pid": pid, "restarts_before": before.restarts}
    while "current_weights_s" not in timings:
        current = read_manifest(manifest)
        part, elapsed = current.part(part_id), round(time.monotonic() - started, 2)
        if "noticed_s" not in timings and (part.status not in SERVING or part.restarts > before.restarts):
            timings["noticed_s"] = elapsed
        if "back_s" not in timings and part.restarts > before.restarts and part.status in SERVING:
            timings.update(back_s=elapsed, new_url=part.url, old_url=before.url)
        if "back_s" in timings and part.kind != "sampler":
            timings["current_weights_s"] = None  # nothing to hold
        elif "back_s" in timings and part.status == "healthy" and part.weight_version == current.weight_version:
            timings.update(current_weights_s=elapsed, weight_version=part.weight_version)
        if part.status == "failed" or elapsed > 1800:
            timings["error"] = f"{part_id} {part.status} after {elapsed} s: {part.last_error}"
            break
        time.sleep(0.02)
    print(f"kill {timings}", flush=True)
    return timings


def replica_logprob_gaps(manifest: Path, final: Path, turns: int = 4) -> dict[str, float]:
    """Per sampler replica serving now: the largest |replica log-prob - learner log-prob| over ``turns`` sampled
    turns (temperature 1, log_softmax of the final policy's fp32 logits), i.e. whether every replica, the restarted
    ones included, holds the learner's final weights."""
    import asyncio

    import torch
    from transformers import AutoModelForCausalLM

    from agentgspo.core.fleet_manifest import read_manifest
    from agentgspo.core.sampling import SampleRequest, SamplingParams
    from agentgspo.policy.server import ServerPolicy

    model = AutoModelForCausalLM.from_pretrained(final, dtype=torch.float32).eval()
    gaps = {}
    for part in read_manifest(manifest).parts:
        if part.kind != "sampler" or part.status != "healthy":
            continue
        url = part.url.rstrip("/").removesuffix("/v1")
        replica = ServerPolicy.from_pretrained(str(final), urls=[url], weight_transfer="folder")
        prompt = replica.renderer.prompt_ids([{"role": "user", "content": "What is 347*29+18?"}])

        async def sample():
            params = SamplingParams(1.0, 1.0, 24)
            return await asyncio.gather(
                *(replica.sample(SampleRequest(prompt, [], params, seed=k)) for k in range(turns))
            )

        gap = 0.0
        for turn in asyncio.run(sample()):
            with torch.no_grad():
                logits = model(torch.tensor([prompt + turn.token_ids])).logits[0, len(prompt) - 1 : -1].float()
            learner = torch.log_softmax(logits, -1).gather(-1, torch.tensor(turn.token_ids)[:, None]).squeeze(-1)
            gap = max(gap, float((torch.tensor(turn.logprobs) - learner).abs().max()))
        gaps[f"{part.id} (restarts {part.restarts})"] = gap
    return gaps


def gspo_steps_done(folder: Path) -> int:
    """GSPO steps the run logged so far."""
    metrics = folder / "metrics.jsonl"
    return len(metrics.read_text().splitlines()) if metrics.exists() else 0


def fleet_run(args: argparse.Namespace, policy: str, out: Path) -> dict:
    """The quickstart through a fleet, with the kills; its numbers."""
    name = f"fleet-{args.launcher}{'' if args.kills else '-nokill'}-s{args.seed}"
    folder, work = out / name, out / f"{name}-fleet"
    work.mkdir(parents=True, exist_ok=True)
    kills, result = [], {"variant": name, "seed": args.seed}
    with bench_fleet(work, args.launcher, PARTS.format(model=policy), result) as (spec, manifest):
        plan = sorted((int(step), how, part) for step, how, part in (k.split(":") for k in args.kills.split(",") if k))
        learner = subprocess.Popen(
            [sys.executable, "-m", "agentgspo.cli", "quickstart", "--out", str(folder), "--seed", str(args.seed),
             "--policy", policy, "--warm-demos", "0", "--warm-steps", "0", "--steps", str(args.steps),
             "--max-minutes", "0", "--max-staleness", "1", "--logp-old", "recompute", "--backend", "server",
             "--server-url", f"fleet:{manifest}"],
            stdout=open(work / "learner.log", "w"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        for step, how, part in plan:
            while gspo_steps_done(folder) < step and learner.poll() is None:
                time.sleep(0.2)
            if learner.poll() is not None:
                break
            kills.append({"at_step": gspo_steps_done(folder), **watch_kill(manifest, part, how)})
        result["learner_exit"] = learner.wait()
        try:
            result["replica_logprob_gap_to_final"] = replica_logprob_gaps(manifest, folder / "final")
        except Exception as exc:  # noqa: BLE001 -- reported; the run's other numbers are kept
            result["replica_logprob_gap_to_final"] = f"{type(exc).__name__}: {exc}"
        result["status_at_end"] = agentgspo("fleet", "status", str(spec), capture_output=True).stdout
    result["kills"] = kills
    summary = json.loads((folder / "summary.json").read_text())
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    stops, lost, requeued = Counter(), Counter(), 0
    for path in sorted((folder / "trajectories").glob("step_*.jsonl")):
        for line in path.read_text().splitlines():
            trajectory = json.loads(line)
            stops[trajectory["stop_reason"]] += 1
            for ending in trajectory.get("metadata", {}).get("requeued", []):
                lost[ending.split(":")[0]] += 1
            requeued += bool(trajectory.get("metadata", {}).get("requeued"))
    result.update(
        stopped=summary["stopped"], steps=summary["steps"], sampled=summary["final_eval"]["sampled"],
        greedy=summary["final_eval"]["greedy"], seconds=sum(r["step_seconds"] for r in rows),
        success=[r["success"] for r in rows], stop_reasons=dict(stops), lost_endings=dict(lost),
        requeued_episodes=requeued,
    )  # fmt: skip
    return result


def main() -> None:
    """The single-process run and the fleet run from one warm policy; both curves and the kills, as JSON and text."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="runs/fleet_learning")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--launcher", choices=("ray", "local"), default="ray")
    parser.add_argument("--kills", default="4:process:policy-0,12:actor:policy-1", help="STEP:process|actor:PART,...")
    parser.add_argument("--steps", type=int, default=400, help="most GSPO steps (the stop rule ends most runs)")
    parser.add_argument("--warm-steps", type=int, default=500, help="the quickstart's warm start")
    parser.add_argument("--skip-single", action="store_true", help="only the fleet run")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    saved = out / "results.json"
    results = json.loads(saved.read_text()) if saved.exists() else {}
    policy = warm_policy(args.seed, args, out)
    if not args.skip_single and f"single-s{args.seed}" not in results:
        single = run_in_process("S1", args.seed, policy, args, out)
        rows = [json.loads(line) for line in (out / f"S1-s{args.seed}" / "metrics.jsonl").read_text().splitlines()]
        results[f"single-s{args.seed}"] = {**single, "success": [r["success"] for r in rows]}
        saved.write_text(json.dumps(results, indent=1))
    fleet = fleet_run(args, policy, out)
    results[fleet["variant"]] = fleet
    saved.write_text(json.dumps(results, indent=1))
    for name, result in results.items():
        print(f"{name}: stopped {result['stopped']!r} after {result['steps']} steps, {result['seconds']:.0f} s; "
              f"final sampled {result['sampled']:.3f} greedy {result['greedy']:.3f}")  # fmt: skip
        print("  success: " + " ".join(f"{s:.2f}" for s in result["success"]))
    shown = ("kills", "lost_endings", "requeued_episodes", "stop_reasons", "left_running", "fleet_up_s",
             "learner_exit", "replica_logprob_gap_to_final")  # fmt: skip
    print(json.dumps({k: fleet.get(k) for k in shown}, indent=1))


if __name__ == "__main__":
    main()
