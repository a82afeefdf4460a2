"""Numbers the learner must not get silently wrong (issue 19): clip bands, sampling semantics, the first update's
ratios, dropout and router jitter, accelerate's accumulation, split-turns weighting, per-update routing volatility,
the trained population's reward, and what k3's gradient is."""

from __future__ import annotations

import copy
import random

import pytest
import torch
from accelerate import Accelerator

from agentgspo.objective.advantages import turn_advantages
from agentgspo.objective.batching import collate, forward, logprobs_from_logits
from agentgspo.learning.learner import (
    GSPOLearner,
    LearnerConfig,
    disable_stochastic_layers,
    routing_volatility,
    sample_weights,
)
from agentgspo.learning.volatility import expert_choices
from agentgspo.objective.kl import kl_k3
from agentgspo.training.metrics import rollout_metrics_over_ranks
from agentgspo.core.trajectory import Trajectory

from tiny_models import build_tiny  # tests/tiny_models.py

FULL = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "logprobs": "full"}


def _trajectories(rewards, *, group_size=4, seed=0, sampling=FULL, metadata=None):
    rng = random.Random(seed)
    out = []
    for i, reward in enumerate(rewards):
        t = Trajectory(
            group_id=i // group_size, sample_id=i % group_size, sampling=None if sampling is None else dict(sampling)
        )
        t.append_forced([rng.randrange(3, 100) for _ in range(8)])
        sampled = [rng.randrange(3, 100) for _ in range(rng.randrange(3, 10))]
        t.append_sampled(sampled, [-4.0] * len(sampled))
        t.reward = float(reward)
        if metadata is not None:
            t.metadata = dict(metadata[i])
        out.append(t)
    return out


def _learner(model, *, accelerator=None, optimizer=None, **config):
    accelerator = accelerator or Accelerator(cpu=True)
    optimizer = optimizer or torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(model, optimizer)
    return GSPOLearner(
        model, optimizer, accelerator, pad_token_id=0, config=LearnerConfig(memory_estimate=False, **config)
    )


# ------------------------------------------------------------------------------------------ sampling semantics


def test_a_sampler_temperature_other_than_the_learners_is_refused():
    model = build_tiny("qwen3_moe")
    trajectories = _trajectories([1, 0, 1, 0], sampling={**FULL, "temperature": 0.7})
    with pytest.raises(ValueError, match=r"temperature 0.7 but the learner scores softmax\(logits / 1.0\)"):
        _learner(model).step(trajectories)
    # At the learner's temperature it trains.
    assert _learner(model, temperature=0.7).step(trajectories)["optimizer_steps"] > 0


def test_sampler_logprobs_renormalised_over_a_nucleus_are_refused_as_logp_old():
    model = build_tiny("qwen3_moe")
    nucleus = _trajectories([1, 0, 1, 0], sampling={**FULL, "top_p": 0.9, "logprobs": "truncated"})
    with pytest.raises(ValueError, match=r"logp_old='sampler'.*renormalised.*--logp-old recompute"):
        _learner(model, logp_old="sampler").step(nucleus)
    # The same records are fine when logp_old is recomputed, and full-vocabulary log-probs at top_p < 1 are too.
    assert _learner(model).step(nucleus)["optimizer_steps"] > 0
    full = _trajectories([1, 0, 1, 0], sampling={**FULL, "top_p": 0.9})
    assert _learner(model, logp_old="sampler").step(full)["optimizer_steps"] > 0
    scripted = _trajectories([1, 0, 1, 0], sampling={**FULL, "logprobs": "none"})
    with pytest.raises(ValueError, match="no log-probs"):
        _learner(model, logp_old="sampler").step(scripted)


# ------------------------------------------------------------------------------------------ the first update


