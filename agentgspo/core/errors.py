"""One error hierarchy: every exception class agentgspo defines derives from :class:`AgentGSPOError`.

Each class also keeps the built-in base it had before the hierarchy existed (``ValueError``, ``RuntimeError``,
``LookupError``, ...), so ``except ValueError`` code keeps working, while a caller who wants every error of ours
catches one class instead of a tuple of built-ins::

    try:
        env = agentgspo.make("CodeForces-v0", split="tain")
    except AgentGSPOError as error:
        print(f"agentgspo refused: {error}")  # the message names the input and the fix

Exempt from the hierarchy (``tests/core/test_errors.py`` lists them): private control-flow classes that never leave
their module (their names start with ``_``), and programs that run inside the sandbox, which must not import
agentgspo (``envs/code_programs/``).
"""

from __future__ import annotations

__all__ = ["AgentGSPOError"]


class AgentGSPOError(Exception):
    """The base of every exception class agentgspo, its envs and its sandboxes define."""
