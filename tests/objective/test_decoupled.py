"""The decoupled objectives for a stale sampler (agentgspo.objective.correction, ``shared/ASYNC.md``): the formula by
hand, w = 1 as the paper's losses bit for bit, truncation and mask, the token and turn forms, the learner's settings and
a learner step on a batch whose sampler log-probs are shifted off the policy's."""

import math

import pytest
import torch

from agentgspo.learning.learner import LearnerConfig, loss_for
from agentgspo.objective.batching import collate, score
from agentgspo.objective import OBJECTIVES, decoupled
from agentgspo.objective.correction import Decoupled
from agentgspo.objective.terms import SEQUENCE, TOKEN, TURN

from learner_support import _learner, _trajectories  # tests/learner_support.py: the tiny policy's learner, batches
from test_loss import random_batch  # tests/objective/test_loss.py: ragged float64 batches with an empty row

gspo_loss, gspo_turn_loss, gspo_token_loss, grpo_loss = (
    OBJECTIVES[name] for name in ("gspo", "gspo_turn", "gspo_token", "grpo")
)
decoupled_gspo_loss, decoupled_gspo_turn_loss, decoupled_gspo_token_loss, decoupled_grpo_loss = (
    decoupled(objective) for objective in (gspo_loss, gspo_turn_loss, gspo_token_loss, grpo_loss)
)

EPS = {"eps_low": 0.1, "eps_high": 0.1}  # a wide band, so that chosen ratios clip or not by hand


def _rows(*rows, length=3):
    """``[B, T]`` float64 from per-row lists of trained-token values (right-padded with 0), and the mask."""
    values = torch.zeros(len(rows), length, dtype=torch.float64)
    mask = torch.zeros(len(rows), length, dtype=torch.bool)
    for r, row in enumerate(rows):
        values[r, : len(row)] = torch.tensor(row, dtype=torch.float64)
        mask[r, : len(row)] = True
    return values, mask


def _hand_batch():
    """Four sequences (lengths 2, 3, 1, 0) with chosen sequence ratios s_i against pi_prox and per-token behaviour
    gaps log pi_prox - log mu whose means are log w_i = 0.5, 0.005, -0.2 (the tokens differ: only the geometric mean
    gives those w_i)."""
    prox = -torch.rand(4, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)  # [B, T]
    step, mask = _rows([0.05, 0.05], [-0.02, -0.02, -0.02], [0.3], [])  # log s_i per token: s = e^.05, e^-.02, e^.3
    gap, _ = _rows([0.2, 0.8], [0.005, -0.01, 0.02], [-0.2], [])  # log pi_prox - log mu per token
    advantages = torch.tensor([1.0, -1.0, 2.0, 0.5], dtype=torch.float64)
    return prox + step, prox, prox - gap, advantages, mask


@pytest.mark.parametrize("correction", ["tis", "mask"])
def test_the_formula_by_hand(correction):
    """J = (1/N) sum_i w'_i min(s_i A_i, clip(s_i) A_i) with s_i against pi_prox: sequence 0 is unclipped (against
    mu it would be e^0.55, clipped), sequence 1 unclipped, sequence 2 clipped at 1 + 0.1; N = 3 non-empty rows.
    tis (C = 1.5) truncates w_0 = e^0.5; the mask [0.99, 1.01] drops sequences 0 and 2 (w = e^0.5, e^-0.2)."""
    logp, prox, behaviour, advantages, mask = _hand_batch()
    logp.requires_grad_()
    loss, diagnostics = decoupled_gspo_loss(
        logp, prox, advantages, mask, behaviour_logprobs=behaviour, correction=correction, tis_cap=1.5, **EPS
    )
    (grad,) = torch.autograd.grad(loss, logp)
    w = [math.exp(0.5), math.exp(0.005), math.exp(-0.2)]
    kept = [min(w[0], 1.5), w[1], w[2]] if correction == "tis" else [0.0, w[1], 0.0]
    terms = [math.exp(0.05) * 1.0, math.exp(-0.02) * -1.0, (1 + 0.1) * 2.0]  # min(s A, clip(s) A); 2: clipped
    assert loss.item() == pytest.approx(-sum(k * t for k, t in zip(kept, terms)) / 3, rel=1e-12)
    # Each unclipped token of sequence i: d loss / d logp_it = -w'_i s_i A_i / (N |y_i|); the clipped one gets 0.
    expected = torch.zeros(4, 3, dtype=torch.float64)
    expected[0, :2] = -kept[0] * terms[0] / (3 * 2)
    expected[1, :3] = -kept[1] * terms[1] / (3 * 3)
    torch.testing.assert_close(grad, expected, rtol=1e-12, atol=0)
    assert diagnostics["behaviour_kl"].item() == pytest.approx((0.2 + 0.8 + 0.005 + 0.01 + 0.02 + 0.2) / 6)
    assert diagnostics["behaviour_weight_mean"].item() == pytest.approx(sum(w) / 3)
    assert diagnostics["behaviour_weight_max"].item() == pytest.approx(w[0])
    share = {"tis": ("behaviour_truncated_frac", 1 / 3), "mask": ("behaviour_masked_frac", 2 / 3)}[correction]
    assert diagnostics[share[0]].item() == pytest.approx(share[1])
    # The clip fractions are against pi_prox: only sequence 2 (s = e^0.3) clips, at the high side.
    assert diagnostics["clip_frac_seq"].item() == pytest.approx(1 / 3)
    assert diagnostics["clip_frac_high"].item() == pytest.approx(1 / 3)
    assert diagnostics["num_sequences"].item() == 3


