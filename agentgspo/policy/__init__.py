"""Policy backends: they sample one assistant turn as token ids with the log-prob of each sampled id."""

from agentgspo.core.sampling import PolicyBackend, SampledTurn, SampleRequest, SamplingParams
from agentgspo.policy.base import ScriptedPolicy

__all__ = ["PolicyBackend", "SampleRequest", "SampledTurn", "SamplingParams", "ScriptedPolicy"]
