"""GSPO-token: GSPO's sequence ratio with per-token advantages (Zheng et al., arXiv 2507.18071, Eq. 13-14).

    s_it = sg[s_i] * pi(y_it) / sg[pi(y_it)]        (value s_i, gradient s_i * d logp_it)          (Eq. 14)
    J    = (1/N) sum_i (1/|y_i|) sum_t m_it min( s_it A_it, clip(s_it, 1 - eps_low, 1 + eps_high) A_it )
    loss = -J                                                                                         (Eq. 13)

With ``A_it = A_i`` for all t this equals ``gspo`` in value, clipping and gradient. Clipping is per token only
because the advantage's sign may differ between tokens; the ratio value is the sequence's s_i. Under the
asynchronous correction each token is weighed by its sequence's behaviour weight.
"""

from __future__ import annotations

import torch

from agentgspo.objective.registry import objective
from agentgspo.objective.terms import GSPO_EPS, SEQUENCE, TOKEN, ClipBand, Inputs, Terms, clipped_surrogate
from agentgspo.objective.terms import token_advantages

__all__ = ["gspo_token"]


@objective("gspo_token", unit=TOKEN, hyper=ClipBand(*GSPO_EPS), weight_unit=SEQUENCE)
def gspo_token(inputs: Inputs, advantages: torch.Tensor, hyper: ClipBand) -> Terms:
    """Eq. 13-14's term of each token ``[B, T]``; ``advantages`` ``[B, T]`` (``[B]`` is broadcast)."""
    adv = token_advantages(advantages, inputs)  # [B, T]
    seq_log_ratio = inputs.sequence_mean(inputs.logp - inputs.old_logp)  # [B]
    token_log_ratio = seq_log_ratio.detach()[:, None] + inputs.logp - inputs.logp.detach()  # [B, T], log s_it
    terms = clipped_surrogate(token_log_ratio, adv, hyper.eps_low, hyper.eps_high)  # [B, T] x4
    return Terms(TOKEN, *terms, inputs)
