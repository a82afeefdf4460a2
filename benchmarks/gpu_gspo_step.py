"""Full GSPO training step on one GPU (the lent H200): tokens/s and MFU of several variants, one run.

    PYTHONUNBUFFERED=1 python benchmarks/gpu_gspo_step.py --out $OUT        # on the H200, about 5-7 min
    python benchmarks/gpu_gspo_step.py --smoke                               # CPU code-path check, tiny shapes

The step is what ``GSPOLearner._micro_step`` does for one micro-batch, without the Python bookkeeping: forward,
fp32 log-probs of the sampled tokens (``agentgspo/objective/logprobs.py: token_logprobs``), ``gspo_loss``
(``agentgspo/objective/gspo.py``; eps 3e-4 / 4e-4, per-sequence mean), backward, ``AdamW(fused=True)`` step. No gradient
clipping, no router aux loss, no log_p_old pass (log_p_old is scored once per variant, untimed). The two files are
loaded by path, so the package's own imports (gymnasium, pydantic: absent on the H200 image) are not needed.

Policy: a Qwen3-MoE-shaped ``Qwen3MoeForCausalLM`` from a config, random init on the GPU (no download): 16 layers,
hidden 1024, 16 query / 4 KV heads of 64, 64 experts top-8 of width 512, vocab 32768, untied head: 1.72B
parameters, 278M active (experts 8/64, input embedding excluded). Sequences 2048 tokens, the first 256 of each
masked as prompt (``--smoke``: seq // 4). Precision: pure bf16 (parameters, gradients and the AdamW moments in
bf16; no fp32 master copy); the log-softmax, ratios and loss in fp32. SDPA attention, ``grouped_mm`` experts, TF32
allowed for fp32 matmuls, no gradient checkpointing.

MFU (the formula that gives 16.5% for the 70K tokens/s fwd+bwd baseline and 29.6% for 126K tokens/s):

    FLOP per token = 6 * N_active + 6 * L * T * d_attn      (fwd + bwd; attention scores and values, causal: half
                                                             of the 12 * L * T * d_attn of the dense count)
    MFU            = tokens/s * FLOP per token / 795e12     (795 TFLOP/s: the bf16 matmul rate measured on the H200)

with N_active = 277.9M, L = 16, T = 2048, d_attn = heads * head_dim = 1024: 1.869 GFLOP per token; 70K tokens/s
gives 16.46%. The log-softmax, loss and optimizer are not counted (they are in the measured time).

Variants (each: its own warm-up, then the median of ``--steps`` timed steps; a failing variant is reported and
skipped; a variant that would overrun ``--budget-s`` is skipped). The default run is f, j, p, k, m:
  a_eager            eager model, 8 x 2048, attention_mask of ones passed (as the learner does)
  b_compile          torch.compile(model, dynamic=False), otherwise as a
  c_compile_b16      compile, 16 x 2048, attention_mask=None (no padding: SDPA's causal flash path; under compile
                     transformers cannot check that a mask is all ones and passes it to SDPA), log-prob chunk 4096
  d_compile_b16_fused  c + the log-prob/loss region compiled too (``fused_token_logprobs``, the region that
                     ``LearnerConfig(compile=True)`` compiles: Inductor fuses the fp32 upcast, logsumexp and
                     gather; no fp32 logits copy, and no host sync from token_logprobs' range check)
  e_compile_nomask   b with attention_mask=None (separates the mask effect from the batch effect of c)
  f_compile_b8_fused   d at the issue's 8 x 2048 shape (the best of the 2026-11-29 run at this shape, 30.3%)
  g_compile_b32_fused  d at 32 x 2048 (does a bigger batch keep raising MFU?)
  h/i_cudagraphs_*   f / d with torch.compile(mode="reduce-overhead") (CUDA graphs: fewer kernel launches)
  j_ours_b8          f with ``experts_implementation="agentgspo"`` (agentgspo/models/moe.py: the expert permutations
                     differentiated by gathers, no atomic index_put scatter-add in the backward of each layer)
  k_ours_cudnn_b8    j with the cuDNN attention backend first in SDPA's priority (Hopper-tuned kernels);
                     profiled like p, so the JSON shows which attention kernels ran
  m_ours_b32         j at 32 x 2048
  p_profile_ours_b8  j under torch.profiler for 3 steps: device time by kernel family (grouped GEMM, GEMM,
                     attention, Triton-fused, index/scatter, optimizer, other) and the top kernels, in the JSON
Results: a table at the end and ``OUT/gpu_gspo_step.json`` (rewritten after every variant).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
PEAK_FLOPS = 795e12  # bf16 matmul, measured on the H200 (MACHINE.md)
PROMPT_TOKENS = 256


def load_by_path(name: str, path: Path):
    """Import one file of the package without importing the package (its __init__ needs gymnasium)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


