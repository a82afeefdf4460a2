"""GSPO with the assistant turn as the unit: each turn of a multi-turn trajectory has its own ratio and clip.

    s_ik = exp( (1/|y_ik|) sum_{t in turn k} m_it (logp_it - logp_old_it) )     (GSPO's Eq. 7 over turn k's tokens)
    J    = (1/N) sum_i (1/K_i) sum_k min( s_ik A_ik, clip(s_ik, 1 - eps_low, 1 + eps_high) A_ik )
    loss = -J

``K_i`` counts the turns of trajectory i with at least one trained token. The weighting keeps the paper's
per-trajectory mean across trajectories (each weighs 1/N whatever its number of turns) and gives every turn of a
trajectory an equal share, as Eq. 5 gives every sequence of a group. An unclipped token of turn k gets gradient
``-s_ik A_ik / (N K_i |y_ik|)``. With one turn per trajectory this is ``gspo``.

When it fits: the chat template re-renders history (e.g. drops earlier ``<think>`` blocks) so each turn is trained in
its own context, or turns are long and independent enough that one drifting turn should not clip the whole episode.
The default (``gspo`` over all assistant tokens) is the paper's.

Takes ``turn_ids`` ``[B, T]``: the turn index (0..K-1) of every trained token, any value where ``loss_mask`` is 0
(use -1); advantages ``[B]`` (shared by a trajectory's turns) or ``[B, K]`` (one per turn, e.g. from
``advantages.turn_advantages``; entries of turns that do not exist are ignored). Diagnostics: the turn is the
clipping unit (``clip_frac_turn``; ``clip_frac_seq`` is the share of trajectories with >= 1 clipped turn), plus
``num_turns``.
"""

from __future__ import annotations

import torch

from agentgspo.objective.registry import objective
from agentgspo.objective.terms import GSPO_EPS, TURN, ClipBand, Inputs, Terms, Turns, clipped_surrogate

__all__ = ["gspo_turn"]


@objective("gspo_turn", unit=TURN, hyper=ClipBand(*GSPO_EPS))
def gspo_turn(inputs: Inputs, advantages: torch.Tensor, hyper: ClipBand) -> Terms:
    """The term of each assistant turn ``[B, K]``."""
    turns = Turns.of(inputs, advantages)
    turn_log_ratio = turns.mean(inputs.logp - inputs.old_logp)  # [B, K], 0 for empty turns
    terms = clipped_surrogate(turn_log_ratio, turns.advantages, hyper.eps_low, hyper.eps_high)  # [B, K] x4
    return Terms(TURN, *terms, inputs, turns)
