"""A user's objective as the source of a module in their working directory (``--objective module:name``), shared
by the registry's tests (tests/objective/test_objective_registry.py) and the recipe test that trains with it
(tests/training/test_recipes.py)."""

from __future__ import annotations

#: The module's text; ``{name}`` is the name its decorated objective registers under.
USER_OBJECTIVES = '''
from dataclasses import dataclass

import torch

from agentgspo.objective import objective
from agentgspo.objective.terms import TOKEN, Inputs, Terms, clipped_surrogate, token_advantages


@dataclass(frozen=True)
class Band:
    eps_low: float = 0.2
    eps_high: float = 0.27


@objective("{name}", unit=TOKEN, hyper=Band())
def token_clip(inputs: Inputs, advantages, hyper: Band) -> Terms:
    """A token-level clipped surrogate with its own band (GRPO's objective, as a user would write it)."""
    adv = token_advantages(advantages, inputs)
    return Terms(TOKEN, *clipped_surrogate(inputs.logp - inputs.old_logp, adv, hyper.eps_low, hyper.eps_high), inputs)


def plain(logprobs, old_logprobs, advantages, loss_mask, *, num_sequences=None):
    """REINFORCE on the sequence's mean log-prob: no ratio, no clip, no diagnostics."""
    mask = loss_mask.bool()
    mean = torch.where(mask, logprobs, 0.0).sum(-1) / mask.sum(-1).clamp(min=1)
    return -(advantages * mean).sum() / (num_sequences or len(advantages))


def no_count(logprobs, old_logprobs, advantages, loss_mask):
    return logprobs.sum()
'''
