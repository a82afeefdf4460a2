"""Policy backends: they sample one assistant turn as token ids with the log-prob of each sampled id."""

from agentgspo.policy.base import PolicyBackend, SampledTurn, SampleRequest, SamplingParams, ScriptedPolicy

__all__ = ["PolicyBackend", "SampleRequest", "SampledTurn", "SamplingParams", "ScriptedPolicy", "load_policy"]


def load_policy(spec: str, **kwargs):
    """``"tiny"`` (the embedded tiny MoE) or a folder saved with ``save_pretrained``: an :class:`HFPolicy`."""
    from agentgspo.policy.hf import HFPolicy

    return HFPolicy.from_pretrained(spec, **kwargs)