def test_the_first_updates_ratios_are_exactly_one_and_nothing_clips_in_fp32():
    """logp_old is recomputed over the very micro-batches the first update forwards (same rows, same padding), so
    in fp32 the first minibatch's ratios are 1 exactly and its clip fractions 0 (tiny micro-batches: the scoring
    pass and the updates would otherwise group rows differently). first_logp_old="recompute" scores the first
    minibatch too, so this checks the recompute against the training forward."""
    model = build_tiny("qwen3_moe")
    learner = _learner(model, micro_batch_tokens=40, first_logp_old="recompute")
    metrics = learner.step(_trajectories([1, 0, 0, 1, 0, 1, 1, 0]))
    assert metrics["optimizer_steps"] == 4
    assert metrics["mb0_ratio_min"] == metrics["mb0_ratio_mean"] == metrics["mb0_ratio_max"] == 1.0
    assert metrics["mb0_clip_frac_seq"] == metrics["mb0_clip_frac_token"] == 0.0


def test_dropout_and_router_jitter_are_off_in_the_learners_forwards():
    """A Mixtral checkpoint with router jitter and attention dropout: logp_old and logp would be independent random
    draws in training mode, and the first update's ratios would not be 1."""
    model = build_tiny("mixtral", router_jitter_noise=0.5, attention_dropout=0.5)
    learner = _learner(model, micro_batch_tokens=10**6, first_logp_old="recompute")  # the recompute vs the forward
    metrics = learner.step(_trajectories([1, 0, 0, 1, 0, 1, 1, 0]))
    assert metrics["mb0_ratio_min"] == metrics["mb0_ratio_max"] == 1.0
    changed = disable_stochastic_layers(build_tiny("mixtral", router_jitter_noise=0.5, attention_dropout=0.5))
    assert any(c.endswith(".jitter_noise") for c in changed) and any(c.endswith(".attention_dropout") for c in changed)


def test_accelerates_gradient_accumulation_is_refused_naming_the_flag():
    """accelerator.backward divides every loss by gradient_accumulation_steps: a silent rescale of the 1/N mean."""
    with pytest.raises(ValueError, match="--gradient_accumulation_steps"):
        _learner(build_tiny("qwen3_moe"), accelerator=Accelerator(cpu=True, gradient_accumulation_steps=2))


# ------------------------------------------------------------------------------------------ weighting


def _gradients_after_step(model, trajectories, **config):
    """The learner's gradient, read as minus the parameter change of one SGD(lr=1) step."""
    before = [p.detach().clone() for p in model.parameters()]
    learner = _learner(
        model,
        optimizer=torch.optim.SGD(model.parameters(), lr=1.0),
        minibatches=1,
        micro_batch_tokens=10**6,
        max_grad_norm=None,
        volatility_rows=0,
        router_aux_loss_coef=0.0,
        skip_zero_advantage=False,
        **config,
    )
    learner.step(trajectories)
    return [b - p.detach() for p, b in zip(model.parameters(), before)]


def test_split_turns_samples_weigh_one_episode_per_episode_by_default():
    """Episode a: 2 turn samples, reward 1; episode b: 1 sample, reward 0 (one group). The paper's per-trajectory
    mean: loss = -(1/2) [A_a (m_a1 + m_a2) / 2 + A_b m_b] with m the mean log-prob of a sample's sampled tokens (at
    s = 1); per-turn weighting would use -(1/3) [A_a m_a1 + A_a m_a2 + A_b m_b]."""
    meta = [
        {"episode_turn": 0, "episode_turns": 2},
        {"episode_turn": 1, "episode_turns": 2},
        {"episode_turn": 0, "episode_turns": 1},
    ]
    trajectories = _trajectories([1, 1, 0], group_size=3, metadata=meta)
    for t in trajectories:  # episode a is (group 0, sample 0), episode b (group 0, sample 1)
        t.group_id, t.sample_id, t.seed = 0, 0 if t.metadata["episode_turns"] == 2 else 1, 7
    torch.manual_seed(0)
    base = build_tiny("qwen3_moe")

    def expected(weights, normaliser):
        model = copy.deepcopy(base)
        batch = collate(trajectories, 0)
        logp = logprobs_from_logits(forward(model, batch).logits, batch.input_ids).double()  # [B, T]
        per_sample = torch.where(batch.loss_mask, logp, 0.0).sum(-1) / batch.loss_mask.sum(-1)  # [B]
        advantage = torch.tensor([0.70710678, 0.70710678, -0.70710678], dtype=torch.float64)  # +-1/sqrt(2), n=2
        loss = -(torch.tensor(weights, dtype=torch.float64) * advantage * per_sample).sum() / normaliser
        loss.backward()
        return [p.grad for p in model.parameters()]

    for setting, weights, normaliser in (("episode", [0.5, 0.5, 1.0], 2.0), ("turn", [1.0, 1.0, 1.0], 3.0)):
        got = _gradients_after_step(copy.deepcopy(base), trajectories, split_turns_weight=setting)
        want = expected(weights, normaliser)
        worst = max((g - w.float()).abs().max().item() for g, w in zip(got, want))
        scale = max(w.abs().max().item() for w in want)
        assert worst <= 1e-5 * scale, (setting, worst, scale)
    assert sample_weights(trajectories).tolist() == [0.5, 0.5, 1.0]


