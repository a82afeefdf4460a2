"""Where each rollout limit comes from (agentgspo/policy/policy_settings.py): a flag given, the policy's record (on
the env it was trained on), the env's budget (turns and context only), or the library's default."""

from __future__ import annotations

from agentgspo.environments.registry import env_budget
from agentgspo.policy.policy_settings import LIMIT_DEFAULTS, PolicySettings, resolve_episode_settings

CALCULATOR = "agentgspo/Calculator-v0"
NOT_GIVEN = dict.fromkeys(LIMIT_DEFAULTS)


def test_without_a_policy_each_limit_is_the_flag_the_env_budget_or_the_default():
    budget = env_budget(CALCULATOR)
    settings = resolve_episode_settings(CALCULATOR, {**NOT_GIVEN, "top_p": 0.5}, None, None)
    assert settings.sources == {
        "max_turns": "env budget",
        "max_new_tokens": "env budget",
        "max_context": "env budget",
        "temperature": "default",
        "top_p": "flag",
        "top_k": "default",
    }
    assert settings.limits() == {
        "max_turns": budget.max_turns,
        "max_new_tokens": budget.max_new_tokens,
        "max_context": budget.max_context,
        "temperature": 1.0,
        "top_p": 0.5,
        "top_k": 0,
    }
    assert list(settings.limits()) == list(settings.sources) == list(LIMIT_DEFAULTS)


def test_a_policy_records_every_limit_for_its_own_env_only():
    trained = PolicySettings(env_id=CALCULATOR, max_turns=3, temperature=0.7)
    own = resolve_episode_settings(None, {**NOT_GIVEN, "max_turns": 5}, None, trained)
    assert own.env_id == CALCULATOR
    assert own.sources == {"max_turns": "flag", **{name: "policy" for name in list(LIMIT_DEFAULTS)[1:]}}
    assert own.limits() == {**LIMIT_DEFAULTS, "max_turns": 5, "temperature": 0.7}
    other = resolve_episode_settings("agentgspo/Math-v0", NOT_GIVEN, None, trained)
    assert set(other.sources.values()) == {"env budget", "default"}
