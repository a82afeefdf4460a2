"""Rollout tokens/s of the three policy backends side by side: transformers (HF), the in-process vLLM engine and a
vLLM OpenAI server (``agentgspo serve-policy``) reached over HTTP.

Each measurement is one real rollout batch through :class:`~agentgspo.rollouts.rollout.RolloutRunner` on Calculator-v0
(``N`` concurrent episodes = N/8 seeds x group 8, one sampled turn of up to ``--max-new-tokens`` ids at T = 1,
then the env's step): tokens/s = sampled tokens / wall seconds. Models: the embedded tiny MoE, a larger Qwen3-MoE
of the same tokenizer (8 layers, hidden 384, 8 experts top-2: 31.9M parameters) where per-step overheads matter
less, and (``--models fine``) a fine-grained one as real MoEs are (6 layers, hidden 256, 64 experts top-8: 76.8M).
All backends run fp32 on the same weights, all three are up at once, and the runs alternate backend by backend
(repeat r runs HF, engine, server, in a rotating order), so machine noise hits all of them; the table gives medians
and the ratio of medians to HF. Target: vLLM >= 3x HF at >= 64 episodes.

Turn length matters. A turn ends where the random-weight policy samples its end-of-turn id (on average after
100-150 ids here) or at ``--max-new-tokens``. With the default 64 every turn is short and most decode steps run a
nearly full batch; with 512 the lengths spread as real rollouts' do, and a batch's long tail decodes a few rows per
step, which is where vLLM's per-step cost and HF's differ most (numbers in benchmarks/README.md).

    python benchmarks/bench_rollout_backends.py                     # both models, 64 and 256 episodes, 3 repeats
    python benchmarks/bench_rollout_backends.py --models tiny --episodes 64 --repeats 2   # quick look
    python benchmarks/bench_rollout_backends.py --models fine --repeats 2                 # the 64-expert MoE
    python benchmarks/bench_rollout_backends.py --models fine --episodes 64 --repeats 2 --max-new-tokens 512

vLLM's CPU engine pins its OpenMP threads (``VLLM_CPU_OMP_THREADS_BIND``, default auto) to all cores but
``VLLM_CPU_NUM_OF_RESERVED_CPU`` (vLLM's default: one, for its front end; agentgspo's on machines of at most 4 CPUs:
none, see ``agentgspo.policy.vllm.set_cpu_defaults``); HF uses torch's default thread count.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

BACKENDS = ("hf", "vllm", "server")


# The models besides the embedded tiny one (random weights, the tiny policy's tokenizer and chat template):
# "larger" (31.9M) has few wide experts; "fine" (76.8M) many small ones, top-8 of 64 as in OLMoE.
MODELS = {
    "larger": dict(hidden_size=384, num_layers=8, num_experts=8, experts_per_token=2),
    "fine": dict(hidden_size=256, num_layers=6, num_experts=64, experts_per_token=8),
}


def build_model(name: str) -> Path:
    """The folder of model ``name`` (see MODELS), built once into the cache."""
    from agentgspo.core.paths import cache_root
    from agentgspo.models.tiny import build_tiny_policy, tiny_policy_path

    if name == "tiny":
        return tiny_policy_path()
    folder = cache_root() / ("bench-larger-moe-v1" if name == "larger" else f"bench-{name}-moe-v1")
    if not (folder / "config.json").exists():
        build_tiny_policy(folder, **MODELS[name])
    return folder


def parameter_count(path: Path) -> int:
    """The parameter count of the model at ``path`` (built on the meta device: no weights loaded)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    with __import__("torch").device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path))
    return sum(p.numel() for p in model.parameters())


