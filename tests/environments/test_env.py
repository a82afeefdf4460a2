"""The chat-env contract: registration, gymnasium.make, check_env on every env, broken envs caught, the README env."""

from __future__ import annotations

import runpy
from pathlib import Path

import gymnasium as gym
import pytest

import agentgspo
from agentgspo.environments.env import (
    OPTIONAL_MEMBERS,
    Action,
    AssistantTurnSpace,
    ChatEnv,
    MessagesSpace,
    optional_member,
)
from agentgspo.environments.env_checker import EnvContractError, check_env, play
from agentgspo.environments.registry import UnknownEnvError, registered_ids


def test_gymnasium_make_works_after_import_agentgspo():
    env = gym.make("agentgspo/Calculator-v0")
    messages, info = env.reset(seed=3)
    assert messages[-1]["role"] == "user" and "What is" in messages[-1]["content"]
    assert isinstance(info["target"], int)
    env.close()


# Collected at import time so envs other engineers register are checked without touching this file.
@pytest.mark.parametrize("env_id", registered_ids())
def test_check_env_passes_on_every_registered_env(env_id):
    with agentgspo.make(env_id) as env:
        check_env(env)


def test_calculator_oracle_scores_one_and_wrong_scores_zero():
    env = gym.make("agentgspo/Calculator-v0")
    unwrapped = env.unwrapped
    gold, terminated, history = play(env, unwrapped.oracle, seed=5)
    assert (gold, terminated) == (1.0, True)
    assert [m["role"] for m in history] == ["system", "user", "assistant", "tool", "assistant"]
    bad, _, _ = play(env, unwrapped.wrong, seed=5)
    assert bad == 0.0


@pytest.mark.parametrize(
    "expression",
    [
        # each exponent is <= 64, but the base keeps growing: ~10^(10^7), seconds of bigint pow
        "(((9**64)**64)**64)**64",
        "((9**64)**64)*((9**64)**64)*((9**64)**64)",  # 11,700 digits: Python's int-to-str limit, which suggested sys.*
    ],
)
def test_calculator_refuses_huge_results_fast_with_a_clear_message(expression):
    import time

    env = gym.make("agentgspo/Calculator-v0")
    env.reset(seed=0)
    start = time.monotonic()
    messages, *_, info = env.step(agentgspo.ToolCall("calculate", {"expression": expression}).to_text())
    assert time.monotonic() - start < 2.0  # the pow holds the GIL: every other env thread stalled meanwhile
    assert info["tool_errors"] == {"tool_exception": 1}
    assert "too large" in messages[0]["content"] and "set_int_max_str_digits" not in messages[0]["content"]


def test_same_seed_same_task_different_seed_different_task():
    env = gym.make("agentgspo/Calculator-v0")
    first = env.reset(seed=1)[0]
    assert env.reset(seed=1)[0] == first
    assert any(env.reset(seed=s)[0] != first for s in range(2, 6))


class _Echo(ChatEnv):
    """A minimal valid env that the broken variants below break one piece at a time."""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return [{"role": "user", "content": "say hi"}], {}

    def respond(self, action: Action):
        return [], 1.0, True, False, {}


class _ResetReturnsStr(_Echo):
    def reset(self, *, seed=None, options=None):
        return "hello", {}


class _RewardIsBool(_Echo):
    def respond(self, action: Action):
        return [], True, True, False, {}


class _RewardIsNaN(_Echo):
    def respond(self, action: Action):
        return [], float("nan"), True, False, {}


class _NumpyTypes(_Echo):
    def respond(self, action: Action):
        import numpy as np

        return [], np.float32(1.0), np.bool_(True), np.bool_(False), {}


class _TerminatedIsInt(_Echo):
    def respond(self, action: Action):
        return [], 1.0, 1, False, {}


class _MessageWithoutContent(_Echo):
    def respond(self, action: Action):
        return [{"role": "user"}], 0.0, False, False, {}


class _Unseeded(_Echo):
    count = 0

    def reset(self, *, seed=None, options=None):
        _Unseeded.count += 1
        return [{"role": "user", "content": f"task {_Unseeded.count}"}], {}


class _TruncationPaysNone(_Echo):
    def on_truncation(self, reason):
        return None  # forgot to return the score


def test_check_env_passes_a_minimal_env():
    check_env(_Echo())


def test_check_env_takes_numpy_rewards_and_flags_as_gymnasium_does():
    check_env(_NumpyTypes())


@pytest.mark.parametrize(
    ("env_cls", "expected"),
    [
        (_ResetReturnsStr, "reset() messages: expected a list of messages, got 'str'"),
        (_RewardIsBool, "reward: expected a float, got True"),
        (_RewardIsNaN, "reward: expected a finite float, got nan"),
        (_TerminatedIsInt, "terminated: expected a bool, got 1"),
        (_MessageWithoutContent, "expected a dict with str 'role' and str 'content', got {'role': 'user'}"),
        (_Unseeded, "expected the same messages (seeded tasks)"),
        (_TruncationPaysNone, "on_truncation('max_turns'): expected a finite float, got None"),
    ],
)
def test_check_env_names_what_it_expected_and_what_it_got(env_cls, expected):
    with pytest.raises(EnvContractError) as excinfo:
        check_env(env_cls())
    assert expected in str(excinfo.value)


