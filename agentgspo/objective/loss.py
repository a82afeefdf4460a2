"""Policy-gradient objectives: GSPO, GSPO-token and the GRPO baseline (Zheng et al., arXiv 2507.18071), and their
decoupled forms for a stale sampler.

One objective, one function. Each takes per-token log-probs of the sampled tokens ``[B, T]`` under the current
policy (with grad) and the behaviour policy (``old_logprobs``, no grad), advantages, and a ``loss_mask`` ``[B, T]``
(1 = token sampled by the policy, 0 = prompt, tool output, template glue, padding), and returns
``(loss, diagnostics)`` with ``loss = -J`` ready for ``backward()``.

Conventions a trainer must know:

- Precision: every ratio, clip test and objective is computed in ``promote(dtype, float32)``: bf16/fp16 inputs are
  upcast, float64 stays float64. GSPO's clip band [1 - 3e-4, 1 + 4e-4] is finer than bf16 resolution.
- Masking selects, never multiplies: masked log-probs and advantages are replaced with 0 by ``torch.where`` before
  any arithmetic, so NaN / inf at masked positions changes neither the loss nor any gradient.
- Aggregation is the paper's per-trajectory mean ``(1/N) sum_i (...)`` for every objective: each trajectory weighs
  1/N whatever its length. ``N`` is ``num_sequences``; by default the number of sequences in this call with at
  least one trained token (empty rows contribute nothing and are not counted). With gradient accumulation over
  micro-batches, pass ``num_sequences = `` the number of trajectories in the whole minibatch (the same number to
  every micro-batch): the summed micro-batch losses and gradients then equal the full-minibatch ones. Do not also
  divide by the number of micro-batches. Under data parallelism that averages gradients over W ranks, pass the
  global count divided by W. (``GSPOLearner`` counts every trajectory of the minibatch, also those it does not
  forward because their advantage is 0: the paper's N is the number of sampled responses.)
- Clipped terms are selected explicitly: where the min in ``min(r A, clip(r) A)`` picks the clipped term, the term
  is the constant ``clip(r) A`` and its gradient is exactly 0 (also when ``r`` overflowed to inf).
- Diagnostics are detached 0-dim tensors (call ``.item()`` when logging; they are computed without a host sync):

  ==================  ==========================================================================================
  ``clip_frac_seq``    share of trained sequences that are clipped (GSPO), or have >= 1 clipped token (token-level)
  ``clip_frac_token``  clipped tokens / trained tokens; for GSPO the tokens of clipped sequences
  ``clip_frac_low``    share of clipping units clipped at the low side (A < 0, r < 1 - eps_low); the unit is the
                       sequence for ``gspo_loss`` (low + high = clip_frac_seq), the token for the token-level
                       losses (low + high = clip_frac_token)
  ``clip_frac_high``   the same at the high side (A > 0, r > 1 + eps_high)
  ``ratio_mean``       mean ratio over clipping units (sequences for GSPO, trained tokens otherwise); NaN if none
  ``ratio_min``        min of the same ratios (``ratio_max``: max); NaN if none
  ``num_tokens``       trained tokens (sum of loss_mask) in this call
  ``num_sequences``    sequences with >= 1 trained token in this call
  ==================  ==========================================================================================

  To combine micro-batches, weight ``clip_frac_seq`` by ``num_sequences`` and token fractions by ``num_tokens``.

- Each loss declares its clip unit, what one ratio and one clip decision cover (:func:`clips_per`): ``SEQUENCE``
  for ``gspo_loss`` (s_i, Eq. 7), ``TURN`` for ``gspo_turn_loss``, ``TOKEN`` for ``gspo_token_loss`` (Eq. 13-14)
  and ``grpo_loss`` (Eq. 3). ``loss.clip_unit.count`` names the diagnostic that weighs ``clip_frac_low``,
  ``clip_frac_high`` and ``ratio_mean`` across micro-batches, and ``loss.clip_fractions`` the clip fractions the loss
  returns, each with the count it is a share of. A trainer reads these instead of testing the loss's name.

- Decoupled losses, for asynchronous training where the sampler's policy mu is up to S versions stale (AReaL's
  decoupled objective, Fu et al., arXiv 2505.24298, with GSPO's ratio; ``shared/ASYNC.md``): ``decoupled_gspo_loss``,
  ``decoupled_gspo_token_loss``, ``decoupled_gspo_turn_loss`` and ``decoupled_grpo_loss`` take the proximal policy's
  log-probs where the others take ``old_logprobs`` (pi_prox: the learner's weights at the start of the step, one
  no-grad forward) and the sampler's as ``behaviour_logprobs``. The ratio and its clip are against pi_prox, as in the
  loss they extend; each unit's term is weighed by the constant behaviour weight ``w = pi_prox / mu`` (geometric mean
  over the unit's tokens), truncated (``correction="tis"``: ``min(w, tis_cap)``) or masked (``"mask"``: 0 outside
  ``[mask_low, mask_high]``). Under either correction a unit whose log-weight is not finite (a NaN or infinite
  behaviour log-prob: a broken sampler) is dropped, never capped. A masked unit still counts in N (and a masked turn
  in its trajectory's K_i): the estimate stays the paper's mean over sampled responses. With ``mu == pi_prox``
  (w = 1) each equals the loss it extends, value and gradient, bit for bit. They add diagnostics, weighed across
  micro-batches by the count of the unit the loss declares its weight per (:func:`corrects_behaviour_per`,
  ``loss.behaviour_unit``):

  ============================  ================================================================================
  ``behaviour_kl``               mean over trained tokens of ``|log pi_prox - log mu|`` (weight: ``num_tokens``),
                                 over the tokens where it is finite
  ``behaviour_weight_mean``      mean w before truncation or mask over the weight's units whose log w is finite
                                 (``_min``, ``_max``)
  ``behaviour_truncated_frac``   ``"tis"``: share of those units whose (finite) w exceeded ``tis_cap``
  ``behaviour_masked_frac``      ``"mask"``: share of those units whose w fell outside the band (dropped), the
                                 non-finite ones included
  ``behaviour_nonfinite_frac``   share of those units dropped because log w was NaN or infinite (either correction)
  ============================  ================================================================================

The optional KL penalty is not part of these losses; ``kl_k3`` gives the per-trajectory k3 estimate to add.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

import torch

__all__ = [
    "GRPO_EPS",
    "GSPO_EPS",
    "ClipUnit",
    "SEQUENCE",
    "TURN",
    "TOKEN",
    "clips_per",
    "gspo_loss",
    "gspo_turn_loss",
    "gspo_token_loss",
    "grpo_loss",
    "kl_k3",
    "BEHAVIOUR_MASK",
    "BEHAVIOUR_TIS_CAP",
    "BEHAVIOUR_FRACTIONS",
    "BEHAVIOUR_NONFINITE",
    "corrects_behaviour_per",
    "decoupled_gspo_loss",
    "decoupled_gspo_turn_loss",
    "decoupled_gspo_token_loss",
    "decoupled_grpo_loss",
]

# The clip bands of paper §5.1 (v2), (eps_low, eps_high), written here once: GSPO's on the sequence ratio (and
# GSPO-token's), and the GRPO baseline's on the token ratio.
GSPO_EPS = (3e-4, 4e-4)
GRPO_EPS = (0.2, 0.27)

# The behaviour weight's corrections, written here once (shared/ASYNC.md, SkyRL's off-policy corrections): the cap of
# truncated importance sampling on a sequence's weight (SkyRL's sequence TIS: 5.0; its token TIS uses 2.0), and the
# band of the geometric sequence mask (SkyRL recommends it first: [0.99, 1.01]).
BEHAVIOUR_TIS_CAP = 5.0
BEHAVIOUR_MASK = (0.99, 1.01)
# The diagnostic each correction reports: the share of weight units it truncated or masked.
BEHAVIOUR_FRACTIONS = {"tis": "behaviour_truncated_frac", "mask": "behaviour_masked_frac"}
# The diagnostic both report: the share of weight units dropped because their weight was not a finite number.
BEHAVIOUR_NONFINITE = "behaviour_nonfinite_frac"


@dataclass(frozen=True)
class ClipUnit:
    """What one importance ratio and one clip decision of a loss cover, named by its diagnostics.

    ``fraction`` is the diagnostic holding the share of trained units of this kind that are clipped, ``count`` the
    one holding how many were trained: the weight of that share (and, for a loss's own clip unit, of
    ``clip_frac_low``, ``clip_frac_high`` and ``ratio_mean``) when micro-batches are combined.
    """

    name: str
    fraction: str
    count: str


SEQUENCE = ClipUnit("sequence", fraction="clip_frac_seq", count="num_sequences")  # s_i, paper Eq. 7
TURN = ClipUnit("turn", fraction="clip_frac_turn", count="num_turns")  # s_ik, Eq. 7 over one assistant turn
TOKEN = ClipUnit("token", fraction="clip_frac_token", count="num_tokens")  # s_it (Eq. 14) or w_it (Eq. 3)

_Loss = TypeVar("_Loss", bound=Callable)


def clips_per(unit: ClipUnit, *, reports: tuple[ClipUnit, ...] = (SEQUENCE, TOKEN)) -> Callable[[_Loss], _Loss]:
    """Declare a loss's clip unit: sets ``loss.clip_unit = unit`` and ``loss.clip_fractions = reports``.

    ``unit``: what one ratio and one clip decision cover; the loss's ``clip_frac_low``, ``clip_frac_high`` and
    ``ratio_*`` are over such units. ``reports``: every clip fraction the loss returns, in the order a trainer logs
    them (every loss here returns ``clip_frac_seq`` and ``clip_frac_token``; a finer unit adds its own). The
    function itself is returned unchanged.
    """
    if unit not in reports:
        raise ValueError(
            f"clips_per: the clip unit {unit.name!r} must be among the reported fractions, got "
            f"{[u.name for u in reports]}"
        )

    def declare(loss: _Loss) -> _Loss:
        loss.clip_unit, loss.clip_fractions = unit, tuple(reports)
        return loss

    return declare


def corrects_behaviour_per(unit: ClipUnit) -> Callable[[_Loss], _Loss]:
    """Declare what one behaviour weight of a decoupled loss covers: sets ``loss.behaviour_unit = unit``.

    ``unit.count`` names the diagnostic that weighs ``behaviour_weight_mean`` and the truncated or masked share
    across micro-batches. It is not always the clip unit: GSPO-token clips per token but weighs per sequence.
    """

    def declare(loss: _Loss) -> _Loss:
        loss.behaviour_unit = unit
        return loss

    return declare


@clips_per(SEQUENCE)  # one ratio s_i per trajectory, Eq. 7
def gspo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    eps_low: float = GSPO_EPS[0],
    eps_high: float = GSPO_EPS[1],
    num_sequences: int | float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """GSPO loss, paper Eq. 5-7 (defaults eps_low=3e-4, eps_high=4e-4 from §5.1).

        s_i  = exp( (1/|y_i|) sum_t m_it (logp_it - logp_old_it) ),   |y_i| = sum_t m_it      (Eq. 7)
        J    = (1/N) sum_i min( s_i A_i, clip(s_i, 1 - eps_low, 1 + eps_high) A_i )          (Eq. 5)
        loss = -J

    Clipping is decided per sequence from s_i only; single token ratios never clip. Every policy token of an
    unclipped trajectory gets gradient ``-s_i A_i / (N |y_i|)`` (Eq. 10).

    Args:
        logprobs: ``[B, T]`` log-probs of the sampled tokens under the current policy (carries grad).
        old_logprobs: ``[B, T]`` log-probs under the behaviour policy (treated as constants).
        advantages: ``[B]`` one advantage per trajectory (e.g. from ``group_advantages``).
        loss_mask: ``[B, T]`` 1/True where the token was sampled by the policy.
        num_sequences: N above; see the module docstring for micro-batching.
    """
    mask, logp, old_logp = _check_and_select(logprobs, old_logprobs, loss_mask)  # [B, T] bool, [B, T], [B, T]
    adv = _per_sequence_advantages(advantages, logp)  # [B]
    seq_len = mask.sum(dim=-1).to(logp.dtype)  # [B]
    seq_log_ratio = (logp - old_logp).sum(dim=-1) / seq_len.clamp(min=1)  # [B], 0 for empty rows
    objective, ratio, clipped_low, clipped_high = _clipped_surrogate(seq_log_ratio, adv, eps_low, eps_high)  # [B] x4
    return _sequence_loss_and_diagnostics(objective, ratio, clipped_low, clipped_high, seq_len, num_sequences)


@clips_per(TURN, reports=(TURN, SEQUENCE, TOKEN))  # one ratio s_ik per assistant turn
def gspo_turn_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    turn_ids: torch.Tensor,
    *,
    eps_low: float = GSPO_EPS[0],
    eps_high: float = GSPO_EPS[1],
    num_sequences: int | float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """GSPO with the assistant turn as the unit: each turn of a multi-turn trajectory has its own ratio and clip.

        s_ik = exp( (1/|y_ik|) sum_{t in turn k} m_it (logp_it - logp_old_it) )     (Eq. 7 over turn k's tokens)
        J    = (1/N) sum_i (1/K_i) sum_k min( s_ik A_ik, clip(s_ik, 1 - eps_low, 1 + eps_high) A_ik )
        loss = -J

    ``K_i`` counts the turns of trajectory i with at least one trained token. The weighting keeps the paper's
    per-trajectory mean across trajectories (each weighs 1/N whatever its number of turns) and gives every turn of
    a trajectory an equal share, as Eq. 5 gives every sequence of a group. An unclipped token of turn k gets
    gradient ``-s_ik A_ik / (N K_i |y_ik|)``. With one turn per trajectory this is ``gspo_loss``.

    When it fits: the chat template re-renders history (e.g. drops earlier ``<think>`` blocks) so each turn is
    trained in its own context, or turns are long and independent enough that one drifting turn should not clip
    the whole episode. The default ``trajectory`` unit (``gspo_loss`` over all assistant tokens) is the paper's.

    Args:
        logprobs, old_logprobs, loss_mask: ``[B, T]`` as in ``gspo_loss``.
        advantages: ``[B]`` (one per trajectory, shared by its turns) or ``[B, K]`` (one per turn, e.g. from
            ``advantages.turn_advantages``); entries of turns that do not exist are ignored.
        turn_ids: ``[B, T]`` integer turn index (0..K-1) of every trained token; any value where ``loss_mask`` is 0
            (use -1). A trained token without a turn is an error.
        num_sequences: N above; see the module docstring for micro-batching.

    Diagnostics are those of ``gspo_loss`` with the turn as the clipping unit (``clip_frac_turn``, ``clip_frac_low``
    and ``clip_frac_high`` are shares of trained turns, ``clip_frac_seq`` the share of trajectories with >= 1
    clipped turn, ``clip_frac_token`` the tokens of clipped turns over trained tokens), plus ``num_turns``.
    """
    mask, logp, old_logp = _check_and_select(logprobs, old_logprobs, loss_mask)  # [B, T] bool, [B, T], [B, T]
    turns = _Turns.of(turn_ids, mask, advantages, logp)
    turn_log_ratio = turns.mean(logp - old_logp)  # [B, K], 0 for empty turns
    adv = turns.advantages  # [B, K], 0 for turns that do not exist
    objective, ratio, clipped_low, clipped_high = _clipped_surrogate(turn_log_ratio, adv, eps_low, eps_high)  # [B, K]
    return _turn_loss_and_diagnostics(objective, ratio, clipped_low, clipped_high, turns, num_sequences)


@clips_per(TOKEN)  # s_it per token, Eq. 14 (its value is the sequence's s_i)
def gspo_token_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    eps_low: float = GSPO_EPS[0],
    eps_high: float = GSPO_EPS[1],
    num_sequences: int | float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """GSPO-token loss for per-token (e.g. per-turn) advantages, paper Eq. 13-14.

        s_it = sg[s_i] * pi(y_it) / sg[pi(y_it)]        (value s_i, gradient s_i * d logp_it)          (Eq. 14)
        J    = (1/N) sum_i (1/|y_i|) sum_t m_it min( s_it A_it, clip(s_it, 1 - eps_low, 1 + eps_high) A_it )
        loss = -J                                                                                         (Eq. 13)

    With ``A_it = A_i`` for all t this equals ``gspo_loss`` in value, clipping and gradient. Clipping is per token
    only because the advantage's sign may differ between tokens; the ratio value is the sequence's s_i.

    Args:
        logprobs, old_logprobs, loss_mask: ``[B, T]`` as in ``gspo_loss``.
        advantages: ``[B, T]`` per-token advantages (``[B]`` is broadcast over tokens).
        num_sequences: N above; see the module docstring for micro-batching.
    """
    mask, logp, old_logp = _check_and_select(logprobs, old_logprobs, loss_mask)  # [B, T] bool, [B, T], [B, T]
    adv = _per_token_advantages(advantages, mask, logp)  # [B, T]
    seq_len = mask.sum(dim=-1).to(logp.dtype)  # [B]
    seq_log_ratio = (logp - old_logp).sum(dim=-1) / seq_len.clamp(min=1)  # [B]
    token_log_ratio = seq_log_ratio.detach()[:, None] + logp - logp.detach()  # [B, T], log s_it of Eq. 14
    objective, ratio, clipped_low, clipped_high = _clipped_surrogate(token_log_ratio, adv, eps_low, eps_high)  # [B, T]
    return _token_level_loss_and_diagnostics(objective, ratio, clipped_low, clipped_high, mask, num_sequences)


@clips_per(TOKEN)  # w_it per token, Eq. 3
def grpo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    eps_low: float = GRPO_EPS[0],
    eps_high: float = GRPO_EPS[1],
    num_sequences: int | float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """GRPO baseline loss with token-level ratios, as the paper states it in Eq. 2-3 (eps 0.2/0.27 from §5.1).

        w_it = exp(logp_it - logp_old_it)                                                              (Eq. 3)
        J    = (1/N) sum_i (1/|y_i|) sum_t m_it min( w_it A_it, clip(w_it, 1 - eps_low, 1 + eps_high) A_it )
        loss = -J                                                                                       (Eq. 2)

    No KL term (add ``kl_k3`` yourself if wanted).

    Args:
        logprobs, old_logprobs, loss_mask: ``[B, T]`` as in ``gspo_loss``.
        advantages: ``[B]`` per-trajectory (broadcast over tokens) or ``[B, T]`` per-token advantages.
        num_sequences: N above; see the module docstring for micro-batching.
    """
    mask, logp, old_logp = _check_and_select(logprobs, old_logprobs, loss_mask)  # [B, T] bool, [B, T], [B, T]
    adv = _per_token_advantages(advantages, mask, logp)  # [B, T]
    token_log_ratio = logp - old_logp  # [B, T]
    objective, ratio, clipped_low, clipped_high = _clipped_surrogate(token_log_ratio, adv, eps_low, eps_high)  # [B, T]
    return _token_level_loss_and_diagnostics(objective, ratio, clipped_low, clipped_high, mask, num_sequences)


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """Per-trajectory mean of Schulman's k3 estimator (http://joschu.net/blog/kl-approx.html).

        k3_it = exp(logp_ref_it - logp_it) - (logp_ref_it - logp_it) - 1        (>= 0)
        kl_i  = (1/|y_i|) sum_t m_it k3_it

    Its VALUE, on tokens sampled from pi_theta, is an unbiased estimate of the reverse KL(pi_theta || pi_ref). Its
    GRADIENT, as the loss uses it (differentiated through logp_it, the tokens fixed), is not that KL's: with
    r = pi_ref / pi_theta, grad k3 = (1 - r) grad logp, whose expectation under pi_theta is
    -E_{pi_ref}[grad logp] = grad KL(pi_ref || pi_theta), the FORWARD KL's gradient (Tang & Munos, "On a few
    pitfalls in KL divergence gradient estimation for RL", arXiv 2506.09477; the k3-as-loss practice of GRPO,
    verl and TRL). So ``kl_coef`` penalises the forward KL; the logged value estimates the reverse one.

    Returns ``[B]`` (0 for sequences without trained tokens), differentiable w.r.t. ``logprobs``. Aggregate it the
    same way as the loss, e.g. ``beta * kl.sum() / num_sequences``. Not clamped: a policy token whose log-prob falls
    far below the reference's makes ``exp`` large, which is the estimator's honest value.
    """
    mask, logp, ref_logp = _check_and_select(logprobs, ref_logprobs, loss_mask)  # [B, T] bool, [B, T], [B, T]
    log_ratio = ref_logp - logp  # [B, T], 0 at masked positions
    k3 = torch.where(mask, torch.exp(log_ratio) - log_ratio - 1.0, 0.0)  # [B, T]
    return k3.sum(dim=-1) / mask.sum(dim=-1).clamp(min=1)  # [B]


# ------------------------------------------------------------------------- decoupled losses: a stale sampler


@clips_per(SEQUENCE)  # s_i against pi_prox, Eq. 7
@corrects_behaviour_per(SEQUENCE)  # w_i, a geometric mean over the sequence's tokens
def decoupled_gspo_loss(
    logprobs: torch.Tensor,
    prox_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    behaviour_logprobs: torch.Tensor,
    correction: Literal["tis", "mask"],
    tis_cap: float = BEHAVIOUR_TIS_CAP,
    mask_low: float = BEHAVIOUR_MASK[0],
    mask_high: float = BEHAVIOUR_MASK[1],
    eps_low: float = GSPO_EPS[0],
    eps_high: float = GSPO_EPS[1],
    num_sequences: int | float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """GSPO's decoupled objective for a sampler up to S versions stale: AReaL's decoupled loss (Fu et al., arXiv
    2505.24298) with GSPO's sequence ratio (Eq. 7) and a geometric-mean behaviour weight (``shared/ASYNC.md``).

        s_i  = exp( (1/|y_i|) sum_t m_it (logp_it - logp_prox_it) )         clipped to [1 - eps_low, 1 + eps_high]
        w_i  = exp( (1/|y_i|) sum_t m_it (logp_prox_it - logp_mu_it) )      a constant: no gradient
        w'_i = min(w_i, tis_cap)                                            correction="tis" (truncated IS)
               w_i if mask_low <= w_i <= mask_high, else 0                  correction="mask" (geometric mask)
        J    = (1/N) sum_i w'_i min( s_i A_i, clip(s_i, 1 - eps_low, 1 + eps_high) A_i )
        loss = -J

    Why: GSPO's band is far narrower than the drift of a sampler one or two versions behind, so a ratio against mu
    clips most sequences (fully-async GSPO in verl issue 7356 logs clip fractions of 0.35-0.44). The clip keeps the
    update near pi_prox, the learner's own weights at the start of the step; the weight corrects for having sampled
    from mu. With S = 0 (pi_prox = pi_old) w_i = pi_old / mu corrects the sampler/trainer mismatch alone. With
    mu == pi_prox, w_i = 1 and this is ``gspo_loss`` exactly, value and gradient. An unclipped token of sequence i
    gets gradient ``-w'_i s_i A_i / (N |y_i|)``; a masked sequence gets none but still counts in N.

    Args:
        logprobs, advantages, loss_mask, eps_low, eps_high, num_sequences: as in ``gspo_loss``.
        prox_logprobs: ``[B, T]`` log-probs under pi_prox (constants), in ``gspo_loss``'s ``old_logprobs`` place.
        behaviour_logprobs: ``[B, T]`` log-probs under mu, the sampler's (``Batch.sampler_logprobs``). They must be
            the learner's quantity (:func:`agentgspo.core.trajectory.sampler_logprobs_mismatch`): log-probs
            renormalised over a top-p nucleus make w_i < 1 for every sequence.
        correction: ``"tis"`` or ``"mask"``, how w_i becomes w'_i above.
        tis_cap: ``"tis"``'s C (default 5.0, SkyRL's sequence TIS cap).
        mask_low, mask_high: ``"mask"``'s band (default [0.99, 1.01], SkyRL's geometric sequence mask).

    Diagnostics: ``gspo_loss``'s (ratios and clip fractions against pi_prox) and the behaviour ones of the module
    docstring, over sequences.
    """
    mask, logp, prox_logp = _check_and_select(logprobs, prox_logprobs, loss_mask)  # [B, T] bool, [B, T], [B, T]
    gap = _behaviour_gap(prox_logp, behaviour_logprobs, mask)  # [B, T], log pi_prox - log mu
    adv = _per_sequence_advantages(advantages, logp)  # [B]
    seq_len = mask.sum(dim=-1).to(logp.dtype)  # [B]
    seq_log_ratio = (logp - prox_logp).sum(dim=-1) / seq_len.clamp(min=1)  # [B], 0 for empty rows
    objective, ratio, clipped_low, clipped_high = _clipped_surrogate(seq_log_ratio, adv, eps_low, eps_high)  # [B] x4
    log_weight = gap.sum(dim=-1) / seq_len.clamp(min=1)  # [B], log w_i
    weight = _behaviour_weight(log_weight, seq_len > 0, correction, tis_cap, mask_low, mask_high)
    weighted = weight.apply(objective)  # [B]
    loss, diagnostics = _sequence_loss_and_diagnostics(
        weighted, ratio, clipped_low, clipped_high, seq_len, num_sequences
    )
    return loss, {**diagnostics, **weight.diagnostics(gap, mask)}


@clips_per(TURN, reports=(TURN, SEQUENCE, TOKEN))  # s_ik against pi_prox per assistant turn
@corrects_behaviour_per(TURN)  # w_ik, a geometric mean over the turn's tokens
def decoupled_gspo_turn_loss(
    logprobs: torch.Tensor,
    prox_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    turn_ids: torch.Tensor,
    *,
    behaviour_logprobs: torch.Tensor,
    correction: Literal["tis", "mask"],
    tis_cap: float = BEHAVIOUR_TIS_CAP,
    mask_low: float = BEHAVIOUR_MASK[0],
    mask_high: float = BEHAVIOUR_MASK[1],
    eps_low: float = GSPO_EPS[0],
    eps_high: float = GSPO_EPS[1],
    num_sequences: int | float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``gspo_turn_loss``'s decoupled form: each assistant turn its own ratio against pi_prox and its own behaviour
    weight from its own tokens (``decoupled_gspo_loss`` with the turn as the unit).

        s_ik  = exp( (1/|y_ik|) sum_{t in turn k} m_it (logp_it - logp_prox_it) )
        w_ik  = exp( (1/|y_ik|) sum_{t in turn k} m_it (logp_prox_it - logp_mu_it) )   truncated or masked to w'_ik
        J     = (1/N) sum_i (1/K_i) sum_k w'_ik min( s_ik A_ik, clip(s_ik, 1 - eps_low, 1 + eps_high) A_ik )
        loss  = -J

    A masked turn contributes nothing and still counts in its trajectory's K_i. With mu == pi_prox this is
    ``gspo_turn_loss`` exactly.

    Args:
        logprobs, advantages, loss_mask, turn_ids, eps_low, eps_high, num_sequences: as in ``gspo_turn_loss``.
        prox_logprobs, behaviour_logprobs, correction, tis_cap, mask_low, mask_high: as in ``decoupled_gspo_loss``.

    Diagnostics: ``gspo_turn_loss``'s and the behaviour ones of the module docstring, over turns.
    """
    mask, logp, prox_logp = _check_and_select(logprobs, prox_logprobs, loss_mask)  # [B, T] bool, [B, T], [B, T]
    gap = _behaviour_gap(prox_logp, behaviour_logprobs, mask)  # [B, T], log pi_prox - log mu
    turns = _Turns.of(turn_ids, mask, advantages, logp)
    turn_log_ratio = turns.mean(logp - prox_logp)  # [B, K], 0 for empty turns
    adv = turns.advantages  # [B, K]
    objective, ratio, clipped_low, clipped_high = _clipped_surrogate(turn_log_ratio, adv, eps_low, eps_high)  # [B, K]
    weight = _behaviour_weight(turns.mean(gap), turns.has_tokens, correction, tis_cap, mask_low, mask_high)  # [B, K]
    loss, diagnostics = _turn_loss_and_diagnostics(
        weight.apply(objective), ratio, clipped_low, clipped_high, turns, num_sequences
    )
    return loss, {**diagnostics, **weight.diagnostics(gap, mask)}