def one_rollout(policy: Any, episodes: int, max_new_tokens: int, sampling_seed: int) -> dict[str, float]:
    """One rollout batch of ``episodes`` concurrent Calculator-v0 episodes; sampled tokens and wall seconds."""
    from agentgspo.core.sampling import SamplingParams
    from agentgspo.environments.registry import make
    from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner, summarize

    config = RolloutConfig(
        group_size=8,
        max_turns=1,
        max_context=1024,
        env_call_timeout_s=None,
        env_budget_s=None,
        sampler_timeout_s=None,
        sampling=SamplingParams(temperature=1.0, max_new_tokens=max_new_tokens),
    )
    runner = RolloutRunner(lambda: make("agentgspo/Calculator-v0"), policy, policy.renderer, config)
    started = time.perf_counter()
    trajectories = runner.run_sync(range(episodes // 8), sampling_seed=sampling_seed)
    wall = time.perf_counter() - started
    summary = summarize(trajectories)
    assert summary["stop_reasons"].keys() <= {"completed", "max_turns", "max_tokens"}, summary["stop_reasons"]
    return {"tokens": summary["sampled_tokens"], "wall_s": wall, "tokens_per_s": summary["sampled_tokens"] / wall}


def start_server(path: Path, workdir: Path, port: int, **options: Any) -> tuple[str, Any]:
    """Start ``agentgspo serve-policy`` for ``path`` on ``port`` (``options``: ``server_command``'s); its URL and
    process. Returns at once: :func:`wait_ready` waits for it."""
    import subprocess

    from agentgspo.commands.serve_policy import server_command

    command, env = server_command(path, port=port, **options)
    log = open(workdir / f"server-{port}.log", "w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return f"http://127.0.0.1:{port}", server


def wait_ready(url: str, server: Any) -> None:
    """Return once the server at ``url`` answers ``/v1/models``; raise if its process exits first."""
    import subprocess

    import httpx

    while True:
        if server.poll() is not None:
            raise RuntimeError(f"server exited; see its log ({server.args[:3]} ...)")
        try:
            if httpx.get(f"{url}/v1/models", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        try:
            server.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass


def start_backends(path: Path, workdir: Path) -> tuple[dict[str, Any], Any]:
    """HF, engine and server policies for ``path``; returns them and the server process (to stop)."""
    from agentgspo.policy.factory import make_backend

    url, server = start_server(path, workdir, 18000 + (hash(str(path)) % 1000))
    policies = {"hf": make_backend(str(path), "hf"), "vllm": make_backend(str(path), "vllm")}
    wait_ready(url, server)  # the engine above started meanwhile
    policies["server"] = make_backend(str(path), "server", urls=[url])
    return policies, server


def stop(server: Any) -> None:
    """Stop the server process group and wait for it."""
    import os
    import signal

    os.killpg(server.pid, signal.SIGTERM)
    server.wait()


def main() -> None:
    """Per model: start the three backends, run the alternated repeats and print the table of medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tiny", "larger"], choices=["tiny", *MODELS])
    parser.add_argument("--episodes", nargs="+", type=int, default=[64, 256])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--json", help="also write the raw runs to this file")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="bench-backends-"))
    rows, raw = [], []
    for model in args.models:
        path = build_model(model)
        params = parameter_count(path)
        started = time.perf_counter()
        policies, server = start_backends(path, workdir)
        print(
            f"{model}: {params / 1e6:.1f}M parameters, backends up in {time.perf_counter() - started:.0f} s", flush=True
        )
        try:
            for name, policy in policies.items():  # warm-up: compiles, first batches, connections
                one_rollout(policy, 16, 8, sampling_seed=999)
            for episodes in args.episodes:
                runs: dict[str, list[dict[str, float]]] = {name: [] for name in BACKENDS}
                for repeat in range(args.repeats):
                    order = BACKENDS[repeat % 3 :] + BACKENDS[: repeat % 3]
                    for name in order:
                        result = one_rollout(policies[name], episodes, args.max_new_tokens, sampling_seed=repeat)
                        runs[name].append(result)
                        raw.append({"model": model, "episodes": episodes, "backend": name, "repeat": repeat, **result})
                        print(
                            f"  {model} {episodes:>4} {name:<6} r{repeat}: {result['tokens_per_s']:8.0f} tokens/s "
                            f"({result['tokens']} tokens, {result['wall_s']:.1f} s)",
                            flush=True,
                        )
                medians = {name: statistics.median(r["tokens_per_s"] for r in runs[name]) for name in BACKENDS}
                rows.append((model, params, episodes, medians))
        finally:
            stop(server)
            policies["vllm"].close()
    print(
        f"\nrollout tokens/s, Calculator-v0, 1 turn of <= {args.max_new_tokens} ids at T=1, fp32, "
        f"median of {args.repeats} alternated repeats"
    )
    print("| model | params | episodes | HF | vLLM engine | vLLM server | engine / HF | server / HF |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for model, params, episodes, m in rows:
        print(
            f"| {model} | {params / 1e6:.1f}M | {episodes} | {m['hf']:,.0f} | {m['vllm']:,.0f} | "
            f"{m['server']:,.0f} | {m['vllm'] / m['hf']:.2f}x | {m['server'] / m['hf']:.2f}x |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
