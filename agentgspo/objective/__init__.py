"""The objective: group advantages, log-probs from logits, micro-batches of trajectories, and the objectives by name
(GSPO, GSPO-turn, GSPO-token and the GRPO baseline, arXiv 2507.18071), each one module with its formula, with the
asynchronous correction composed onto any of them. Imports torch and the core only.

``OBJECTIVES[name](logprobs, old_logprobs, advantages, loss_mask, **hyper)`` returns ``ObjectiveResult(loss,
diagnostics)``; :mod:`agentgspo.objective.registry` says how to add one.
"""

from agentgspo.objective import gspo, gspo_token, gspo_turn, grpo  # noqa: F401  (each registers itself)
from agentgspo.objective.correction import decoupled
from agentgspo.objective.registry import OBJECTIVES, Objective, load_objective, objective
from agentgspo.objective.terms import ObjectiveResult

__all__ = ["OBJECTIVES", "Objective", "ObjectiveResult", "objective", "load_objective", "decoupled"]