def test_the_behaviour_weight_carries_no_gradient():
    """w is a constant: neither pi_prox's nor mu's log-probs receive a gradient, and the policy's gradient is w'
    times gspo_loss's (no d w / d theta term)."""
    logp, prox, behaviour, advantages, mask = _hand_batch()
    logp, prox, behaviour = (x.clone().requires_grad_() for x in (logp, prox, behaviour))
    loss, _ = decoupled_gspo_loss(
        logp, prox, advantages, mask, behaviour_logprobs=behaviour, correction="tis", tis_cap=100.0, **EPS
    )
    grads = torch.autograd.grad(loss, [logp, prox, behaviour], allow_unused=True)
    assert grads[1] is None and grads[2] is None
    base, _ = gspo_loss(logp, prox, advantages, mask, **EPS)
    (base_grad,) = torch.autograd.grad(base, logp)
    w = torch.tensor([math.exp(0.5), math.exp(0.005), math.exp(-0.2), 1.0], dtype=torch.float64)  # [B]
    torch.testing.assert_close(grads[0], w[:, None] * base_grad, rtol=1e-12, atol=0)


PAIRS = [
    (gspo_loss, decoupled_gspo_loss),
    (gspo_token_loss, decoupled_gspo_token_loss),
    (grpo_loss, decoupled_grpo_loss),
    (gspo_turn_loss, decoupled_gspo_turn_loss),
]


