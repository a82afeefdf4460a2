"""The objectives under their former function names, kept importable for one release (CHANGELOG, 0.2.0); internal
(no ``__all__``, no API page).

Each objective is its own module now (:mod:`agentgspo.objective.gspo`, ``gspo_turn``, ``gspo_token``, ``grpo``),
registered in ``agentgspo.objective.OBJECTIVES``; the asynchronous correction is one function composed onto any of
them (:func:`agentgspo.objective.correction.decoupled`). ``gspo_loss`` is ``OBJECTIVES["gspo"]``, called as before
and returning an ``ObjectiveResult`` (a ``(loss, diagnostics)`` tuple); ``decoupled_gspo_loss`` is
``decoupled(OBJECTIVES["gspo"])``.
"""

from __future__ import annotations

import warnings

# Re-exported under the former names for one release (none of them is used here).
from agentgspo.objective.correction import BEHAVIOUR_FRACTIONS, BEHAVIOUR_MASK  # noqa: F401
from agentgspo.objective.correction import BEHAVIOUR_NONFINITE, BEHAVIOUR_TIS_CAP, decoupled  # noqa: F401
from agentgspo.objective.gspo import gspo as gspo_loss
from agentgspo.objective.gspo_token import gspo_token as gspo_token_loss
from agentgspo.objective.gspo_turn import gspo_turn as gspo_turn_loss
from agentgspo.objective.grpo import grpo as grpo_loss
from agentgspo.objective.kl import kl_k3  # noqa: F401
from agentgspo.objective.terms import GRPO_EPS, GSPO_EPS, SEQUENCE, TOKEN, TURN, ClipUnit  # noqa: F401


warnings.warn(
    "agentgspo.objective.loss is split into one module per objective: use agentgspo.objective.OBJECTIVES['gspo'] "
    "(gspo_turn, gspo_token, grpo), agentgspo.objective.decoupled(...) for the decoupled forms, "
    "agentgspo.objective.kl.kl_k3 and agentgspo.objective.terms for the units and clip bands",
    DeprecationWarning,
    stacklevel=2,
)

decoupled_gspo_loss = decoupled(gspo_loss)
decoupled_gspo_turn_loss = decoupled(gspo_turn_loss)
decoupled_gspo_token_loss = decoupled(gspo_token_loss)
decoupled_grpo_loss = decoupled(grpo_loss)
