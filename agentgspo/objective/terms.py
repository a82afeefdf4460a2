"""What every objective shares: its inputs made safe, its per-unit terms, and their aggregation into one loss.

An objective (:mod:`agentgspo.objective.registry`) is two steps. It computes one term per *unit* (a sequence, an
assistant turn or a token: :class:`Terms`), and :func:`aggregate` turns the terms into ``loss = -J`` and its
diagnostics, the same way for every objective of a unit. The asynchronous correction
(:mod:`agentgspo.objective.correction`) weighs the terms in between, so it composes with any objective.

Conventions every objective here keeps (``shared/GSPO.md``):

- Precision: ratios, clip tests and objectives are computed in ``promote(dtype, float32)``: bf16/fp16 inputs are
  upcast, float64 stays float64. GSPO's clip band [1 - 3e-4, 1 + 4e-4] is finer than bf16 resolution.
- Masking selects, never multiplies: masked log-probs and advantages are replaced with 0 by ``torch.where`` before
  any arithmetic (:meth:`Inputs.of`), so NaN / inf at masked positions changes neither the loss nor any gradient.
- Aggregation is the paper's per-trajectory mean ``(1/N) sum_i (...)``: each trajectory weighs 1/N whatever its
  length. ``N`` is ``num_sequences``; by default the number of sequences in this call with at least one trained
  token (empty rows contribute nothing and are not counted). With gradient accumulation over micro-batches, pass
  ``num_sequences =`` the number of trajectories in the whole minibatch (the same number to every micro-batch): the
  summed micro-batch losses and gradients then equal the full-minibatch ones. Do not also divide by the number of
  micro-batches. Under data parallelism that averages gradients over W ranks, pass the global count divided by W.
- Clipped terms are selected explicitly (:func:`clipped_surrogate`): where the min in ``min(r A, clip(r) A)`` picks
  the clipped term, the term is the constant ``clip(r) A`` and its gradient is exactly 0 (also when ``r``
  overflowed to inf).
- Diagnostics are detached 0-dim tensors, computed without a host sync:

  ==================  ==========================================================================================
  ``clip_frac_seq``    share of trained sequences that are clipped (GSPO), or have >= 1 clipped token or turn
  ``clip_frac_turn``   share of trained turns that are clipped (the turn unit only)
  ``clip_frac_token``  clipped tokens / trained tokens; for a sequence or turn unit the tokens of clipped units
  ``clip_frac_low``    share of the unit's trained instances clipped at the low side (A < 0, r < 1 - eps_low)
  ``clip_frac_high``   the same at the high side (A > 0, r > 1 + eps_high)
  ``ratio_mean``       mean ratio over the unit's trained instances; NaN if none (``ratio_min``, ``ratio_max``)
  ``num_tokens``       trained tokens (sum of loss_mask) in this call
  ``num_sequences``    sequences with >= 1 trained token in this call
  ``num_turns``        trained turns (the turn unit only)
  ==================  ==========================================================================================

  To combine micro-batches, weigh each share by the count it is a share of (:func:`clip_diagnostics` says which).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import torch

__all__ = [
    "ClipUnit",
    "ClipBand",
    "GSPO_EPS",
    "GRPO_EPS",
    "SEQUENCE",
    "TURN",
    "TOKEN",
    "ObjectiveResult",
    "Inputs",
    "Turns",
    "Terms",
    "clipped_surrogate",
    "sequence_advantages",
    "token_advantages",
    "aggregate",
    "clip_diagnostics",
    "ratio_stats",
]


@dataclass(frozen=True)
class ClipUnit:
    """What one importance ratio and one clip decision of an objective cover, named by its diagnostics.

    ``fraction`` is the diagnostic holding the share of trained units of this kind that are clipped, ``count`` the
    one holding how many were trained: the weight of that share (and, for an objective's own unit, of
    ``clip_frac_low``, ``clip_frac_high`` and ``ratio_mean``) when micro-batches are combined.
    """

    name: str
    fraction: str
    count: str


SEQUENCE = ClipUnit("sequence", fraction="clip_frac_seq", count="num_sequences")  # s_i, paper Eq. 7
TURN = ClipUnit("turn", fraction="clip_frac_turn", count="num_turns")  # s_ik, Eq. 7 over one assistant turn
TOKEN = ClipUnit("token", fraction="clip_frac_token", count="num_tokens")  # s_it (Eq. 14) or w_it (Eq. 3)


@dataclass(frozen=True)
class ClipBand:
    """The hyperparameters of a clipped objective: the ratio is clipped to ``[1 - eps_low, 1 + eps_high]``. Each
    field's help is its setting's (``--eps-low``, ``--eps-high``: one flag for every objective that declares it)."""

    eps_low: float = field(metadata={"help": "lower clip range of the ratio (clipped below at 1 - eps_low)"})
    eps_high: float = field(metadata={"help": "upper clip range of the ratio (clipped above at 1 + eps_high)"})


# The clip bands of paper §5.1 (v2), (eps_low, eps_high), written here once: GSPO's on the sequence ratio (and
# GSPO-token's and GSPO-turn's), and the GRPO baseline's on the token ratio.
GSPO_EPS = (3e-4, 4e-4)
GRPO_EPS = (0.2, 0.27)


class ObjectiveResult(NamedTuple):
    """``loss = -J``, ready for ``backward()``, and the objective's diagnostics (detached 0-dim tensors)."""

    loss: torch.Tensor
    diagnostics: dict[str, torch.Tensor]