@pytest.mark.parametrize("correction", ["tis", "mask"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("paper, decoupled", PAIRS, ids=[p.name for p, _ in PAIRS])
def test_mu_equal_to_pi_prox_is_the_paper_loss_bit_for_bit(paper, decoupled, dtype, correction):
    """w = 1 (mu == pi_prox): loss, gradient and the shared diagnostics are torch.equal to the loss it extends, with
    some ratios clipped (scale 0.3 against a 0.05 band)."""
    logp, prox, advantages, mask = random_batch(scale=0.3)
    logp, prox = logp.detach().to(dtype), prox.to(dtype)
    turns = (torch.where(mask, (torch.arange(7) >= 2).long(), -1),) if paper is gspo_turn_loss else ()  # 2 turns
    results = []
    for loss_fn, behaviour in (
        (paper, {}),
        (decoupled, {"behaviour_logprobs": prox.clone(), "correction": correction}),
    ):
        x = logp.clone().requires_grad_()
        loss, diagnostics = loss_fn(x, prox, advantages, mask, *turns, eps_low=0.05, eps_high=0.05, **behaviour)
        results.append((loss, torch.autograd.grad(loss, x)[0], diagnostics))
    (loss, grad, diagnostics), (d_loss, d_grad, d_diagnostics) = results
    assert 0 < diagnostics["clip_frac_token"] < 1  # the clipped and the unclipped branch are both exercised
    assert torch.equal(loss, d_loss) and torch.equal(grad, d_grad)
    for name, value in diagnostics.items():
        assert torch.equal(value, d_diagnostics[name]) or (value.isnan() and d_diagnostics[name].isnan()), name
    assert d_diagnostics["behaviour_kl"] == 0 and d_diagnostics["behaviour_weight_mean"] == 1


def _one_term_per_sequence(log_weights):
    """Sequences of 2 tokens, unclipped (s = 1, A = 1), whose behaviour weights are exp(log_weights)."""
    prox = torch.full((len(log_weights), 2), -1.0, dtype=torch.float64)  # [B, T]
    behaviour = prox - torch.tensor(log_weights, dtype=torch.float64)[:, None]  # [B, T], every token's gap log w
    return prox.clone().requires_grad_(), prox, behaviour, torch.ones(len(log_weights), dtype=torch.float64)


def test_the_mask_drops_sequences_outside_the_band_and_keeps_them_in_n():
    """Band [0.99, 1.01]: w = e^0.009 (1.00904) is kept with its weight; e^0.011 (1.01106) and e^-0.011 (0.98906)
    are dropped: no loss, no gradient, but N stays 3."""
    logp, prox, behaviour, advantages = _one_term_per_sequence([0.009, 0.011, -0.011])
    mask = torch.ones_like(prox, dtype=torch.bool)
    loss, diagnostics = decoupled_gspo_loss(
        logp, prox, advantages, mask, behaviour_logprobs=behaviour, correction="mask"
    )
    (grad,) = torch.autograd.grad(loss, logp)
    assert loss.item() == pytest.approx(-math.exp(0.009) / 3, rel=1e-12)
    assert torch.equal(grad[1:], torch.zeros(2, 2, dtype=torch.float64))
    assert grad[0].tolist() == pytest.approx([-math.exp(0.009) / 6] * 2, rel=1e-12)
    assert diagnostics["behaviour_masked_frac"].item() == pytest.approx(2 / 3)


def test_tis_caps_the_weight_and_counts_what_it_truncated():
    """C = 5: w = e^3 (20.1) weighs 5, w = e (2.72) and w = e^-1 weigh themselves."""
    logp, prox, behaviour, advantages = _one_term_per_sequence([3.0, 1.0, -1.0])
    mask = torch.ones_like(prox, dtype=torch.bool)
    loss, diagnostics = decoupled_gspo_loss(
        logp, prox, advantages, mask, behaviour_logprobs=behaviour, correction="tis"
    )
    (grad,) = torch.autograd.grad(loss, logp)
    assert grad[:, 0].tolist() == pytest.approx([-5.0 / 6, -math.e / 6, -1 / (6 * math.e)], rel=1e-12)
    assert loss.item() == pytest.approx(-(5.0 + math.e + 1 / math.e) / 3, rel=1e-12)
    assert diagnostics["behaviour_truncated_frac"].item() == pytest.approx(1 / 3)
    assert diagnostics["behaviour_weight_max"].item() == pytest.approx(math.exp(3.0))  # before truncation


NON_FINITE = [float("nan"), float("inf"), float("-inf")]


@pytest.mark.parametrize("bad", NON_FINITE)
@pytest.mark.parametrize("correction", ["tis", "mask"])
def test_a_non_finite_behaviour_logprob_drops_its_sequence_and_is_counted(correction, bad):
    """The hand batch with mu's second token of sequence 0 NaN / +inf / -inf (a broken sampler kernel): w_0 is not
    a number (or 0, or inf), so sequence 0 is dropped under either correction (tis no longer caps an infinite weight
    at C), still counts in N = 3, and is counted in ``behaviour_nonfinite_frac``; the loss and every gradient stay
    finite (before: tis made the loss NaN, and the mask's dropped unit still sent 0 * NaN = NaN into the gradient)."""
    logp, prox, behaviour, advantages, mask = _hand_batch()
    behaviour[0, 1] = bad
    logp.requires_grad_()
    loss, diagnostics = decoupled_gspo_loss(
        logp, prox, advantages, mask, behaviour_logprobs=behaviour, correction=correction, tis_cap=1.5, **EPS
    )
    (grad,) = torch.autograd.grad(loss, logp)
    w = [math.exp(0.005), math.exp(-0.2)]  # sequences 1 and 2
    kept = w if correction == "tis" else [w[0], 0.0]  # the mask also drops sequence 2 (e^-0.2, out of band)
    terms = [math.exp(-0.02) * -1.0, (1 + 0.1) * 2.0]
    assert loss.item() == pytest.approx(-sum(k * t for k, t in zip(kept, terms)) / 3, rel=1e-12)
    expected = torch.zeros(4, 3, dtype=torch.float64)
    expected[1, :3] = -kept[0] * terms[0] / (3 * 3)
    torch.testing.assert_close(grad, expected, rtol=1e-12, atol=0)
    assert diagnostics["behaviour_nonfinite_frac"].item() == pytest.approx(1 / 3)
    if correction == "tis":
        assert diagnostics["behaviour_truncated_frac"].item() == 0.0  # the dropped unit is not also truncated
    else:
        assert diagnostics["behaviour_masked_frac"].item() == pytest.approx(2 / 3)  # dropped: in the masked share
    # The other diagnostics describe the finite units and tokens instead of turning NaN.
    assert diagnostics["behaviour_weight_mean"].item() == pytest.approx(sum(w) / 2)
    assert diagnostics["behaviour_kl"].item() == pytest.approx((0.2 + 0.005 + 0.01 + 0.02 + 0.2) / 5)


BAND = {"eps_low": 0.05, "eps_high": 0.05}  # random_batch(scale=0.3) then clips some units, not all
DROPPED_POSITIONS = {  # where random_batch's row 1 (3 trained tokens) loses its gradient when mu[1, 1] is broken
    decoupled_gspo_loss: [(1, 0), (1, 1), (1, 2)],  # the whole sequence
    decoupled_gspo_token_loss: [(1, 0), (1, 1), (1, 2)],  # the sequence's weight
    decoupled_grpo_loss: [(1, 1)],  # the token's own weight
    decoupled_gspo_turn_loss: [(1, 0), (1, 1)],  # turn 0 (positions < 2); turn 1 keeps its gradient
}


@pytest.mark.parametrize("bad", NON_FINITE)
@pytest.mark.parametrize("correction", ["tis", "mask"])
@pytest.mark.parametrize("decoupled", list(DROPPED_POSITIONS), ids=lambda f: f.name)
def test_every_decoupled_loss_drops_only_the_unit_with_a_non_finite_weight(decoupled, correction, bad):
    """With mu == pi_prox (w = 1) except one broken log-prob, the loss and gradient are finite, the gradient is the
    clean batch's everywhere but on the broken weight's unit (0 there), and ``behaviour_nonfinite_frac`` is one unit
    of the loss's weight unit (``loss.weight_unit.count``)."""
    logp, prox, advantages, mask = random_batch(scale=0.3)
    turns = (torch.where(mask, (torch.arange(7) >= 2).long(), -1),) if decoupled is decoupled_gspo_turn_loss else ()
    grads = []
    for broken in (False, True):
        behaviour = prox.clone()
        if broken:
            behaviour[1, 1] = bad
        x = logp.detach().clone().requires_grad_()
        loss, diagnostics = decoupled(
            x, prox, advantages, mask, *turns, behaviour_logprobs=behaviour, correction=correction, **BAND
        )
        grads.append(torch.autograd.grad(loss, x)[0])
        assert torch.isfinite(loss) and torch.isfinite(grads[-1]).all()
    clean, dirty = grads
    expected = clean.clone()
    for position in DROPPED_POSITIONS[decoupled]:
        expected[position] = 0.0
    assert clean[1].abs().sum() > 0  # the dropped unit had a gradient to lose
    torch.testing.assert_close(dirty, expected, rtol=0, atol=0)
    units = diagnostics[decoupled.weight_unit.count].item()
    assert diagnostics["behaviour_nonfinite_frac"].item() == pytest.approx(1 / units)


def test_gspo_token_weighs_each_token_by_its_sequence_weight():
    """With A_it = A_i the token form equals the sequence form under a stale mu (the weight is the sequence's
    geometric mean, not each token's own ratio); with per-token advantages each token's gradient is w'_i times
    gspo_token_loss's."""
    logp, prox, advantages, mask = random_batch(scale=1e-3)
    behaviour = prox - 0.02 * torch.randn(prox.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    kwargs = {"behaviour_logprobs": behaviour, "correction": "mask"}
    results = []
    for loss_fn in (decoupled_gspo_loss, decoupled_gspo_token_loss):
        x = logp.detach().clone().requires_grad_()
        loss, diagnostics = loss_fn(x, prox, advantages, mask, **kwargs)
        results.append((loss, torch.autograd.grad(loss, x)[0], diagnostics))
    (seq_loss, seq_grad, seq_diag), (tok_loss, tok_grad, tok_diag) = results
    assert 0 < seq_diag["behaviour_masked_frac"] < 1  # some sequences dropped, some kept
    torch.testing.assert_close(tok_loss, seq_loss, rtol=1e-12, atol=0)
    torch.testing.assert_close(tok_grad, seq_grad, rtol=1e-12, atol=1e-15)
    assert tok_diag["behaviour_masked_frac"] == seq_diag["behaviour_masked_frac"]

    per_token = torch.randn(prox.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)  # [B, T]
    x = logp.detach().clone().requires_grad_()
    loss, _ = decoupled_gspo_token_loss(x, prox, per_token, mask, behaviour_logprobs=behaviour, correction="tis")
    (grad,) = torch.autograd.grad(loss, x)
    base, _ = gspo_token_loss(x, prox, per_token, mask)
    (base_grad,) = torch.autograd.grad(base, x)
    lengths = mask.sum(-1).clamp(min=1)
    w = torch.exp(torch.where(mask, prox - behaviour, 0.0).sum(-1) / lengths)  # [B], under the cap 5
    torch.testing.assert_close(grad, w[:, None] * base_grad, rtol=1e-12, atol=1e-15)


def test_grpo_weighs_each_token_by_its_own_weight():
    """Token weights w_it = pi_prox / mu per token: tokens 0 and 1 of one sequence with w = e^0.5 and e^2, C = 5:
    d loss / d logp_it = -w'_it r_it A / |y| (r = 1)."""
    prox = torch.tensor([[-1.0, -2.0]], dtype=torch.float64)
    behaviour = prox - torch.tensor([[0.5, 2.0]], dtype=torch.float64)
    logp = prox.clone().requires_grad_()
    mask = torch.ones_like(prox, dtype=torch.bool)
    advantages = torch.tensor([1.0], dtype=torch.float64)
    loss, diagnostics = decoupled_grpo_loss(
        logp, prox, advantages, mask, behaviour_logprobs=behaviour, correction="tis"
    )
    (grad,) = torch.autograd.grad(loss, logp)
    assert grad[0].tolist() == pytest.approx([-math.exp(0.5) / 2, -5.0 / 2], rel=1e-12)
    assert diagnostics["behaviour_truncated_frac"].item() == pytest.approx(1 / 2)  # a share of tokens
    assert diagnostics["behaviour_weight_mean"].item() == pytest.approx((math.exp(0.5) + math.exp(2.0)) / 2)


def test_the_turn_unit_weighs_each_turn_from_its_own_tokens():
    """One trajectory of two turns: turn 0 (2 tokens, w = e^0.005) is kept, turn 1 (2 tokens, w = e^-0.02) is
    dropped by the mask, though the trajectory's geometric mean (e^-0.0075) is inside the band. The dropped turn still
    counts in K_i = 2: loss = -(1/1)(1/2) w_0 s_0 A_0."""
    prox = torch.full((1, 4), -1.0, dtype=torch.float64)
    behaviour = prox - torch.tensor([[0.005, 0.005, -0.02, -0.02]], dtype=torch.float64)
    logp = prox.clone().requires_grad_()
    mask = torch.ones_like(prox, dtype=torch.bool)
    turn_ids = torch.tensor([[0, 0, 1, 1]])
    advantages = torch.tensor([[1.0, 3.0]], dtype=torch.float64)  # [B, K], per turn
    loss, diagnostics = decoupled_gspo_turn_loss(
        logp, prox, advantages, mask, turn_ids, behaviour_logprobs=behaviour, correction="mask"
    )
    (grad,) = torch.autograd.grad(loss, logp)
    assert loss.item() == pytest.approx(-math.exp(0.005) / 2, rel=1e-12)
    assert grad[0].tolist() == pytest.approx([-math.exp(0.005) / 4] * 2 + [0.0, 0.0], rel=1e-12)
    assert diagnostics["behaviour_masked_frac"].item() == pytest.approx(1 / 2)  # a share of turns
    assert diagnostics["num_turns"].item() == 2
    sequence_level, _ = decoupled_gspo_loss(
        logp, prox, advantages[:, 0], mask, behaviour_logprobs=behaviour, correction="mask"
    )
    assert sequence_level.item() != 0  # the same tokens as one sequence are kept


def test_each_decoupled_loss_declares_its_clip_and_weight_units():
    """The clip unit is the loss it extends; the weight's unit is the sequence for GSPO-token (its w_i), the turn
    for the turn unit and the token for GRPO."""
    for paper, corrected in PAIRS:
        assert (corrected.unit, corrected.diagnostics) == (paper.unit, paper.diagnostics)
    units = [corrected.weight_unit for _, corrected in PAIRS]
    assert units == [SEQUENCE, SEQUENCE, TOKEN, TURN]


def test_an_unknown_correction_and_misshapen_behaviour_logprobs_are_refused():
    logp, prox, behaviour, advantages, mask = _hand_batch()
    with pytest.raises(ValueError, match="correction: expected one of"):
        decoupled_gspo_loss(logp, prox, advantages, mask, behaviour_logprobs=behaviour, correction="icepop")
    with pytest.raises(ValueError, match="behaviour_logprobs"):
        decoupled_gspo_loss(logp, prox, advantages, mask, behaviour_logprobs=behaviour[:, :2], correction="tis")


# ------------------------------------------------------------------------------------------------ the learner


def test_config_selects_the_decoupled_loss_for_every_objective_and_unit():
    combinations = {
        ("gspo", "trajectory"): "gspo",
        ("gspo", "turn"): "gspo_turn",
        ("gspo_turn", "trajectory"): "gspo_turn",
        ("gspo_token", "trajectory"): "gspo_token",
        ("grpo", "trajectory"): "grpo",
    }
    for (objective, unit), trained in combinations.items():
        paper = loss_for(LearnerConfig(objective=objective, unit=unit))
        corrected = loss_for(LearnerConfig(objective=objective, unit=unit, behaviour_correction="mask"))
        assert paper is OBJECTIVES[trained] and not isinstance(paper, Decoupled)  # no behaviour metrics logged
        assert isinstance(corrected, Decoupled) and corrected.objective is paper
    config = LearnerConfig(behaviour_correction="tis")
    assert (config.behaviour_tis_cap, config.behaviour_mask_low, config.behaviour_mask_high) == (5.0, 0.99, 1.01)


def test_config_errors_name_the_fix():
    with pytest.raises(ValueError, match=r"pi_prox, the logp_old recompute.*logp_old='recompute'"):
        LearnerConfig(behaviour_correction="tis", logp_old="sampler")
    with pytest.raises(ValueError, match="behaviour_correction: expected one of auto, none, tis, mask, got 'icepop'"):
        LearnerConfig(behaviour_correction="icepop")
    with pytest.raises(ValueError, match="behaviour_tis_cap: expected >= 1"):
        LearnerConfig(behaviour_correction="tis", behaviour_tis_cap=0.5)
    with pytest.raises(ValueError, match=r"expected 0 <= low <= 1 <= high"):
        LearnerConfig(behaviour_correction="mask", behaviour_mask_low=1.001)
    LearnerConfig(behaviour_correction="tis", behaviour_mask_low=1.001)  # the band is the mask's alone
    LearnerConfig(logp_old="sampler")  # "none" keeps logp_old='sampler'


@pytest.fixture
def tiny():
    from transformers import AutoModelForCausalLM

    from agentgspo.models.tiny import tiny_policy_path

    return AutoModelForCausalLM.from_pretrained(tiny_policy_path())


def test_truncated_sampler_logprobs_are_refused_as_mu(tiny):
    """vLLM's "truncated" log-probs under top_p < 1 are renormalised over the nucleus: w < 1 for every sequence."""
    trajectories = _trajectories([1, 0, 0, 1])
    for t in trajectories:
        t.sampling = {"temperature": 1.0, "top_p": 0.9, "top_k": 0, "logprobs": "truncated"}
    learner = _learner(tiny, behaviour_correction="mask", memory_estimate=False)
    with pytest.raises(ValueError, match=r"behaviour_correction='mask'.*renormalised.*top_p=1 and top_k=0"):
        learner.step(trajectories)
    _learner(tiny, memory_estimate=False).step(trajectories)  # the recompute alone does not use them


def _stale(model, trajectories, shifts):
    """Each trajectory's sampler log-probs set to the policy's own plus ``shifts[i]`` (mu above pi_prox for a
    positive shift: log w_i = -shift); returns the trained tokens per trajectory."""
    lengths = []
    for t, shift in zip(trajectories, shifts):
        with torch.no_grad():
            logp = score(model, collate([t], 0))[0][0]  # [T]
        t.sampler_logprobs = [lp + shift if m else 0.0 for lp, m in zip(logp.tolist(), t.loss_mask)]
        lengths.append(sum(t.loss_mask))
    return lengths


@pytest.mark.parametrize("correction", ["mask", "tis"])
def test_a_learner_step_on_a_stale_batch_logs_the_behaviour_gap_and_share(tiny, correction):
    """Sampler log-probs shifted off the policy's: 3 of 8 by +0.05 (w = e^-0.05, outside the mask's band) or by -2
    (w = e^2, over the cap 5), the rest by +0.004 (w = e^-0.004: kept, not truncated). behaviour_kl is the mean
    |shift| over trained tokens, the masked or truncated share 3/8 (weighted by sequences over 3 minibatches of
    3, 3 and 2), and the first update's clip is against pi_prox (ratios exactly 1: nothing clips)."""
    learner = _learner(tiny, behaviour_correction=correction, minibatches=3, memory_estimate=False, volatility_rows=0)
    trajectories = _trajectories([1, 0, 1, 0, 0, 1, 0, 1])  # every advantage non-zero: all 8 train
    far = 0.05 if correction == "mask" else -2.0
    shifts = [far] * 3 + [0.004] * 5
    lengths = _stale(tiny, trajectories, shifts)
    metrics = learner.step(trajectories)
    assert metrics["trained_sequences"] == 8
    expected_kl = sum(abs(s) * n for s, n in zip(shifts, lengths)) / sum(lengths)
    assert metrics["behaviour_kl"] == pytest.approx(expected_kl, rel=1e-3)
    share = "behaviour_masked_frac" if correction == "mask" else "behaviour_truncated_frac"
    assert metrics[share] == pytest.approx(3 / 8)
    assert metrics["behaviour_weight_mean"] == pytest.approx((3 * math.exp(-far) + 5 * math.exp(-0.004)) / 8, 1e-4)
    assert metrics["mb0_clip_frac_seq"] == 0.0 and metrics["mb0_ratio_max"] == pytest.approx(1.0, abs=1e-6)


def test_without_a_correction_the_learner_logs_no_behaviour_metrics(tiny):
    metrics = _learner(tiny, memory_estimate=False).step(_trajectories([1, 0, 0, 1]))
    assert not [name for name in metrics if name.startswith("behaviour_")]


def test_a_learner_step_with_a_nan_sampler_logprob_drops_its_sequence_and_reports_it(tiny):
    """One NaN among the sampler's log-probs of 8 trajectories (under tis): the step trains the other 7, its loss and
    the updated weights stay finite (before: the minibatch's loss was NaN, then every weight), and the step's stats
    report ``behaviour_nonfinite_frac`` = 1/8 beside the truncated share, which does not count it."""
    learner = _learner(tiny, behaviour_correction="tis", minibatches=3, memory_estimate=False, volatility_rows=0)
    trajectories = _trajectories([1, 0, 1, 0, 0, 1, 0, 1])
    _stale(tiny, trajectories, [0.004] * 8)
    first_sampled = trajectories[0].loss_mask.index(1)
    trajectories[0].sampler_logprobs[first_sampled] = float("nan")
    metrics = learner.step(trajectories)
    assert all(bool(torch.isfinite(p).all()) for p in tiny.parameters())
    assert math.isfinite(metrics["behaviour_kl"]) and math.isfinite(metrics["behaviour_weight_mean"])
    assert metrics["behaviour_nonfinite_frac"] == pytest.approx(1 / 8)
    assert metrics["behaviour_truncated_frac"] == 0.0
