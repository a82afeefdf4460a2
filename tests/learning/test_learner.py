"""GSPOLearner on the tiny MoE with synthetic trajectories: what trains, what is skipped, what is logged."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from accelerate import Accelerator

from agentgspo.objective.advantages import group_advantages
from agentgspo.objective.batching import collate, forward, logprobs_from_logits
from agentgspo.learning.learner import GSPOLearner, LearnerConfig, routing_volatility
from agentgspo.objective import OBJECTIVES
from agentgspo.objective.registry import Objective
from agentgspo.objective.terms import GSPO_EPS, SEQUENCE, TOKEN, TURN, ClipBand, clip_diagnostics

from learner_support import _learner, _trajectories  # tests/learner_support.py
from tiny_models import FAMILIES, MOE_FAMILIES, build_tiny  # tests/tiny_models.py


@pytest.fixture
def tiny():
    from transformers import AutoModelForCausalLM

    from agentgspo.models.tiny import tiny_policy_path

    return AutoModelForCausalLM.from_pretrained(tiny_policy_path())


def _paper_gradients(model, trajectories, *, aux_coef=0.0, aux_rows=None):
    """Gradients of the paper's GSPO loss at s_i = 1 over ``trajectories`` (one minibatch, N = all of them).

    At s_i = 1 (logp_old recomputed by the same weights), Eq. 10 gives every policy token of trajectory i the
    weight A_i / (N |y_i|): loss = -(1/N) sum_i A_i * mean_{t in y_i} logp_it. Plus ``aux_coef`` times the router
    load-balancing loss of one forward of the rows ``aux_rows`` (the learner's forwarded rows).
    """
    model.zero_grad(set_to_none=True)
    rewards = torch.tensor([t.reward for t in trajectories], dtype=torch.float64)
    advantages, _ = group_advantages(rewards, torch.tensor([t.group_id for t in trajectories]))
    batch = collate(trajectories, 0)
    logp = logprobs_from_logits(forward(model, batch).logits, batch.input_ids).double()  # [B, T]
    mask = batch.loss_mask
    per_sequence = torch.where(mask, logp, 0.0).sum(-1) / mask.sum(-1)  # [B]
    loss = -(advantages * per_sequence).sum() / len(trajectories)
    if aux_coef:
        aux_batch = collate([trajectories[i] for i in aux_rows], 0)
        loss = loss + aux_coef * forward(model, aux_batch, output_router_logits=True).aux_loss.double()
    loss.backward()
    return [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]


def _snapshot(model):
    return [p.detach().clone() for p in model.parameters()]


def _changed(model, before):
    return max((p.detach() - b).abs().max().item() for p, b in zip(model.parameters(), before))


def test_mixed_rewards_train_and_log_the_paper_diagnostics(tiny):
    learner = _learner(tiny)
    before = _snapshot(tiny)
    metrics = learner.step(_trajectories([1, 0, 0, 1, 0, 1, 1, 0]))
    assert _changed(tiny, before) > 0
    assert metrics["optimizer_steps"] == 4  # paper §5.1: 4 minibatches per rollout batch
    for key in (
        "loss",
        "clip_frac_seq",
        "clip_frac_token",
        "clip_frac_low",
        "clip_frac_high",
        "ratio_mean",
        "entropy",
        "grad_norm",
        "aux_loss",
        "routing_volatility",
        "sampler_logprob_gap",
        "trained_tokens",
    ):
        assert key in metrics, key
    assert 0 <= metrics["clip_frac_seq"] <= 1 and 0 <= metrics["routing_volatility"] <= 1
    # logp_old is recomputed by the same model before any update: the first minibatch's ratios are exactly 1.
    assert metrics["ratio_min"] <= 1.0 <= metrics["ratio_max"]
    # Synthetic sampler log-probs (-4.0) are not the model's: the gap metric shows the mismatch.
    assert metrics["sampler_logprob_gap"] > 0.1


def test_all_equal_rewards_leave_the_policy_untouched(tiny):
    learner = _learner(tiny)
    before = _snapshot(tiny)
    metrics = learner.step(_trajectories([1, 1, 1, 1, 0, 0, 0, 0]))
    assert _changed(tiny, before) == 0  # no optimizer step: AdamW would move weights even on a zero gradient
    assert metrics["optimizer_steps"] == 0 and metrics["zero_variance_frac"] == 1.0
    assert metrics["loss"] == 0.0 and metrics["clip_frac_seq"] == 0.0


def test_a_placeholder_micro_batch_logs_no_router_loss_or_kl(tiny):
    """A rank with nothing to train runs zero-weight placeholder micro-batches so its collectives pair with the other
    ranks'; their router loss and KL are not the policy's and must not enter the logged means (they did, weight 1)."""
    from agentgspo.learning.means import Means

    accelerator = Accelerator(cpu=True)
    reference = copy.deepcopy(tiny).eval().requires_grad_(False)
    optimizer = torch.optim.AdamW(tiny.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(tiny, optimizer)
    learner = GSPOLearner(
        model,
        optimizer,
        accelerator,
        pad_token_id=0,
        ref_model=reference,
        config=LearnerConfig(router_aux_loss_coef=0.01, kl_coef=0.1, memory_estimate=False),
    )
    learner.step(_trajectories([1, 0, 0, 1]))  # the placeholder rows come from a real step's
    means = Means()
    learner._placeholder_step(True, means, ("",))
    assert "aux_loss" not in means.sums and "kl" not in means.sums, means.sums


def test_env_and_judge_errors_are_left_out_of_advantages(tiny):
    # Group 0: the only failure is an env crash, so the group is all-equal among real episodes: nothing to learn.
    reasons = ["completed", "completed", "completed", "env_error", "completed", "judge_error", "completed", "completed"]
    learner = _learner(tiny)
    before = _snapshot(tiny)
    metrics = learner.step(_trajectories([1, 1, 1, 0, 1, 0, 1, 1], stop_reasons=reasons))
    assert _changed(tiny, before) == 0
    assert metrics["excluded_sequences"] == 2 and metrics["trained_sequences"] == 0


def test_sampler_logprobs_as_logp_old_show_up_in_the_ratio(tiny):
    metrics = _learner(tiny, logp_old="sampler").step(_trajectories([1, 0, 0, 1, 0, 1, 1, 0]))
    # Sampler log-probs of -4.0 sit above the untrained model's (~ -ln 123 = -4.8), so every ratio is far below
    # 1 - eps_low: exactly the negative-advantage half is clipped (at the low side), the positive half is not.
    assert metrics["clip_frac_seq"] == pytest.approx(0.5)
    assert metrics["clip_frac_low"] == pytest.approx(0.5) and metrics["clip_frac_high"] == 0.0
    assert "sampler_logprob_gap" not in metrics


def test_router_aux_loss_weight_is_the_same_whether_zero_advantage_rows_are_skipped_or_not(tiny):
    """The load-balancing loss is a mean over the forwarded rows: its weight in the update is the coefficient, not
    the coefficient times (forwarded rows / minibatch rows), or skipping A = 0 rows would change the objective."""
    coef = 0.5
    trajectories = _trajectories([1, 0, 0, 1, 1, 1, 1, 1])  # group 1 all-equal: skipped, but still one of N = 8
    reference = copy.deepcopy(tiny)
    initial = _snapshot(tiny)
    learner = _learner(
        tiny,
        optimizer=torch.optim.SGD(tiny.parameters(), lr=1.0),
        minibatches=1,
        micro_batch_tokens=10**6,
        max_grad_norm=None,
        volatility_rows=0,
        router_aux_loss_coef=coef,
    )
    metrics = learner.step(trajectories)
    assert metrics["optimizer_steps"] == 1 and metrics["trained_sequences"] == 4
    expected = _paper_gradients(reference, trajectories, aux_coef=coef, aux_rows=[0, 1, 2, 3])
    scale = max(g.abs().max().item() for g in expected)
    for p, p0, g in zip(tiny.parameters(), initial, expected):  # SGD, lr 1: p = p0 - grad
        torch.testing.assert_close((p0 - p.detach()).double(), g.double(), rtol=0, atol=1e-4 * scale)


def test_routing_volatility_counts_changed_expert_choices():
    before = torch.tensor([[[0, 1], [2, 3]]])  # [L=1, N=2, k=2]
    assert routing_volatility(before, before) == 0.0
    assert routing_volatility(before, torch.tensor([[[0, 2], [2, 3]]])) == pytest.approx(0.25)


def test_config_errors_name_the_setting():
    with pytest.raises(ValueError, match="objective"):
        LearnerConfig(objective="ppo")
    with pytest.raises(ValueError, match="logp_old"):
        LearnerConfig(logp_old="ref")
    assert (LearnerConfig(objective="grpo").eps_low, LearnerConfig().eps_high) == (0.2, 4e-4)


# Two micro-batches' diagnostics (one per minibatch) whose sequence, turn and token counts weigh them differently.
STUB_DIAGNOSTICS = [
    dict(num_sequences=1.0, num_turns=2.0, num_tokens=10.0, clip_frac_low=1.0, clip_frac_high=0.0, ratio_mean=2.0),
    dict(num_sequences=3.0, num_turns=3.0, num_tokens=2.0, clip_frac_low=0.0, clip_frac_high=1.0, ratio_mean=1.0),
]


@pytest.mark.parametrize(
    "unit, reports",
    [(SEQUENCE, (SEQUENCE, TOKEN)), (TURN, (TURN, SEQUENCE, TOKEN)), (TOKEN, (SEQUENCE, TOKEN))],
    ids=["sequence", "turn", "token"],
)
def test_the_clip_unit_a_loss_declares_weighs_its_logged_clip_split_and_ratios(unit, reports):
    """The learner weighs clip_frac_low / clip_frac_high / ratio_mean by the count of the unit the objective
    declares (``objective.diagnostics``), and logs the clip fractions it declares, not a guess from its name. The
    same two micro-batches give a different mean under each declaration, so a learner that ignores it fails."""
    calls = []

    def declared_loss(logprobs, old_logprobs, advantages, loss_mask, *turn_ids, eps_low, eps_high, num_sequences):
        loss, _ = OBJECTIVES["gspo"](logprobs, old_logprobs, advantages, loss_mask, num_sequences=num_sequences)
        values = STUB_DIAGNOSTICS[len(calls)]
        calls.append(turn_ids)
        shares = {
            "clip_frac_seq": 0.5,
            "clip_frac_turn": 0.5,
            "clip_frac_token": 0.5,
            "ratio_min": 0.5,
            "ratio_max": 2.0,
        }
        return loss, {name: torch.tensor(value) for name, value in {**shares, **values}.items()}

    learner = _learner(build_tiny("dense_qwen3"), minibatches=2, memory_estimate=False)
    learner.loss_fn = Objective(
        "declared", unit, ClipBand(*GSPO_EPS), whole=declared_loss, diagnostics=clip_diagnostics(unit, reports)
    )
    trajectories = _trajectories([1, 0, 1, 0, 1, 0, 1, 0])
    metrics = learner.step(trajectories)  # every row trains: 2 minibatches, 1 call each
    assert len(calls) == 2 and all((len(turns) == 1) == (unit is TURN) for turns in calls)  # turn_ids: turn unit
    # Means weighted by the declared unit's count: sequences 1 and 3, turns 2 and 3, tokens 10 and 2.
    expected = {
        "sequence": (1 / 4, 3 / 4, (2 + 3) / 4),
        "turn": (2 / 5, 3 / 5, (4 + 3) / 5),
        "token": (10 / 12, 2 / 12, (20 + 2) / 12),
    }
    low, high, ratio = expected[unit.name]
    assert metrics["clip_frac_low"] == pytest.approx(low)
    assert metrics["clip_frac_high"] == pytest.approx(high)
    assert metrics["ratio_mean"] == pytest.approx(ratio)
    assert ("clip_frac_turn" in metrics) == (TURN in reports)
    assert metrics["mb0_clip_frac_low"] == 1.0  # the first minibatch's alone
    assert metrics["trained_tokens"] == sum(t.num_sampled_tokens for t in trajectories)  # the batch's, not reported


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["gspo", "grpo"])
def test_compiled_loss_region_trains_like_the_eager_one(objective):
    """``compile=True`` (fused fp32 log-probs + objective under torch.compile) makes the same update as eager."""
    from transformers import AutoModelForCausalLM

    from agentgspo.models.tiny import tiny_policy_path

    results = []
    for compile_region in (False, True):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(tiny_policy_path())
        learner = _learner(model, objective=objective, compile=compile_region, volatility_rows=0)
        metrics = learner.step(_trajectories([1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 0, 0]))
        results.append((_snapshot(model), metrics))
    (eager_params, eager), (compiled_params, compiled) = results
    assert compiled["optimizer_steps"] == eager["optimizer_steps"] == 4
    for name in ("loss", "clip_frac_seq", "clip_frac_token", "ratio_mean", "grad_norm", "trained_tokens"):
        assert compiled[name] == pytest.approx(eager[name], rel=1e-4, abs=1e-6), name
    for a, b in zip(eager_params, compiled_params):
        torch.testing.assert_close(b, a, rtol=0, atol=2e-5)
    assert _changed(AutoModelForCausalLM.from_pretrained(tiny_policy_path()), compiled_params) > 1e-4


@pytest.mark.parametrize("name", FAMILIES)
def test_other_architectures_train_with_router_loss_and_volatility(name):
    """Any HF MoE causal LM gets the aux loss and routing volatility; a dense model trains without them."""
    model = build_tiny(name)
    learner = _learner(model, router_aux_loss_coef=0.01)
    before = _snapshot(model)
    metrics = learner.step(_trajectories([1, 0, 0, 1, 0, 1, 1, 0]))  # token ids < 100 < vocab 128
    assert _changed(model, before) > 0 and metrics["optimizer_steps"] == 4
    moe = name in MOE_FAMILIES
    assert ("aux_loss" in metrics) == moe and ("routing_volatility" in metrics) == moe
    if moe:
        assert metrics["aux_loss"] > 0 and 0 <= metrics["routing_volatility"] <= 1


# ------------------------------------------------------------------------------------- two DDP ranks (gloo, CPU)

from launch_support import LAUNCH as DDP_LAUNCH  # noqa: E402 -- two gloo ranks under accelerate launch, on CPU


def _ddp_worker(out_dir: str) -> None:
    """Run under ``accelerate launch`` with 2 processes; each scenario writes ``<name>.rank<r>.json`` when done."""
    from transformers import AutoModelForCausalLM

    from agentgspo.models.tiny import tiny_policy_path

    accelerator = Accelerator(cpu=True)
    rank = accelerator.process_index

    def write(name, result):
        Path(out_dir, f"{name}.rank{rank}.json").write_text(json.dumps(result))

    # 1. Unequal trajectory counts per rank (8 and 4) and an accelerate-prepared LR scheduler, SGD at lr 1.
    model = build_tiny("dense_qwen3")
    reference = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    learner = GSPOLearner(
        model,
        optimizer,
        accelerator,
        pad_token_id=0,
        scheduler=scheduler,
        config=LearnerConfig(minibatches=1, max_grad_norm=None, volatility_rows=0),
    )
    everything = _trajectories([1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0, 0], seed=5)  # groups 0, 1 on rank 0; 2 on rank 1
    metrics = learner.step(everything[:8] if rank == 0 else everything[8:])
    expected = _paper_gradients(reference, everything)  # N = 12: all of the minibatch's trajectories, both ranks
    moved = [(p0 - p.detach()).double() for p0, p in zip(reference.parameters(), model.parameters())]
    write(
        "unequal_counts",
        {
            "metrics": {k: v for k, v in metrics.items() if k != "learner_seconds"},
            "trained_tokens": sum(sum(t.loss_mask[1:]) for t in everything),
            "optimizer_steps": metrics["optimizer_steps"],
            "scheduler_steps": scheduler.scheduler.last_epoch,
            "max_error": max((m - g.double()).abs().max().item() for m, g in zip(moved, expected)),
            "max_gradient": max(g.abs().max().item() for g in expected),
        },
    )

    # 2. One rank's groups are all-equal (nothing to score or train there) while the other rank trains; the MoE
    # policy so that routing volatility is measured too; then a rank with no trajectories at all.
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_policy_path())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(model, optimizer)
    learner = GSPOLearner(model, optimizer, accelerator, pad_token_id=0, config=LearnerConfig(micro_batch_tokens=64))
    steps = []
    for step, other in enumerate(([1, 1, 1, 1, 0, 0, 0, 0], [])):
        rewards = [1, 0, 0, 1, 0, 1, 1, 0] if rank == 0 else other
        metrics = learner.step(_trajectories(rewards, seed=step))
        accelerator.reduce(torch.ones(1), reduction="sum")  # a collective after the step, as a recipe has
        steps.append(metrics["optimizer_steps"])
    checksum = sum(p.detach().double().abs().sum() for p in model.parameters())
    write("idle_rank", {"optimizer_steps": steps, "checksums": accelerator.gather(checksum[None]).tolist()})

    # 3. Exact resume: each rank shuffles minibatches with its own generator (seed + rank, as the quickstart does);
    # a checkpoint through accelerate's save_state / load_state must give each rank its own stream back.
    learner = GSPOLearner(model, optimizer, accelerator, pad_token_id=0, seed=10 + rank)
    accelerator.register_for_checkpointing(learner)
    learner.step(_trajectories([1, 0, 0, 1, 0, 1, 1, 0], seed=rank))  # advances the generator
    accelerator.save_state(str(Path(out_dir, "checkpoint")))
    accelerator.wait_for_everyone()  # rank 0 writes the files
    expected = torch.randperm(1000, generator=learner.generator)[:8].tolist()  # the draws after the checkpoint
    accelerator.load_state(str(Path(out_dir, "checkpoint")))
    write("resume", {"expected": expected, "resumed": torch.randperm(1000, generator=learner.generator)[:8].tolist()})


@pytest.fixture(scope="module")
def ddp_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    env = {
        **os.environ,
        "PYTHONPATH": f"{Path(__file__).resolve().parents[1]}:{os.environ.get('PYTHONPATH', '')}",
        "OMP_NUM_THREADS": "1",
    }
    launcher = subprocess.Popen(
        [*DDP_LAUNCH, __file__, str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        log = launcher.communicate(timeout=240)[0][-6000:]
    except subprocess.TimeoutExpired:  # a deadlock between the ranks; SIGTERM makes the launcher end its workers
        launcher.terminate()
        log = "timed out (deadlock?) after 240 s\n" + launcher.communicate(timeout=60)[0][-3000:]
    results = {}
    for path in out.glob("*.json"):
        results[path.stem] = json.loads(path.read_text())
    return results, log


def _scenario(ddp_results, name):
    results, log = ddp_results
    if f"{name}.rank0" not in results or f"{name}.rank1" not in results:
        pytest.fail(f"scenario {name} did not finish on both ranks:\n{log}")
    return results[f"{name}.rank0"], results[f"{name}.rank1"]


@pytest.mark.slow
def test_ddp_update_is_the_per_trajectory_mean_over_all_ranks_with_unequal_counts(ddp_results):
    """Rank 0 holds 8 trajectories, rank 1 holds 4: the update is (1/12) sum over all 12 (paper Eq. 5), not the
    mean of the two ranks' own means ((1/2)(g_0 / 8 + g_1 / 4))."""
    for result in _scenario(ddp_results, "unequal_counts"):
        assert result["optimizer_steps"] == 1
        assert result["max_error"] <= 1e-4 * result["max_gradient"], result


def test_ddp_metrics_describe_the_whole_batch_on_every_rank(ddp_results):
    """What rank 0 logs covers both ranks' trajectories (counts add, means are weighted over all micro-batches)."""
    first, second = _scenario(ddp_results, "unequal_counts")
    assert first["metrics"] == second["metrics"]
    assert first["metrics"]["trained_sequences"] == 12  # 8 on rank 0, 4 on rank 1
    assert first["metrics"]["trained_tokens"] == first["trained_tokens"]


def test_ddp_scheduler_steps_once_per_optimizer_step(ddp_results):
    """accelerate's prepared scheduler steps num_processes times per call; the learner's schedule counts optimizer
    steps (a warm-up of 8 steps must not end after 4 on 2 ranks)."""
    for result in _scenario(ddp_results, "unequal_counts"):
        assert result["scheduler_steps"] == result["optimizer_steps"] == 1


def test_ddp_rank_with_nothing_to_train_keeps_step_with_the_others(ddp_results):
    """A rank whose groups are all-equal (nothing to score, no volatility batch), then a rank with no trajectories at
    all, still joins every all-reduce: no deadlock, the same optimizer steps, identical parameters."""
    first, second = _scenario(ddp_results, "idle_rank")
    assert first["optimizer_steps"] == second["optimizer_steps"] == [4, 4]
    assert first["checksums"][0] == first["checksums"][1]


def test_ddp_resume_gives_each_rank_its_own_shuffling_generator(ddp_results):
    """accelerate saves a registered object's state from the main process only: without every rank's generator in
    the learner's state, rank 1 resumed with rank 0's minibatch order."""
    for result in _scenario(ddp_results, "resume"):
        assert result["resumed"] == result["expected"]


if __name__ == "__main__":
    _ddp_worker(sys.argv[1])
