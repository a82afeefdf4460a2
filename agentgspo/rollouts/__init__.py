"""Rollouts and records: the chat renderer that makes token-exact ids (``chat``), the trajectory record with its
table of endings (``trajectory``) and the runner that plays N x G episodes (``rollout``). Imports the environments
wing and the policy protocol (``agentgspo.policy.base``); never the objective or the learner."""

__all__: list[str] = []  # the wing's modules hold its API (each defines its own __all__)