@dataclass(frozen=True)
class Inputs:
    """An objective's inputs after :meth:`of`: shapes checked, upcast, masked positions selected to 0."""

    mask: torch.Tensor  # [B, T] bool, 1 where the token was sampled by the policy
    logp: torch.Tensor  # [B, T], current policy (carries grad), 0 where masked
    old_logp: torch.Tensor  # [B, T], behaviour or proximal policy (a constant), 0 where masked
    turn_ids: torch.Tensor | None = None  # [B, T] each trained token's turn index (turn-unit objectives)

    @classmethod
    def of(
        cls,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
        loss_mask: torch.Tensor,
        turn_ids: torch.Tensor | None = None,
    ) -> Inputs:
        """Check shapes, upcast to fp32 or better, and replace masked positions by 0 before any arithmetic.

        Selecting (not multiplying) here is what keeps NaN / inf at masked positions out of values and gradients.
        """
        if logprobs.dim() != 2 or old_logprobs.shape != logprobs.shape or loss_mask.shape != logprobs.shape:
            raise ValueError(
                "expected logprobs, old/ref logprobs and loss_mask of the same shape [B, T], got "
                f"{tuple(logprobs.shape)}, {tuple(old_logprobs.shape)} and {tuple(loss_mask.shape)}"
            )
        dtype = torch.promote_types(logprobs.dtype, torch.float32)
        mask = loss_mask.bool()  # [B, T]
        logp = torch.where(mask, logprobs.to(dtype), 0.0)  # [B, T]
        old_logp = torch.where(mask, old_logprobs.detach().to(dtype), 0.0)  # [B, T]
        return cls(mask, logp, old_logp, turn_ids)

    def sequence_lengths(self) -> torch.Tensor:
        """``|y_i|``, trained tokens per sequence: ``[B]`` in the objective's dtype."""
        return self.mask.sum(dim=-1).to(self.logp.dtype)  # [B]

    def sequence_mean(self, per_token: torch.Tensor) -> torch.Tensor:
        """Each sequence's mean of ``per_token`` ``[B, T]`` (0 at masked positions): ``[B]``, 0 for empty rows."""
        return per_token.sum(dim=-1) / self.sequence_lengths().clamp(min=1)  # [B]


@dataclass(frozen=True)
class Turns:
    """The assistant turns of a batch as the turn-unit objectives see them: ``K`` turn slots per row."""

    segment: torch.Tensor  # [B*T], each token's slot (row * K + turn), slot 0 of its row where not trained
    length: torch.Tensor  # [B, K], trained tokens per turn
    has_tokens: torch.Tensor  # [B, K] bool, the turns that are trained
    advantages: torch.Tensor  # [B, K], 0 for turns that do not exist

    @classmethod
    def of(cls, inputs: Inputs, advantages: torch.Tensor) -> Turns:
        """Check ``inputs.turn_ids`` ``[B, T]`` and the ``[B]`` or ``[B, K]`` advantages, and count each turn's
        tokens."""
        turn_ids, mask, logp = inputs.turn_ids, inputs.mask, inputs.logp
        if turn_ids is None:
            raise ValueError("a turn-unit objective needs turn_ids: each trained token's assistant-turn index [B, T]")
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
        adv = _turn_advantages(advantages, batch, num_turns, logp)  # [B, K]
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


@dataclass(frozen=True)
class Terms:
    """An objective's per-unit terms before aggregation: ``objective`` is J's term of each unit (with grad), one per
    sequence ``[B]``, turn ``[B, K]`` or token ``[B, T]``; ``ratio`` and the clip masks have its shape."""

    unit: ClipUnit
    objective: torch.Tensor
    ratio: torch.Tensor  # detached
    clipped_low: torch.Tensor  # bool
    clipped_high: torch.Tensor  # bool
    inputs: Inputs
    turns: Turns | None = None  # the turn unit's layout


