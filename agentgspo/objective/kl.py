"""The k3 KL estimate against a reference policy, the optional penalty added to any objective's loss."""

from __future__ import annotations

import torch

from agentgspo.objective.terms import Inputs

__all__ = ["kl_k3"]


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
    inputs = Inputs.of(logprobs, ref_logprobs, loss_mask)  # masked positions selected to 0
    log_ratio = inputs.old_logp - inputs.logp  # [B, T], 0 at masked positions
    k3 = torch.where(inputs.mask, torch.exp(log_ratio) - log_ratio - 1.0, 0.0)  # [B, T]
    return k3.sum(dim=-1) / inputs.mask.sum(dim=-1).clamp(min=1)  # [B]