logprobs_module = load_by_path("agentgspo_logprobs", ROOT / "agentgspo" / "objective" / "logprobs.py")
moe_module = load_by_path("agentgspo_moe", ROOT / "agentgspo" / "models" / "moe.py")
loss_module = load_by_path("agentgspo_loss", ROOT / "agentgspo" / "objective" / "loss.py")
token_logprobs, gspo_loss = logprobs_module.token_logprobs, loss_module.gspo_loss
fused_logprobs = logprobs_module.fused_token_logprobs  # what LearnerConfig(compile=True) compiles

FUSED_B8 = dict(compile=True, rows=8, mask=False, chunk=4096, fused_loss=True)
VARIANTS = {
    "a_eager": dict(compile=False, rows=8, mask=True, chunk=512, fused_loss=False),
    "b_compile": dict(compile=True, rows=8, mask=True, chunk=512, fused_loss=False),
    "c_compile_b16": dict(compile=True, rows=16, mask=False, chunk=4096, fused_loss=False),
    "d_compile_b16_fused": dict(FUSED_B8, rows=16),
    "f_compile_b8_fused": FUSED_B8,
    "g_compile_b32_fused": dict(FUSED_B8, rows=32),
    "h_cudagraphs_b8_fused": dict(FUSED_B8, mode="reduce-overhead"),
    "i_cudagraphs_b16_fused": dict(FUSED_B8, rows=16, mode="reduce-overhead"),
    "e_compile_nomask": dict(compile=True, rows=8, mask=False, chunk=512, fused_loss=False),
    "j_ours_b8": dict(FUSED_B8, experts="agentgspo"),
    "k_ours_cudnn_b8": dict(FUSED_B8, experts="agentgspo", attention="cudnn", profile=True),
    "m_ours_b32": dict(FUSED_B8, rows=32, experts="agentgspo"),
    "p_profile_ours_b8": dict(FUSED_B8, experts="agentgspo", profile=True),
}
DEFAULT_VARIANTS = "f_compile_b8_fused,j_ours_b8,p_profile_ours_b8,k_ours_cudnn_b8,m_ours_b32"
# Kernel families for the profile, matched in order against the lower-cased kernel name.
KERNEL_FAMILIES = [
    ("optimizer", ("adam",)),
    ("attention", ("flash", "fmha", "cudnn", "attention", "sdpa")),
    ("grouped_gemm", ("grouped", "groupproblem", "group_gemm", "ptr_array", "ptrarray")),
    ("gemm", ("gemm", "xmma", "nvjet", "cutlass", "matmul", "::mm", "addmm", "bmm")),
    ("index_scatter", ("index", "scatter", "gather", "sort", "radix")),
    ("triton_fused", ("triton",)),
]