def clipped_surrogate(
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


def sequence_advantages(advantages: torch.Tensor, inputs: Inputs) -> torch.Tensor:
    """One advantage per sequence ``[B]``, detached, in the objective's dtype."""
    logp = inputs.logp
    if advantages.shape != logp.shape[:1]:
        raise ValueError(
            f"expected one advantage per sequence, shape {tuple(logp.shape[:1])}, got {tuple(advantages.shape)}; "
            "for per-token advantages use gspo_token"
        )
    return advantages.detach().to(logp.dtype)  # [B]


def token_advantages(advantages: torch.Tensor, inputs: Inputs) -> torch.Tensor:
    """Per-token advantages ``[B, T]`` (``[B]`` broadcast over tokens), detached, 0 where masked."""
    mask, logp = inputs.mask, inputs.logp
    if advantages.shape == logp.shape[:1]:
        advantages = advantages[:, None].expand_as(logp)  # [B, T]
    if advantages.shape != logp.shape:
        raise ValueError(
            f"expected advantages of shape [B] = {tuple(logp.shape[:1])} or [B, T] = {tuple(logp.shape)}, "
            f"got {tuple(advantages.shape)}"
        )
    return torch.where(mask, advantages.detach().to(logp.dtype), 0.0)  # [B, T]


def _turn_advantages(advantages: torch.Tensor, batch: int, num_turns: int, logp: torch.Tensor) -> torch.Tensor:
    if advantages.shape == (batch,):
        advantages = advantages[:, None].expand(batch, num_turns)  # [B, K]
    if advantages.dim() != 2 or advantages.shape[0] != batch or advantages.shape[1] < num_turns:
        raise ValueError(
            f"expected advantages of shape [B] = ({batch},) or [B, K] with K >= {num_turns} turns, "
            f"got {tuple(advantages.shape)}"
        )
    return advantages[:, :num_turns].detach().to(device=logp.device, dtype=logp.dtype)  # [B, K]


# ------------------------------------------------------------------------------------------------- aggregation


def aggregate(terms: Terms, num_sequences: int | float | torch.Tensor | None = None) -> ObjectiveResult:
    """``loss = -J`` from per-unit terms, the per-trajectory mean for every unit, and the unit's diagnostics:

    sequence:  J = (1/N) sum_i J_i
    turn:      J = (1/N) sum_i (1/K_i) sum_k J_ik          K_i: trajectory i's trained turns
    token:     J = (1/N) sum_i (1/|y_i|) sum_t m_it J_it
    """
    if terms.unit is SEQUENCE:
        return _sequence_mean(terms, num_sequences)
    if terms.unit is TURN:
        return _turn_mean(terms, num_sequences)
    if terms.unit is TOKEN:
        return _token_mean(terms, num_sequences)
    raise ValueError(f"terms: unknown unit {terms.unit.name!r}; expected sequence, turn or token")


def clip_diagnostics(unit: ClipUnit, reports: tuple[ClipUnit, ...]) -> tuple[tuple[str, str], ...]:
    """The clip diagnostics an objective of ``unit`` reports and how micro-batches combine them: ``(name, how)``,
    ``how`` the count that weighs a share or mean (``num_sequences``...) or ``"min"`` / ``"max"``. ``reports``: the
    clip fractions, in the order a trainer logs them; none for an objective that does not clip."""
    if not reports:
        return ()
    if unit not in reports:
        raise ValueError(
            f"the clip unit {unit.name!r} must be among the reported fractions, got {[u.name for u in reports]}"
        )
    shares = tuple((share.fraction, share.count) for share in reports)
    own = tuple((name, unit.count) for name in ("clip_frac_low", "clip_frac_high", "ratio_mean"))
    return (*shares, *own, ("ratio_min", "min"), ("ratio_max", "max"))


def _normalizer(num_sequences: int | float | torch.Tensor | None, has_tokens: torch.Tensor) -> torch.Tensor | float:
    if num_sequences is None:
        return has_tokens.sum().clamp(min=1)  # [], this call's non-empty sequences
    if isinstance(num_sequences, torch.Tensor):
        num_sequences = num_sequences.detach()
    elif num_sequences <= 0:
        raise ValueError(f"num_sequences must be > 0 (non-empty trajectories in the minibatch), got {num_sequences}")
    return num_sequences


def ratio_stats(ratio: torch.Tensor, valid: torch.Tensor, name: str = "ratio") -> dict[str, torch.Tensor]:
    """Mean/min/max of ``ratio`` over ``valid`` entries (NaN when there are none) as ``{name}_mean`` etc., without a
    host sync."""
    count = valid.sum()  # []
    empty = torch.where(count > 0, 0.0, float("nan")).to(ratio.dtype)  # [], NaN when nothing is valid
    return {
        f"{name}_mean": torch.where(valid, ratio, 0.0).sum() / count.clamp(min=1) + empty,
        f"{name}_min": torch.where(valid, ratio, float("inf")).min() + empty,
        f"{name}_max": torch.where(valid, ratio, float("-inf")).max() + empty,
    }


def _sequence_mean(terms: Terms, num_sequences: int | float | torch.Tensor | None) -> ObjectiveResult:
    """``-(1/N) sum_i objective_i``; diagnostics with the sequence as the clipping unit."""
    seq_len = terms.inputs.sequence_lengths()  # [B]
    has_tokens = seq_len > 0  # [B]
    objective = torch.where(has_tokens, terms.objective, 0.0)  # [B]
    normalizer = _normalizer(num_sequences, has_tokens)  # []
    loss = -objective.sum() / normalizer  # []

    with torch.no_grad():
        low = terms.clipped_low & has_tokens  # [B]
        high = terms.clipped_high & has_tokens  # [B]
        clipped = low | high  # [B]
        num_seq = has_tokens.sum().to(seq_len.dtype)  # []
        num_tokens = seq_len.sum()  # []
        diagnostics = {
            "clip_frac_seq": clipped.sum() / num_seq.clamp(min=1),
            "clip_frac_token": (seq_len * clipped).sum() / num_tokens.clamp(min=1),
            "clip_frac_low": low.sum() / num_seq.clamp(min=1),
            "clip_frac_high": high.sum() / num_seq.clamp(min=1),
            **ratio_stats(terms.ratio, has_tokens),
            "num_tokens": num_tokens,
            "num_sequences": num_seq,
        }
    return ObjectiveResult(loss, diagnostics)


def _turn_mean(terms: Terms, num_sequences: int | float | torch.Tensor | None) -> ObjectiveResult:
    """``-(1/N) sum_i (1/K_i) sum_k objective_ik`` over trained turns; diagnostics with the turn as the clipping
    unit."""
    turns = terms.turns
    has_tokens = turns.has_tokens  # [B, K]
    objective = torch.where(has_tokens, terms.objective, 0.0)  # [B, K]
    turns_per_seq = has_tokens.sum(dim=-1).to(objective.dtype)  # [B]
    per_sequence = objective.sum(dim=-1) / turns_per_seq.clamp(min=1)  # [B]
    loss = -per_sequence.sum() / _normalizer(num_sequences, turns_per_seq > 0)  # []

    with torch.no_grad():
        low = terms.clipped_low & has_tokens  # [B, K]
        high = terms.clipped_high & has_tokens  # [B, K]
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
            **ratio_stats(terms.ratio, has_tokens),
            "num_tokens": num_tokens,
            "num_sequences": num_seq,
            "num_turns": trained_turns,
        }
    return ObjectiveResult(loss, diagnostics)


