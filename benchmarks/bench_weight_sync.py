"""Weight sync time from the learner to vLLM, per model size and per path, side by side in one run.

Paths: the in-process vLLM engine and a vLLM server (``agentgspo serve-policy``), each updated by streaming (the gloo
weight-transfer engine through vLLM's weight-transfer routes, :mod:`agentgspo.policy.weight_transfer`) and through a
folder (``save_pretrained`` + ``agentgspo_reload_weights``). One engine and one server per model serve both paths
(the two clients of a server are separate objects); repeats alternate the paths in a rotating order so machine
noise hits all of them, and each update sends new weights (the learner's copy is perturbed between updates, outside
the timing). Timed: ``update_weights`` from call to return, pause, transfer, reload, prefix-cache reset and resume
included. Models: the embedded tiny MoE (0.8M), the 31.9M MoE and the 76.8M 64-expert MoE of
bench_rollout_backends.py, fp32.

    python benchmarks/bench_weight_sync.py                          # tiny, larger, fine; 5 repeats
    python benchmarks/bench_weight_sync.py --models tiny --repeats 2  # quick look
    python benchmarks/bench_weight_sync.py --learner-device cuda      # on a GPU machine with vLLM (same paths)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_rollout_backends import build_model, parameter_count, start_server, stop, wait_ready  # noqa: E402

PATHS = ("engine-gloo", "engine-folder", "server-gloo", "server-folder")


def measure(name: str, repeats: int, device: str, workdir: Path) -> dict[str, list[float]]:
    """Seconds per update of every path on model ``name``, ``repeats`` alternated rounds."""
    import torch
    from transformers import AutoModelForCausalLM

    from agentgspo.policy.server import ServerPolicy
    from agentgspo.policy.vllm import VLLMPolicy

    path = build_model(name)
    learner = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device)
    url, server = start_server(path, workdir, 19000 + (hash(str(path)) % 1000), enforce_eager=True)
    engine = VLLMPolicy(path, enforce_eager=True, weight_transfer="gloo")
    wait_ready(url, server)  # the engine above started meanwhile
    try:
        renderer = engine.renderer
        clients = {
            "server-gloo": ServerPolicy([url], renderer, weight_transfer="gloo"),
            "server-folder": ServerPolicy([url], renderer, weight_transfer="folder"),
        }
        times: dict[str, list[float]] = {p: [] for p in PATHS}
        generator = torch.Generator(device=device).manual_seed(0)
        for repeat in range(repeats + 1):  # round 0 warms each path up (opens the gloo groups): not counted
            order = PATHS[repeat % len(PATHS) :] + PATHS[: repeat % len(PATHS)]
            for which in order:
                with torch.no_grad():
                    for param in learner.parameters():
                        param.add_(torch.randn(param.shape, generator=generator, device=device) * 1e-3)
                started = time.perf_counter()
                if which.startswith("engine"):
                    engine.weight_transfer = which.removeprefix("engine-")  # one engine, both paths
                    engine.update_weights(learner, workdir / "engine-weights")
                else:
                    clients[which].update_weights(learner, workdir / "server-weights")
                if repeat:
                    times[which].append(time.perf_counter() - started)
        return times
    finally:
        engine.close()
        stop(server)


def main() -> None:
    """Every model: its paths' median seconds per update and the folder / stream ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="tiny,larger,fine")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--learner-device", default="cpu", help="where the learner's weights live (cpu, cuda)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-weight-sync-") as scratch:
        for name in args.models.split(","):
            times = measure(name, args.repeats, args.learner_device, Path(scratch))
            medians = {p: statistics.median(t) for p, t in times.items()}
            params = parameter_count(build_model(name))
            rows.append((name, params, medians))
            print(name, {p: [round(t, 3) for t in ts] for p, ts in times.items()}, flush=True)
    print("| model | parameters | fp32 MB | engine gloo | engine folder | folder/gloo | server gloo | server folder "
          "| folder/gloo |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for name, params, m in rows:
        print(
            f"| {name} | {params / 1e6:.1f}M | {params * 4 / 2**20:.0f} | {m['engine-gloo']:.3f} s | "
            f"{m['engine-folder']:.3f} s | {m['engine-folder'] / m['engine-gloo']:.2f}x | {m['server-gloo']:.3f} s | "
            f"{m['server-folder']:.3f} s | {m['server-folder'] / m['server-gloo']:.2f}x |"
        )


if __name__ == "__main__":
    main()