def test_a_turn_baseline_credits_the_turn_that_earned_the_reward_when_returns_tie():
    """Both episodes return 1, one earning it at turn 0, the other at turn 1: the episode baseline gives every turn
    0; the per-turn baseline compares each turn's return-to-go with the group's at that turn."""
    rewards = [[0.0, 1.0], [1.0, 0.0]]
    episode, _ = turn_advantages(rewards, 2)
    assert episode.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    turn, _ = turn_advantages(rewards, 2, baseline="turn")
    assert turn[0, 1] > 0 > turn[1, 1] and turn[:, 0].tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="turn_baseline"):
        LearnerConfig(turn_baseline="token")


# ------------------------------------------------------------------------------------------ MoE and KL


def test_routing_volatility_is_per_update_with_the_whole_step_under_its_own_name():
    """The paper's ~10% is the share of expert choices ONE update changes: ``routing_volatility`` is measured after
    the first optimizer step; ``routing_volatility_step`` after all of the step's updates."""
    torch.manual_seed(0)
    base = build_tiny("qwen3_moe", num_hidden_layers=3)
    trajectories = _trajectories([1, 0, 0, 1, 0, 1, 1, 0])
    one = _learner(copy.deepcopy(base), minibatches=1, optimizer=None).step(trajectories)
    assert one["routing_volatility"] == one["routing_volatility_step"]  # one update: the same figure
    model = copy.deepcopy(base)
    learner = _learner(model, minibatches=4, optimizer=torch.optim.SGD(model.parameters(), lr=5.0))
    four = learner.step(trajectories)
    assert four["optimizer_steps"] == 4
    assert 0.0 < four["routing_volatility"] < four["routing_volatility_step"] <= 1.0


def _count_forwards(model):
    """A list that grows by one per forward of ``model`` (a forward pre-hook on the module)."""
    calls = []
    model.register_forward_pre_hook(lambda module, args: calls.append(1))
    return calls


def test_the_first_updates_logp_old_is_its_own_forward_and_the_probe_reads_the_learners_forwards():
    """Default settings: the first update's logp_old is its own forward's (the weights are still the old
    policy's), and the routing-volatility probe reads its expert choices during the recompute and the second
    update's forward, so a step of 4 minibatches (one micro-batch each) runs 3 scoring passes, 4 training forwards
    and 1 probe pass after the last update: 8 forwards where it ran 4 + 4 + 3 = 11. The update, the loss and the
    sampler gap are the recompute's (first_logp_old="recompute"), bit for bit on this fp32 CPU model."""
    torch.manual_seed(0)
    base = build_tiny("qwen3_moe", num_hidden_layers=3)
    trajectories = _trajectories([1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 0, 0, 0, 1, 1, 1])
    results = {}
    for first in ("forward", "recompute"):
        model = copy.deepcopy(base)
        calls = _count_forwards(model)
        learner = _learner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.5), first_logp_old=first)
        metrics = learner.step(trajectories)
        results[first] = (len(calls), metrics, [p.detach().clone() for p in model.parameters()])
    forwards, metrics, weights = results["forward"]
    assert metrics["optimizer_steps"] == 4 and 0.0 < metrics["routing_volatility"] <= 1.0
    assert forwards == 3 + 4 + 1
    assert results["recompute"][0] == 4 + 4 + 1
    _, recomputed, recomputed_weights = results["recompute"]
    assert all(torch.equal(a, b) for a, b in zip(weights, recomputed_weights))
    for name in ("loss", "mb0_ratio_mean", "clip_frac_seq", "routing_volatility", "routing_volatility_step"):
        assert metrics[name] == recomputed[name], name
    assert metrics["mb0_ratio_min"] == metrics["mb0_ratio_max"] == 1.0
    assert metrics["sampler_logprob_gap"] == pytest.approx(recomputed["sampler_logprob_gap"], rel=1e-12)