def parse_args() -> argparse.Namespace:
    """The command-line settings."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for gpu_gspo_step.json")
    parser.add_argument("--smoke", action="store_true", help="tiny shapes on CPU, 1 step per variant")
    parser.add_argument("--steps", type=int, default=8, help="timed steps per variant")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per variant (the first compiles)")
    parser.add_argument("--budget-s", type=float, default=400.0, help="skip variants that would end past this")
    parser.add_argument(
        "--variants", default=DEFAULT_VARIANTS, help=f"comma-separated, in order, from: {', '.join(VARIANTS)}"
    )
    parser.add_argument("--seq", type=int, default=2048)
    return parser.parse_args()


def model_config(smoke: bool):
    """The Qwen3-MoE config of the policy (``smoke``: tiny shapes)."""
    from transformers import Qwen3MoeConfig

    if smoke:
        shape = dict(
            vocab_size=512,
            hidden_size=64,
            moe_intermediate_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            num_experts=8,
            num_experts_per_tok=2,
        )
    else:
        shape = dict(
            vocab_size=32768,
            hidden_size=1024,
            moe_intermediate_size=512,
            num_hidden_layers=16,
            num_attention_heads=16,
            num_key_value_heads=4,
            head_dim=64,
            num_experts=64,
            num_experts_per_tok=8,
        )
    return Qwen3MoeConfig(
        **shape,
        intermediate_size=4 * shape["hidden_size"],
        decoder_sparse_step=1,
        mlp_only_layers=[],
        norm_topk_prob=True,
        tie_word_embeddings=False,
        max_position_embeddings=4096,
        use_cache=False,
        output_router_logits=False,
        router_aux_loss_coef=0.0,
    )


def count_params(model, config) -> tuple[int, int]:
    """(total, active): active = total - input embedding - the (E - k) / E unused share of expert weights."""
    total = sum(p.numel() for p in model.parameters())
    experts = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
    inactive = experts * (config.num_experts - config.num_experts_per_tok) // config.num_experts
    return total, total - model.get_input_embeddings().weight.numel() - inactive


def flops_per_token(active: int, config, seq: int) -> float:
    """FLOP per token of a forward and backward: ``6 * N_active + 6 * L * T * d_attn`` (the module docstring)."""
    d_attn = config.num_attention_heads * config.head_dim
    return 6 * active + 6 * config.num_hidden_layers * seq * d_attn


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op off CUDA)."""
    if device.type == "cuda":
        torch.cuda.synchronize()


def attention_backends(spec: dict, device: torch.device):
    """The SDPA backends a variant prefers: cuDNN first for ``attention="cudnn"``, else torch's default order.

    cuDNN goes first in the priority list, with the other backends behind it for shapes cuDNN declines (e.g. if it
    rejects grouped-query attention); the variant's kernel profile shows which attention kernels ran.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if spec.get("attention") != "cudnn":
        return contextlib.nullcontext()
    if device.type != "cuda":
        raise RuntimeError("the cuDNN attention backend needs a CUDA device")
    order = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    return sdpa_kernel(order, set_priority=True)


def kernel_profile(step, device: torch.device, steps: int = 3, top: int = 25) -> dict:
    """Device time of ``steps`` calls of ``step`` by kernel family (``KERNEL_FAMILIES``) and the top kernels."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        sync(device)
    attr = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    kernels = {}
    for event in prof.key_averages():
        if device.type == "cuda" and getattr(event, "device_type", None) != torch.autograd.DeviceType.CUDA:
            continue
        if device.type == "cpu" and not event.key.startswith("aten::"):
            continue
        kernels[event.key] = kernels.get(event.key, 0.0) + getattr(event, attr) / 1e3 / steps  # ms per step
    families: dict[str, float] = {}
    for kernel, ms in kernels.items():
        lowered = kernel.lower()
        family = next((f for f, keys in KERNEL_FAMILIES if any(k in lowered for k in keys)), "other")
        families[family] = families.get(family, 0.0) + ms
    ranked = sorted(kernels.items(), key=lambda kv: -kv[1])[:top]
    return {
        "ms_per_step_by_family": dict(sorted(families.items(), key=lambda kv: -kv[1])),
        "device_ms_per_step": sum(kernels.values()),
        "top_kernels_ms_per_step": [[kernel[:160], ms] for kernel, ms in ranked],
    }


