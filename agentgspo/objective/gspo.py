"""GSPO: one importance ratio per trajectory, clipped as a whole (Zheng et al., arXiv 2507.18071, Eq. 5-7).

    s_i  = exp( (1/|y_i|) sum_t m_it (logp_it - logp_old_it) ),   |y_i| = sum_t m_it      (Eq. 7)
    J    = (1/N) sum_i min( s_i A_i, clip(s_i, 1 - eps_low, 1 + eps_high) A_i )          (Eq. 5)
    loss = -J

Clipping is decided per sequence from s_i only; single token ratios never clip. Every policy token of an unclipped
trajectory gets gradient ``-s_i A_i / (N |y_i|)`` (Eq. 10). Defaults eps_low = 3e-4, eps_high = 4e-4 (§5.1).
"""

from __future__ import annotations

import torch

from agentgspo.objective.registry import objective
from agentgspo.objective.terms import GSPO_EPS, SEQUENCE, ClipBand, Inputs, Terms, clipped_surrogate
from agentgspo.objective.terms import sequence_advantages

__all__ = ["gspo"]


@objective("gspo", unit=SEQUENCE, hyper=ClipBand(*GSPO_EPS))
def gspo(inputs: Inputs, advantages: torch.Tensor, hyper: ClipBand) -> Terms:
    """Eq. 5-7's term of each trajectory; ``advantages`` ``[B]``, one per trajectory (e.g. ``group_advantages``)."""
    adv = sequence_advantages(advantages, inputs)  # [B]
    seq_log_ratio = inputs.sequence_mean(inputs.logp - inputs.old_logp)  # [B], 0 for empty rows
    terms = clipped_surrogate(seq_log_ratio, adv, hyper.eps_low, hyper.eps_high)  # [B] x4
    return Terms(SEQUENCE, *terms, inputs)