def _probe_as_before(model, trajectories, snapshots, rows):
    """Routing volatility as the learner measured it before it read its own forwards: fresh no-grad forwards of
    the probed rows' own batch under the weights before the first update, after it and after the last."""
    batch = collate([trajectories[i] for i in rows], 0)
    k = model.config.num_experts_per_tok
    choices = []
    for state in snapshots:
        model.load_state_dict(state)
        with torch.no_grad():
            choices.append(expert_choices(model, batch, k))  # [L, N, k]
    return routing_volatility(choices[0], choices[1]), routing_volatility(choices[0], choices[-1])


@pytest.mark.parametrize(
    "config",
    [
        {},  # read during the recompute and the second update's forward; one pass after the last update
        {"minibatches": 1},  # read during the only update's forward, then one pass after it
        {"logp_old": "sampler"},  # no recompute: a pass before the first update
        {"first_logp_old": "recompute", "micro_batch_tokens": 60},  # several micro-batches per minibatch
    ],
    ids=["default", "one-update", "sampler-logp-old", "recompute-first"],
)
def test_routing_volatility_read_from_the_learners_forwards_equals_a_probe_of_its_own(config):
    """The metric is the same quantity as when the probe ran forwards of its own: the share of the probed rows'
    (layer, token, slot) top-k expert choices that the first update (``routing_volatility``) and all the step's
    updates (``routing_volatility_step``) change, each choice the top-k of the live router logits, the same value
    on a fixed batch. The probed rows are the second minibatch's (the first's with one)."""
    torch.manual_seed(0)
    base = build_tiny("qwen3_moe", num_hidden_layers=3)
    trajectories = _trajectories([1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 0, 0, 0, 1, 1, 1])
    model = copy.deepcopy(base)
    learner = _learner(model, optimizer=torch.optim.SGD(model.parameters(), lr=5.0), **config)
    unwrapped = learner.accelerator.unwrap_model(learner.model)
    snapshots = [copy.deepcopy(unwrapped.state_dict())]
    step = learner.optimizer.step

    def step_and_keep(*args, **kwargs):
        out = step(*args, **kwargs)
        snapshots.append(copy.deepcopy(unwrapped.state_dict()))
        return out

    learner.optimizer.step = step_and_keep
    probes = []
    make_probe = learner._routing_probe
    learner._routing_probe = lambda *args: probes.append(make_probe(*args)) or probes[-1]
    metrics = learner.step(trajectories)
    rows = probes[0].rows
    assert len(rows) == min(16, len(trajectories) // config.get("minibatches", 4))
    per_update, whole_step = _probe_as_before(copy.deepcopy(base), trajectories, snapshots, rows)
    assert 0.0 < per_update <= whole_step
    assert metrics["routing_volatility"] == per_update
    assert metrics["routing_volatility_step"] == whole_step


def test_k3s_gradient_is_the_forward_kls_gradient():
    """On a categorical distribution, the exact expectation under pi_theta of grad k3 (tokens fixed, as the loss
    differentiates it) equals grad KL(pi_ref || pi_theta), not grad KL(pi_theta || pi_ref)."""
    torch.manual_seed(0)
    logits = torch.randn(6, dtype=torch.float64, requires_grad=True)
    ref = torch.log_softmax(torch.randn(6, dtype=torch.float64), -1)
    logp = torch.log_softmax(logits, -1)
    probs = logp.exp().detach()
    # E_{y ~ pi_theta}[k3(y)] as a sum over the vocabulary, each token weighted by its (detached) probability.
    k3 = kl_k3(logp[:, None], ref[:, None], torch.ones(6, 1, dtype=torch.bool))  # [6]: one token per "sequence"
    (grad_k3,) = torch.autograd.grad((probs * k3).sum(), logits)
    (forward_kl,) = torch.autograd.grad((ref.exp() * (ref - torch.log_softmax(logits, -1))).sum(), logits)
    (reverse_kl,) = torch.autograd.grad(
        (torch.softmax(logits, -1) * (torch.log_softmax(logits, -1) - ref)).sum(), logits
    )
    assert torch.allclose(grad_k3, forward_kl, atol=1e-12)
    assert not torch.allclose(grad_k3, reverse_kl, atol=1e-3)


# ------------------------------------------------------------------------------------------ logged population


def test_logged_reward_is_over_the_trained_episodes_with_the_excluded_share_beside():
    from agentgspo.rollouts.rollout import summarize

    trajectories = _trajectories([1, 0, 0, 0])
    trajectories[1].stop_reason = "sampler_error"  # no one's answer: not trained, so not in the reward either
    trajectories[2].stop_reason = "env_timeout"
    metrics = rollout_metrics_over_ranks(Accelerator(cpu=True), summarize(trajectories))
    assert metrics == {"reward_mean": 0.5, "success": 0.5, "trained_episodes": 2.0, "excluded_frac": 0.5}


# ------------------------------------------------------------------------------------------ endings, end to end


def test_a_hung_env_call_is_left_out_of_the_group_and_a_spent_budget_is_trained():
    """Rollout to learner: the episode whose env call hangs past env_call_timeout_s ends as env_timeout (the
    machine's fault) and is not in its group's advantages; one that spends its env budget is truncated and trained."""
    import itertools
    import threading

    import agentgspo
    from agentgspo.core.sampling import SamplingParams
    from agentgspo.policy.base import ScriptedPolicy
    from agentgspo.policy.hf import HFPolicy
    from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner, summarize
    from agentgspo.models.tiny import tiny_policy_path

    release, made = threading.Event(), itertools.count()

    class SayYes(agentgspo.ChatEnv):
        def __init__(self):
            super().__init__()
            self.hangs = next(made) == 0  # one episode's machine hangs

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return [{"role": "user", "content": "Say yes."}], {}

        def respond(self, action):
            if self.hangs:
                release.wait()
            return [], float(action.content.strip() == "yes"), True, False, {}

    answers = itertools.cycle(["yes", "no"])
    policy = HFPolicy.from_pretrained(tiny_policy_path())
    scripted = ScriptedPolicy(lambda messages: next(answers), policy.renderer)
    runner = RolloutRunner(
        SayYes,
        scripted,
        policy.renderer,
        RolloutConfig(group_size=4, max_turns=1, env_call_timeout_s=1.0, sampling=SamplingParams(max_new_tokens=8)),
    )
    try:
        trajectories = runner.run_sync([0])
    finally:
        release.set()
    assert sorted(t.stop_reason for t in trajectories) == ["completed"] * 3 + ["env_timeout"]
    batch = summarize(trajectories)
    assert (batch["trained_episodes"], batch["excluded_frac"]) == (3, 0.25)
    metrics = _learner(policy.model).step(trajectories)
    assert (metrics["excluded_sequences"], metrics["trained_sequences"]) == (1, 3)

    spent = _trajectories([1, 0, 0, 1])
    spent[1].stop_reason = spent[2].stop_reason = "env_budget"  # the policy's tool use spent the budget: trained
    metrics = _learner(build_tiny("qwen3_moe")).step(spent)
    assert (metrics["excluded_sequences"], metrics["trained_sequences"]) == (0, 4)