def run_variant(name: str, spec: dict, model, optimizer, config, args, device) -> dict:
    """Warm up and time the training step of one variant; its timings, losses, peak memory and kernel profile."""
    rows, seq = spec["rows"], args.seq
    experts = spec.get("experts", "grouped_mm")
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation(experts)
    elif experts != "grouped_mm":
        raise RuntimeError(f"this transformers cannot switch the experts implementation to {experts!r}")
    generator = torch.Generator(device="cpu").manual_seed(0)
    input_ids = torch.randint(0, config.vocab_size, (rows, seq), generator=generator).to(device)  # [B, T]
    attention_mask = torch.ones_like(input_ids) if spec["mask"] else None  # [B, T] or None
    targets = input_ids[:, 1:]  # [B, T-1]
    loss_mask = torch.ones_like(targets, dtype=torch.bool)  # [B, T-1]
    loss_mask[:, : min(PROMPT_TOKENS, seq // 4) - 1] = False  # the prompt
    advantages = torch.randn(rows, generator=generator).to(device)  # [B]
    with torch.no_grad(), attention_backends(spec, device):  # log_p_old: the policy before the updates (untimed)
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]  # [B, T-1, V] bf16
        old_logprobs = token_logprobs(logits, targets)  # [B, T-1] fp32
        # The fused variant must compute the same function: compare it with token_logprobs here (eager).
        logprob_diff = (
            float((fused_logprobs(logits, targets) - old_logprobs).abs().max()) if spec["fused_loss"] else None
        )
        del logits

    forward = torch.compile(model, dynamic=False, mode=spec.get("mode")) if spec["compile"] else model
    if spec["fused_loss"]:

        def loss_region(logits, targets, old, adv, mask):
            return gspo_loss(fused_logprobs(logits, targets), old, adv, mask, num_sequences=rows)[0]

        loss_region = torch.compile(loss_region, dynamic=False)
    else:

        def loss_region(logits, targets, old, adv, mask):
            logprobs = token_logprobs(logits, targets, chunk_size=spec["chunk"])  # [B, T-1] fp32
            return gspo_loss(logprobs, old, adv, mask, num_sequences=rows)[0]

    def step() -> torch.Tensor:
        with attention_backends(spec, device):
            logits = forward(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits[:, :-1]
            loss = loss_region(logits, targets, old_logprobs, advantages, loss_mask)
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times, losses = [], []
    for i in range(args.warmup + args.steps):
        sync(device)
        started = time.perf_counter()
        losses.append(step())
        sync(device)
        times.append(time.perf_counter() - started)
        print(f"  {name} step {i + 1}/{args.warmup + args.steps}: {times[-1] * 1e3:.1f} ms", flush=True)
    timed = times[args.warmup :]
    median = statistics.median(timed)
    tokens = rows * seq
    profiled = kernel_profile(step, device) if spec.get("profile") else None
    return {
        "status": "ok",
        **spec,
        "tokens_per_step": tokens,
        "step_ms_median": median * 1e3,
        "step_ms_all": [t * 1e3 for t in times],
        "first_step_s": times[0],
        "tokens_per_s": tokens / median,
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None,
        "losses": [float(x) for x in losses],
        "fused_vs_token_logprobs_max_abs_diff": logprob_diff,
        "loss_finite": all(bool(torch.isfinite(x)) for x in losses),
        "kernel_profile": profiled,
    }


def main() -> int:
    """Build the policy, run the variants within the budget, write gpu_gspo_step.json and print the table."""
    args = parse_args()
    started = time.perf_counter()
    import transformers
    from transformers import Qwen3MoeForCausalLM

    try:
        moe_module.register()  # experts_implementation="agentgspo"
    except ImportError as exc:
        print(f"agentgspo experts unavailable: {exc}", flush=True)

    device = torch.device("cpu" if args.smoke or not torch.cuda.is_available() else "cuda")
    if args.smoke:
        args.steps, args.warmup, args.seq = 1, 1, 64
        torch.set_num_threads(1)  # the shared 2-core CPU machine: 2 OpenMP threads stall under load
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    config = model_config(args.smoke)
    torch.manual_seed(0)
    with torch.device(device):
        try:
            model = Qwen3MoeForCausalLM._from_config(
                config, dtype=torch.bfloat16, attn_implementation="sdpa", experts_implementation="grouped_mm"
            )
        except (TypeError, ValueError) as exc:  # an older transformers: grouped_mm is its default anyway
            print(f"experts_implementation not accepted ({exc}); using the default", flush=True)
            model = Qwen3MoeForCausalLM._from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")
    model.train()
    model.config.use_cache = False
    total, active = count_params(model, config)
    per_token = flops_per_token(active, config, args.seq)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.0, fused=True)
    check = 70e3 * flops_per_token(277_908_480, model_config(False), 2048) / PEAK_FLOPS
    gpu = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    header = {
        "device": gpu,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "params_total": total,
        "params_active": active,
        "seq": args.seq,
        "flops_per_token": per_token,
        "peak_flops": PEAK_FLOPS,
        "mfu_formula": "tokens/s * (6*N_active + 6*L*T*heads*head_dim) / 795e12",
        "mfu_check_70k_tokens_per_s": check,
        "precision": "pure bf16 params/grads/AdamW moments; fp32 logprobs+loss",
        "experts_implementation": getattr(model.config, "_experts_implementation", None),
        "attn_implementation": model.config._attn_implementation,
        "smoke": args.smoke,
    }
    print(
        f"{gpu}; torch {torch.__version__}, transformers {transformers.__version__}; {total / 1e9:.3f}B params, "
        f"{active / 1e6:.1f}M active; {per_token / 1e9:.3f} GFLOP/token; MFU formula check: 70K tokens/s -> "
        f"{check:.2%} (expect 16.5%); init {time.perf_counter() - started:.0f} s",
        flush=True,
    )

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    for name in names:
        spec = VARIANTS[name]
        elapsed = time.perf_counter() - started
        estimate = (100 if spec["compile"] else 30) if not args.smoke else 0  # seconds, compile included
        if elapsed + estimate > args.budget_s:
            results[name] = {"status": f"skipped: {elapsed:.0f} s elapsed + ~{estimate} s > budget {args.budget_s}"}
            print(f"{name}: {results[name]['status']}", flush=True)
            continue
        print(f"{name}: {spec}", flush=True)
        try:
            result = run_variant(name, spec, model, optimizer, config, args, device)
            result["mfu"] = result["tokens_per_s"] * per_token / PEAK_FLOPS
        except Exception as exc:  # one failing variant must not end the run
            traceback.print_exc()
            result = {"status": f"failed: {type(exc).__name__}: {str(exc)[:300]}", **spec}
        result["wall_s"] = time.perf_counter() - started - elapsed
        results[name] = result
        optimizer.zero_grad(set_to_none=True)
        torch._dynamo.reset()
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        (out / "gpu_gspo_step.json").write_text(json.dumps({**header, "variants": results}, indent=1))

    print(
        f"\n{'variant':<22} {'rows':>4} {'ms/step':>8} {'tokens/s':>9} {'MFU':>6} {'peak GiB':>8} "
        f"{'1st step s':>10} {'wall s':>6}  status"
    )
    for name, r in results.items():
        if r.get("status") == "ok":
            peak = f"{r['peak_gib']:.1f}" if r["peak_gib"] is not None else "-"
            print(
                f"{name:<22} {r['rows']:>4} {r['step_ms_median']:>8.1f} {r['tokens_per_s']:>9.0f} "
                f"{r['mfu']:>6.1%} {peak:>8} {r['first_step_s']:>10.1f} {r['wall_s']:>6.0f}  "
                f"ok{'' if r['loss_finite'] else ' (NON-FINITE LOSS)'}"
            )
        else:
            print(f"{name:<22} {'':>4} {'':>8} {'':>9} {'':>6} {'':>8} {'':>10} {'':>6}  {r['status']}")
    for name, r in results.items():
        if r.get("kernel_profile"):
            prof = r["kernel_profile"]
            print(
                f"\n{name}: {prof['device_ms_per_step']:.1f} ms of kernels per step; by family: "
                + ", ".join(f"{family} {ms:.1f}" for family, ms in prof["ms_per_step_by_family"].items())
            )
            for kernel, ms in prof["top_kernels_ms_per_step"][:12]:
                print(f"  {ms:8.2f} ms  {kernel[:110]}")
    print(f"total {time.perf_counter() - started:.0f} s; JSON: {out / 'gpu_gspo_step.json'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
