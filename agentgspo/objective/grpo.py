"""The GRPO baseline with token-level ratios, as the GSPO paper states it (arXiv 2507.18071, Eq. 2-3).

    w_it = exp(logp_it - logp_old_it)                                                              (Eq. 3)
    J    = (1/N) sum_i (1/|y_i|) sum_t m_it min( w_it A_it, clip(w_it, 1 - eps_low, 1 + eps_high) A_it )
    loss = -J                                                                                       (Eq. 2)

Defaults eps_low = 0.2, eps_high = 0.27 (§5.1). No KL term (``agentgspo.objective.kl.kl_k3`` gives one to add).
Under the asynchronous correction each token has its own behaviour weight (AReaL's decoupled PPO objective); token
weights vary far more than a sequence's geometric mean, and a band as narrow as the sequence mask's drops most tokens
of a stale batch.
"""

from __future__ import annotations

import torch

from agentgspo.objective.registry import objective
from agentgspo.objective.terms import GRPO_EPS, TOKEN, ClipBand, Inputs, Terms, clipped_surrogate, token_advantages

__all__ = ["grpo"]


@objective("grpo", unit=TOKEN, hyper=ClipBand(*GRPO_EPS))
def grpo(inputs: Inputs, advantages: torch.Tensor, hyper: ClipBand) -> Terms:
    """Eq. 2-3's term of each token ``[B, T]``; ``advantages`` ``[B]`` (broadcast) or ``[B, T]``."""
    adv = token_advantages(advantages, inputs)  # [B, T]
    token_log_ratio = inputs.logp - inputs.old_logp  # [B, T]
    terms = clipped_surrogate(token_log_ratio, adv, hyper.eps_low, hyper.eps_high)  # [B, T] x4
    return Terms(TOKEN, *terms, inputs)
