"""Policy backends: they sample one assistant turn as token ids with the log-prob of each sampled id."""

from agentgspo.policy.base import PolicyBackend, SampledTurn, SampleRequest, SamplingParams, ScriptedPolicy

__all__ = ["PolicyBackend", "SampleRequest", "SampledTurn", "SamplingParams", "ScriptedPolicy"]