@clips_per(TOKEN)  # s_it against pi_prox, Eq. 14
@corrects_behaviour_per(SEQUENCE)  # the sequence's w_i, as in decoupled_gspo_loss
def decoupled_gspo_token_loss(
    logprobs: torch.Tensor,
    prox_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    behaviour_logprobs: torch.Tensor,
    correction: Literal["tis", "mask"],
    tis_cap: float = BEHAVIOUR_TIS_CAP,
    mask_low: float = BEHAVIOUR_MASK[0],
    mask_high: float = BEHAVIOUR_MASK[1],
    eps_low: float = GSPO_EPS[0],
    eps_high: float = GSPO_EPS[1],
    num_sequences: int | float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``gspo_token_loss``'s decoupled form (Eq. 13-14 against pi_prox), each token weighed by its sequence's w'_i.

        s_it = sg[s_i] * pi(y_it) / sg[pi(y_it)]        s_i against pi_prox, as in ``decoupled_gspo_loss``
        w_i  = exp( (1/|y_i|) sum_t m_it (logp_prox_it - logp_mu_it) )        truncated or masked to w'_i
        J    = (1/N) sum_i w'_i (1/|y_i|) sum_t m_it min( s_it A_it, clip(s_it, 1 - eps_low, 1 + eps_high) A_it )
        loss = -J

    With ``A_it = A_i`` it equals ``decoupled_gspo_loss``; with mu == pi_prox it is ``gspo_token_loss`` exactly.

    Args:
        logprobs, advantages, loss_mask, eps_low, eps_high, num_sequences: as in ``gspo_token_loss``.
        prox_logprobs, behaviour_logprobs, correction, tis_cap, mask_low, mask_high: as in ``decoupled_gspo_loss``.

    Diagnostics: ``gspo_token_loss``'s and the behaviour ones of the module docstring, over sequences.
    """
    mask, logp, prox_logp = _check_and_select(logprobs, prox_logprobs, loss_mask)  # [B, T] bool, [B, T], [B, T]
    gap = _behaviour_gap(prox_logp, behaviour_logprobs, mask)  # [B, T], log pi_prox - log mu
    adv = _per_token_advantages(advantages, mask, logp)  # [B, T]
    seq_len = mask.sum(dim=-1).to(logp.dtype)  # [B]
    seq_log_ratio = (logp - prox_logp).sum(dim=-1) / seq_len.clamp(min=1)  # [B]
    token_log_ratio = seq_log_ratio.detach()[:, None] + logp - logp.detach()  # [B, T], log s_it of Eq. 14
    objective, ratio, clipped_low, clipped_high = _clipped_surrogate(token_log_ratio, adv, eps_low, eps_high)  # [B, T]
    log_weight = gap.sum(dim=-1) / seq_len.clamp(min=1)  # [B], log w_i
    weight = _behaviour_weight(log_weight, seq_len > 0, correction, tis_cap, mask_low, mask_high)  # [B]
    loss, diagnostics = _token_level_loss_and_diagnostics(
        weight.apply(objective), ratio, clipped_low, clipped_high, mask, num_sequences
    )
    return loss, {**diagnostics, **weight.diagnostics(gap, mask)}


@clips_per(TOKEN)  # w_it against pi_prox, Eq. 3
@corrects_behaviour_per(TOKEN)  # each token's own behaviour weight
def decoupled_grpo_loss(
    logprobs: torch.Tensor,
    prox_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    behaviour_logprobs: torch.Tensor,
    correction: Literal["tis", "mask"],
    tis_cap: float = BEHAVIOUR_TIS_CAP,
    mask_low: float = BEHAVIOUR_MASK[0],
    mask_high: float = BEHAVIOUR_MASK[1],
    eps_low: float = GRPO_EPS[0],
    eps_high: float = GRPO_EPS[1],
    num_sequences: int | float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The GRPO baseline's decoupled form with token behaviour weights: the decoupled PPO objective as AReaL
    (Fu et al., arXiv 2505.24298) states it, one weight per token.

        r_it  = exp(logp_it - logp_prox_it)                        clipped to [1 - eps_low, 1 + eps_high]
        w_it  = exp(logp_prox_it - logp_mu_it)                     truncated or masked to w'_it, no gradient
        J     = (1/N) sum_i (1/|y_i|) sum_t m_it w'_it min( r_it A_it, clip(r_it, 1 - eps_low, 1 + eps_high) A_it )
        loss  = -J

    Token weights vary far more than a sequence's geometric mean: the defaults (``tis_cap`` 5.0, band
    [0.99, 1.01]) are the sequence-level ones; SkyRL caps token TIS at 2.0, and a band this narrow drops most tokens
    of a stale batch. With mu == pi_prox this is ``grpo_loss`` exactly.

    Args:
        logprobs, advantages, loss_mask, eps_low, eps_high, num_sequences: as in ``grpo_loss``.
        prox_logprobs, behaviour_logprobs, correction, tis_cap, mask_low, mask_high: as in ``decoupled_gspo_loss``,
            with the token as the weight's unit.

    Diagnostics: ``grpo_loss``'s and the behaviour ones of the module docstring, over tokens.
    """
    mask, logp, prox_logp = _check_and_select(logprobs, prox_logprobs, loss_mask)  # [B, T] bool, [B, T], [B, T]
    gap = _behaviour_gap(prox_logp, behaviour_logprobs, mask)  # [B, T], log pi_prox - log mu = log w_it
    adv = _per_token_advantages(advantages, mask, logp)  # [B, T]
    token_log_ratio = logp - prox_logp  # [B, T]
    objective, ratio, clipped_low, clipped_high = _clipped_surrogate(token_log_ratio, adv, eps_low, eps_high)  # [B, T]
    weight = _behaviour_weight(gap, mask, correction, tis_cap, mask_low, mask_high)  # [B, T]
    loss, diagnostics = _token_level_loss_and_diagnostics(
        weight.apply(objective), ratio, clipped_low, clipped_high, mask, num_sequences
    )
    return loss, {**diagnostics, **weight.diagnostics(gap, mask)}


# ---------------------------------------------------------------------------------------------- shared helpers


def _check_and_select(
    logprobs: torch.Tensor, other_logprobs: torch.Tensor, loss_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Check shapes, upcast to fp32 or better, and replace masked positions by 0 before any arithmetic.

    Selecting (not multiplying) here is what keeps NaN / inf at masked positions out of values and gradients.
    """
    if logprobs.dim() != 2 or other_logprobs.shape != logprobs.shape or loss_mask.shape != logprobs.shape:
        raise ValueError(
            "expected logprobs, old/ref logprobs and loss_mask of the same shape [B, T], got "
            f"{tuple(logprobs.shape)}, {tuple(other_logprobs.shape)} and {tuple(loss_mask.shape)}"
        )
    dtype = torch.promote_types(logprobs.dtype, torch.float32)
    mask = loss_mask.bool()  # [B, T]
    logp = torch.where(mask, logprobs.to(dtype), 0.0)  # [B, T]
    other = torch.where(mask, other_logprobs.detach().to(dtype), 0.0)  # [B, T]
    return mask, logp, other


def _per_sequence_advantages(advantages: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    if advantages.shape != logp.shape[:1]:
        raise ValueError(
            f"expected one advantage per sequence, shape {tuple(logp.shape[:1])}, got {tuple(advantages.shape)}; "
            "for per-token advantages use gspo_token_loss"
        )
    return advantages.detach().to(logp.dtype)  # [B]


def _per_turn_advantages(advantages: torch.Tensor, batch: int, num_turns: int, logp: torch.Tensor) -> torch.Tensor:
    if advantages.shape == (batch,):
        advantages = advantages[:, None].expand(batch, num_turns)  # [B, K]
    if advantages.dim() != 2 or advantages.shape[0] != batch or advantages.shape[1] < num_turns:
        raise ValueError(
            f"expected advantages of shape [B] = ({batch},) or [B, K] with K >= {num_turns} turns, "
            f"got {tuple(advantages.shape)}"
        )
    return advantages[:, :num_turns].detach().to(device=logp.device, dtype=logp.dtype)  # [B, K]


def _per_token_advantages(advantages: torch.Tensor, mask: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    if advantages.shape == logp.shape[:1]:
        advantages = advantages[:, None].expand_as(logp)  # [B, T]
    if advantages.shape != logp.shape:
        raise ValueError(
            f"expected advantages of shape [B] = {tuple(logp.shape[:1])} or [B, T] = {tuple(logp.shape)}, "
            f"got {tuple(advantages.shape)}"
        )
    return torch.where(mask, advantages.detach().to(logp.dtype), 0.0)  # [B, T]


def _clipped_surrogate(
    log_ratio: torch.Tensor, adv: torch.Tensor, eps_low: float, eps_high: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)`` with ``r = exp(log_ratio)``, elementwise, any shape.

    The min picks the clipped term exactly when (A > 0 and r > 1 + eps_high) or (A < 0 and r < 1 - eps_low); there
    it is a constant. The log-ratio of clipped entries is replaced by 0 before ``exp`` so that an overflowed ratio
    cannot turn the zero gradient into ``0 * inf = NaN``. Returns (objective, detached ratio, low mask, high mask).
    """
    ratio = torch.exp(log_ratio.detach())  # [...]
    clipped_high = (adv > 0) & (ratio > 1.0 + eps_high)  # [...]
    clipped_low = (adv < 0) & (ratio < 1.0 - eps_low)  # [...]
    clipped = clipped_low | clipped_high  # [...]
    live_ratio = torch.exp(torch.where(clipped, 0.0, log_ratio))  # [...], carries grad where unclipped
    clipped_value = ratio.clamp(1.0 - eps_low, 1.0 + eps_high) * adv  # [...], constant
    objective = torch.where(clipped, clipped_value, live_ratio * adv)  # [...]
    return objective, ratio, clipped_low, clipped_high


def _normalizer(num_sequences: int | float | torch.Tensor | None, has_tokens: torch.Tensor) -> torch.Tensor | float:
    if num_sequences is None:
        return has_tokens.sum().clamp(min=1)  # [], this call's non-empty sequences
    if isinstance(num_sequences, torch.Tensor):
        num_sequences = num_sequences.detach()
    elif num_sequences <= 0:
        raise ValueError(f"num_sequences must be > 0 (non-empty trajectories in the minibatch), got {num_sequences}")
    return num_sequences


def _ratio_stats(ratio: torch.Tensor, valid: torch.Tensor, name: str = "ratio") -> dict[str, torch.Tensor]:
    """Mean/min/max of ``ratio`` over ``valid`` entries (NaN when there are none) as ``{name}_mean`` etc., without a
    host sync."""
    count = valid.sum()  # []
    empty = torch.where(count > 0, 0.0, float("nan")).to(ratio.dtype)  # [], NaN when nothing is valid
    return {
        f"{name}_mean": torch.where(valid, ratio, 0.0).sum() / count.clamp(min=1) + empty,
        f"{name}_min": torch.where(valid, ratio, float("inf")).min() + empty,
        f"{name}_max": torch.where(valid, ratio, float("-inf")).max() + empty,
    }


def _sequence_loss_and_diagnostics(
    objective: torch.Tensor,
    ratio: torch.Tensor,
    clipped_low: torch.Tensor,
    clipped_high: torch.Tensor,
    seq_len: torch.Tensor,
    num_sequences: int | float | torch.Tensor | None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-trajectory mean of per-sequence terms, ``-(1/N) sum_i objective_i``, and the diagnostics with the
    sequence as the clipping unit (``seq_len`` ``[B]``: trained tokens per sequence)."""
    has_tokens = seq_len > 0  # [B]
    objective = torch.where(has_tokens, objective, 0.0)  # [B]
    normalizer = _normalizer(num_sequences, has_tokens)  # []
    loss = -objective.sum() / normalizer  # []

    with torch.no_grad():
        low = clipped_low & has_tokens  # [B]
        high = clipped_high & has_tokens  # [B]
        clipped = low | high  # [B]
        num_seq = has_tokens.sum().to(seq_len.dtype)  # []
        num_tokens = seq_len.sum()  # []
        diagnostics = {
            "clip_frac_seq": clipped.sum() / num_seq.clamp(min=1),
            "clip_frac_token": (seq_len * clipped).sum() / num_tokens.clamp(min=1),
            "clip_frac_low": low.sum() / num_seq.clamp(min=1),
            "clip_frac_high": high.sum() / num_seq.clamp(min=1),
            **_ratio_stats(ratio, has_tokens),
            "num_tokens": num_tokens,
            "num_sequences": num_seq,
        }
    return loss, diagnostics


@dataclass(frozen=True)
class _Turns:
    """The assistant turns of a batch as the turn-unit losses see them: ``K`` turn slots per row."""

    segment: torch.Tensor  # [B*T], each token's slot (row * K + turn), slot 0 of its row where not trained
    length: torch.Tensor  # [B, K], trained tokens per turn
    has_tokens: torch.Tensor  # [B, K] bool, the turns that are trained
    advantages: torch.Tensor  # [B, K], 0 for turns that do not exist

    @classmethod
    def of(cls, turn_ids: torch.Tensor, mask: torch.Tensor, advantages: torch.Tensor, logp: torch.Tensor) -> _Turns:
        """Check ``turn_ids`` ``[B, T]`` and the ``[B]`` or ``[B, K]`` advantages, and count each turn's tokens."""
        if turn_ids.shape != logp.shape or turn_ids.is_floating_point():
            raise ValueError(
                f"expected integer turn_ids of shape {tuple(logp.shape)}, got {turn_ids.dtype} {tuple(turn_ids.shape)}"
            )
        turn = torch.where(mask, turn_ids.to(logp.device), 0)  # [B, T]
        if bool((turn < 0).any()):
            raise ValueError("turn_ids: every token with loss_mask 1 needs its turn index (>= 0), got a negative one")
        batch = logp.shape[0]
        num_turns = int(turn.max()) + 1 if turn.numel() else 1
        if advantages.dim() == 2:
            num_turns = max(num_turns, advantages.shape[1])
        adv = _per_turn_advantages(advantages, batch, num_turns, logp)  # [B, K]
        segment = (torch.arange(batch, device=logp.device)[:, None] * num_turns + turn).flatten()  # [B*T]
        weights = mask.flatten().to(logp.dtype)  # [B*T]
        length = torch.zeros(batch * num_turns, dtype=logp.dtype, device=logp.device).index_add_(0, segment, weights)
        length = length.view(batch, num_turns)  # [B, K]
        has_tokens = length > 0  # [B, K]
        if not bool(torch.isfinite(adv[has_tokens]).all()):
            raise ValueError("advantages: a trained turn has a NaN or inf advantage (only turns that do not exist may)")
        adv = torch.where(has_tokens, adv, 0.0)  # [B, K], padding of turns that do not exist (NaN allowed) ignored
        return cls(segment=segment, length=length, has_tokens=has_tokens, advantages=adv)

    def mean(self, per_token: torch.Tensor) -> torch.Tensor:
        """Each turn's mean of ``per_token`` ``[B, T]`` (0 at untrained positions) over its tokens: ``[B, K]``."""
        total = torch.zeros(self.length.numel(), dtype=per_token.dtype, device=per_token.device)  # [B*K]
        total = total.index_add_(0, self.segment, per_token.flatten())  # [B*K]
        return total.view_as(self.length) / self.length.clamp(min=1)  # [B, K], 0 for empty turns


def _turn_loss_and_diagnostics(
    objective: torch.Tensor,
    ratio: torch.Tensor,
    clipped_low: torch.Tensor,
    clipped_high: torch.Tensor,
    turns: _Turns,
    num_sequences: int | float | torch.Tensor | None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``-(1/N) sum_i (1/K_i) sum_k objective_ik`` over trained turns, and the diagnostics with the turn as the
    clipping unit."""
    has_tokens = turns.has_tokens  # [B, K]
    objective = torch.where(has_tokens, objective, 0.0)  # [B, K]
    turns_per_seq = has_tokens.sum(dim=-1).to(objective.dtype)  # [B]
    per_sequence = objective.sum(dim=-1) / turns_per_seq.clamp(min=1)  # [B]
    loss = -per_sequence.sum() / _normalizer(num_sequences, turns_per_seq > 0)  # []

    with torch.no_grad():
        low = clipped_low & has_tokens  # [B, K]
        high = clipped_high & has_tokens  # [B, K]
        clipped = low | high  # [B, K]
        trained_turns = has_tokens.sum().to(objective.dtype)  # []
        num_seq = (turns_per_seq > 0).sum().to(objective.dtype)  # []
        num_tokens = turns.length.sum()  # []
        diagnostics = {
            "clip_frac_seq": clipped.any(dim=-1).sum() / num_seq.clamp(min=1),
            "clip_frac_turn": clipped.sum() / trained_turns.clamp(min=1),
            "clip_frac_token": (turns.length * clipped).sum() / num_tokens.clamp(min=1),
            "clip_frac_low": low.sum() / trained_turns.clamp(min=1),
            "clip_frac_high": high.sum() / trained_turns.clamp(min=1),
            **_ratio_stats(ratio, has_tokens),
            "num_tokens": num_tokens,
            "num_sequences": num_seq,
            "num_turns": trained_turns,
        }
    return loss, diagnostics


def _behaviour_gap(prox_logp: torch.Tensor, behaviour_logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``log pi_prox - log mu`` per token ``[B, T]``, 0 at masked positions (selected before any arithmetic, as in
    ``_check_and_select``); a constant. ``prox_logp`` is already selected and upcast."""
    if behaviour_logprobs.shape != prox_logp.shape:
        raise ValueError(
            f"expected behaviour_logprobs of the log-probs' shape {tuple(prox_logp.shape)}, got "
            f"{tuple(behaviour_logprobs.shape)}"
        )
    behaviour = torch.where(mask, behaviour_logprobs.detach().to(prox_logp.dtype), 0.0)  # [B, T]
    return prox_logp - behaviour  # [B, T]


@dataclass(frozen=True)
class _BehaviourWeight:
    """A decoupled loss's behaviour weights over its units (sequences, turns or tokens: any shape ``[...]``),
    detached."""

    raw: torch.Tensor  # [...], w = pi_prox / mu before truncation or mask
    weight: torch.Tensor  # [...], w', what multiplies a kept unit's term (0 where dropped)
    kept: torch.Tensor  # [...] bool, False where the unit is dropped (out of the mask's band, or not finite)
    corrected: torch.Tensor  # [...] bool, trained units that were truncated or masked
    finite: torch.Tensor  # [...] bool, units whose log w is a finite number
    valid: torch.Tensor  # [...] bool, units with trained tokens
    fraction: str  # the diagnostic holding the corrected share

    def apply(self, objective: torch.Tensor) -> torch.Tensor:
        """``w' * objective`` per unit, broadcast over ``objective``'s trailing dims (a sequence's weight over its
        tokens); a dropped unit's term is selected to 0, and its weight was selected to 0 before the product, so
        neither an overflowed term nor a NaN weight reaches the value or the gradient (0 * NaN = NaN)."""
        shape = (*self.weight.shape, *(1,) * (objective.dim() - self.weight.dim()))  # [...] and a 1 per extra dim
        return torch.where(self.kept.reshape(shape), self.weight.reshape(shape) * objective, 0.0)  # objective's shape

    def diagnostics(self, gap: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """``behaviour_kl`` over trained tokens whose gap is finite (``gap``: ``log pi_prox - log mu``, 0 where
        ``mask`` is 0), the raw weight's mean/min/max over the units whose log w is finite, the truncated or masked
        share and the non-finite share over the weight's units."""
        with torch.no_grad():
            units = self.valid.sum().to(self.raw.dtype)  # []
            scored = mask & torch.isfinite(gap)  # [B, T]
            return {
                "behaviour_kl": torch.where(scored, gap.abs(), 0.0).sum() / scored.sum().to(gap.dtype).clamp(min=1),
                **_ratio_stats(self.raw, self.valid & self.finite, name="behaviour_weight"),
                self.fraction: self.corrected.sum() / units.clamp(min=1),
                BEHAVIOUR_NONFINITE: (self.valid & ~self.finite).sum() / units.clamp(min=1),
            }


def _behaviour_weight(
    log_weight: torch.Tensor,
    valid: torch.Tensor,
    correction: str,
    tis_cap: float,
    mask_low: float,
    mask_high: float,
) -> _BehaviourWeight:
    """The behaviour weight ``w = exp(log_weight)`` of each unit and its correction: ``"tis"`` truncates it at
    ``tis_cap``, ``"mask"`` keeps it where ``mask_low <= w <= mask_high`` and drops the unit elsewhere. Either drops
    a unit whose ``log_weight`` is NaN or infinite: a behaviour log-prob that is not a number says nothing about w, so
    truncating an infinite w to C would train on a broken sampler's sample at full weight. (An overflowed exp of a
    finite log w, over 88.7 in fp32, is a true large weight and is truncated.) ``valid``: units with trained tokens."""
    log_weight = log_weight.detach()  # [...]
    finite = torch.isfinite(log_weight)  # [...]
    raw = torch.exp(log_weight)  # [...]
    if correction == "tis":
        truncated = finite & (raw > tis_cap)  # [...]
        capped = torch.where(finite, torch.where(truncated, tis_cap, raw), 0.0)  # [...], 0 where dropped
        corrected = truncated & valid  # [...]
        return _BehaviourWeight(raw, capped, finite, corrected, finite, valid, BEHAVIOUR_FRACTIONS["tis"])
    if correction == "mask":
        kept = finite & (raw >= mask_low) & (raw <= mask_high)  # [...]
        weight = torch.where(kept, raw, 0.0)  # [...], 0 where dropped
        return _BehaviourWeight(raw, weight, kept, ~kept & valid, finite, valid, BEHAVIOUR_FRACTIONS["mask"])
    raise ValueError(f"correction: expected one of {sorted(BEHAVIOUR_FRACTIONS)}, got {correction!r}")


def _token_level_loss_and_diagnostics(
    objective: torch.Tensor,
    ratio: torch.Tensor,
    clipped_low: torch.Tensor,
    clipped_high: torch.Tensor,
    mask: torch.Tensor,
    num_sequences: int | float | torch.Tensor | None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-trajectory mean of per-token terms, ``-(1/N) sum_i (1/|y_i|) sum_t m_it objective_it``, and diagnostics."""
    seq_len = mask.sum(dim=-1).to(objective.dtype)  # [B]
    has_tokens = seq_len > 0  # [B]
    per_sequence = torch.where(mask, objective, 0.0).sum(dim=-1) / seq_len.clamp(min=1)  # [B]
    loss = -per_sequence.sum() / _normalizer(num_sequences, has_tokens)  # []

    with torch.no_grad():
        low = clipped_low & mask  # [B, T]
        high = clipped_high & mask  # [B, T]
        num_tokens = seq_len.sum()  # []
        num_seq = has_tokens.sum().to(objective.dtype)  # []
        diagnostics = {
            "clip_frac_seq": (low | high).any(dim=-1).sum() / num_seq.clamp(min=1),
            "clip_frac_token": (low | high).sum() / num_tokens.clamp(min=1),
            "clip_frac_low": low.sum() / num_tokens.clamp(min=1),
            "clip_frac_high": high.sum() / num_tokens.clamp(min=1),
            **_ratio_stats(ratio, mask),
            "num_tokens": num_tokens,
            "num_sequences": num_seq,
        }
    return loss, diagnostics
