"""agentgspo's envs where verifiers looks for environments: ``vf-eval agentgspo-verifiers --env.taskset.env-id ID``.

verifiers (0.4) loads a taskset by importing the top-level module its id names and taking the ``Taskset``, ``Env``
and ``Harness`` subclasses it exports through ``__all__``; this module re-exports those of
:mod:`agentgspo.environments.interop.verifiers_export`, where they are written and documented.
"""

from agentgspo.environments.interop.verifiers_export import AgentgspoEnv, AgentgspoHarness, AgentgspoTaskset

__all__ = ["AgentgspoEnv", "AgentgspoHarness", "AgentgspoTaskset"]