class _PlainGymEnv(gym.Env):
    """A chat env that is a plain ``gymnasium.Env``: it leaves out every optional member."""

    observation_space = MessagesSpace()
    action_space = AssistantTurnSpace()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return [{"role": "user", "content": "say hi"}], {}

    def step(self, action):
        return [], 1.0, True, False, {}


def test_chat_env_declares_every_optional_member_and_a_plain_env_leaves_them_out():
    echo = _Echo()
    assert all(name in dir(echo) for name in OPTIONAL_MEMBERS)  # ChatEnv declares each, with its default
    assert optional_member(echo, "tool_schemas") == [] and optional_member(echo, "oracle") is None
    assert optional_member(echo, "on_truncation")("max_turns") == 0.0
    plain = gym.wrappers.TimeLimit(_PlainGymEnv(), max_episode_steps=5)  # read from env.unwrapped, through wrappers
    assert {name: optional_member(plain, name) for name in OPTIONAL_MEMBERS} == dict.fromkeys(OPTIONAL_MEMBERS)
    check_env(plain)


def test_an_optional_member_outside_the_contract_is_an_error_not_a_silent_none():
    with pytest.raises(ValueError, match=r"expected one of \('tool_schemas', .*\), got 'tools'"):
        optional_member(_Echo(), "tools")


def test_check_env_fails_an_oracle_that_does_not_beat_the_wrong_policy():
    class NoSignal(_Echo):
        oracle = staticmethod(lambda messages: "a")
        wrong = staticmethod(lambda messages: "b")

    with pytest.raises(EnvContractError, match="oracle > wrong"):
        check_env(NoSignal())


def test_unknown_env_id_lists_close_matches():
    with pytest.raises(UnknownEnvError) as excinfo:
        agentgspo.make("agentgspo/Calculater-v0")
    message = str(excinfo.value)
    assert "'agentgspo/Calculater-v0'" in message
    assert "Did you mean: agentgspo/Calculator-v0" in message
    assert isinstance(excinfo.value, gym.error.Error) and isinstance(excinfo.value, LookupError)


def test_register_requires_a_namespace_and_is_idempotent():
    with pytest.raises(ValueError, match="agentgspo/Calculator-v0"):
        agentgspo.register("Calculator-v0", entry_point="agentgspo.envs.calculator:CalculatorEnv")
    agentgspo.register("agentgspo/Calculator-v0", entry_point="somewhere.else:Nothing")  # no-op, no warning
    assert isinstance(gym.make("agentgspo/Calculator-v0").unwrapped, ChatEnv)


def test_an_id_form_registered_by_entry_point_is_made_budgeted_and_counted_and_a_bad_one_is_named(monkeypatch):
    """Ids of another form than a name (a server URL) go to the resolver their package registered, imported by
    entry point on first use: here ``calc:`` ids play Calculator-v0 with a budget and a capacity."""
    import sys
    import types

    from agentgspo.environments import registry

    monkeypatch.setattr(registry, "_ID_RESOLVERS", dict(registry._ID_RESOLVERS))
    forms = types.ModuleType("calc_forms")
    budget = registry.EnvBudget(max_turns=2, max_new_tokens=20, max_context=200)
    forms.CALC = registry.EnvIdResolver(
        resolve=lambda env_id, kwargs: ("agentgspo/Calculator-v0", kwargs),
        budget=lambda env_id: budget,
        capacity=lambda env_id: int(env_id.removeprefix("calc:")),
    )
    forms.NOT_A_RESOLVER = object()
    monkeypatch.setitem(sys.modules, "calc_forms", forms)

    registry.register_id_resolver(("calc:",), "calc_forms:CALC")
    assert isinstance(agentgspo.make("calc:3").unwrapped, ChatEnv)
    assert registry.env_budget("calc:3") == budget and registry.episode_capacity("calc:3") == 3
    assert registry.id_resolver("agentgspo/Calculator-v0") is None  # names are not a form
    assert registry.resolve("http://127.0.0.1:1", {"a": 1}) == (  # the interop package's own form
        "openenv/Remote-v0",
        {"url": "http://127.0.0.1:1", "env_kwargs": {"a": 1}},
    )

    registry.register_id_resolver(("bad:",), "calc_forms:NOT_A_RESOLVER")
    with pytest.raises(TypeError, match="calc_forms:NOT_A_RESOLVER"):
        agentgspo.make("bad:1")
    with pytest.raises(ValueError, match="module:attribute"):
        registry.register_id_resolver(("x:",), "calc_forms")


def test_chat_env_rejects_bad_settings_at_construction():
    with pytest.raises(ValueError, match="tool_error_policy: expected one of"):
        _Echo(tool_error_policy="ignore")
    with pytest.raises(ValueError, match="max_parse_errors: expected None or >= 1, got 0"):
        _Echo(max_parse_errors=0)


def test_readme_example_runs_and_its_env_passes_check_env_and_scores_one():
    path = Path(__file__).resolve().parents[1] / "readme_example.py"
    assert len(path.read_text().splitlines()) <= 50  # "a custom environment in about 30 lines" (+ docstring)
    namespace = runpy.run_path(str(path), run_name="readme_example")
    assert namespace["reward"] == 1.0 and namespace["terminated"] is True
    env = gym.make("agentgspo/Reverse-v0")
    assert isinstance(env.unwrapped, namespace["ReverseEnv"])
    check_env(env)
    assert env.unwrapped.tool_schemas[0]["function"]["parameters"]["properties"]["text"] == {
        "type": "string",
        "description": "the string to reverse.",
    }