def _token_mean(terms: Terms, num_sequences: int | float | torch.Tensor | None) -> ObjectiveResult:
    """``-(1/N) sum_i (1/|y_i|) sum_t m_it objective_it``; diagnostics with the token as the clipping unit."""
    mask, objective = terms.inputs.mask, terms.objective
    seq_len = mask.sum(dim=-1).to(objective.dtype)  # [B]
    has_tokens = seq_len > 0  # [B]
    per_sequence = torch.where(mask, objective, 0.0).sum(dim=-1) / seq_len.clamp(min=1)  # [B]
    loss = -per_sequence.sum() / _normalizer(num_sequences, has_tokens)  # []

    with torch.no_grad():
        low = terms.clipped_low & mask  # [B, T]
        high = terms.clipped_high & mask  # [B, T]
        num_tokens = seq_len.sum()  # []
        num_seq = has_tokens.sum().to(objective.dtype)  # []
        diagnostics = {
            "clip_frac_seq": (low | high).any(dim=-1).sum() / num_seq.clamp(min=1),
            "clip_frac_token": (low | high).sum() / num_tokens.clamp(min=1),
            "clip_frac_low": low.sum() / num_tokens.clamp(min=1),
            "clip_frac_high": high.sum() / num_tokens.clamp(min=1),
            **ratio_stats(terms.ratio, mask),
            "num_tokens": num_tokens,
            "num_sequences": num_seq,
        }
    return ObjectiveResult(loss, diagnostics)
