"""MaxTurns and EnvBudget set ``truncated`` (never ``terminated``), say why in ``info["stop_reason"]`` and pay the
env's ``on_truncation``. The runner applies the same rules (TurnLimit, TimeBudget): tests/rollouts/test_rollout.py
shows it."""

from __future__ import annotations

import pytest

from agentgspo.environments.env import Action, ChatEnv
from agentgspo.environments.wrappers import EnvBudget, MaxTurns


class Chatty(ChatEnv):
    """Replies "Again." forever, or ends (terminated) on the turn "stop"."""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return [{"role": "user", "content": "talk"}], {}

    def respond(self, action: Action):
        if action.text == "stop":
            return [], 1.0, True, False, {"why": "asked"}
        return [{"role": "user", "content": "Again."}], 0.0, False, False, {"why": "more"}


class FakeClock:
    """An injectable clock: time moves only when the test says so."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_max_turns_truncates_at_the_limit_and_keeps_info():
    env = MaxTurns(Chatty(), max_turns=3)
    env.reset(seed=0)
    for _ in range(2):
        _, _, terminated, truncated, info = env.step("hi")
        assert (terminated, truncated) == (False, False) and "stop_reason" not in info
    messages, _, terminated, truncated, info = env.step("hi")
    assert (terminated, truncated) == (False, True)
    assert info == {"why": "more", "stop_reason": "max_turns"}
    assert messages == [{"role": "user", "content": "Again."}]


def test_max_turns_leaves_an_episode_that_terminates_on_the_last_turn_alone():
    env = MaxTurns(Chatty(), max_turns=2)
    env.reset(seed=0)
    env.step("hi")
    _, reward, terminated, truncated, info = env.step("stop")
    assert (reward, terminated, truncated) == (1.0, True, False) and "stop_reason" not in info


def test_max_turns_counts_from_reset():
    env = MaxTurns(Chatty(), max_turns=2)
    env.reset(seed=0)
    env.step("hi")
    env.reset(seed=0)
    assert env.step("hi")[3] is False
    assert env.step("hi")[3] is True


class SlowChatty(Chatty):
    """Chatty whose steps take ``step_seconds`` on the injected clock; pays 0.5 for a cut (``on_truncation``)."""

    def __init__(self, clock, step_seconds=0.0):
        super().__init__()
        self.clock, self.step_seconds, self.cuts = clock, step_seconds, []

    def step(self, action):
        self.clock.now += self.step_seconds
        return super().step(action)

    def on_truncation(self, reason):
        self.cuts.append(reason)
        return 0.5


def test_env_budget_counts_time_inside_env_calls_not_time_between_them():
    clock = FakeClock()
    inner = SlowChatty(clock, step_seconds=4.0)
    env = EnvBudget(inner, seconds=10, clock=clock)
    env.reset(seed=0)
    for _ in range(2):
        clock.now += 1000  # the policy waiting for its sampler: not the env's time
        assert env.step("hi")[3] is False
    _, reward, terminated, truncated, info = env.step("hi")  # 12 s inside the env: spent
    assert (terminated, truncated) == (False, True) and info["stop_reason"] == "env_budget"
    assert reward == 0.5 and inner.cuts == ["env_budget"]  # the env is paid what it owes for the cut


def test_env_budget_restarts_at_reset_and_does_not_override_termination():
    clock = FakeClock()
    env = EnvBudget(SlowChatty(clock, step_seconds=5.0), seconds=5, clock=clock)
    env.reset(seed=0)
    env.step("hi")
    env.reset(seed=0)  # a new episode: a new budget
    clock.now += 60
    _, reward, terminated, truncated, info = env.step("stop")
    assert (reward, terminated, truncated) == (1.0, True, False) and "stop_reason" not in info


def test_wrappers_compose_and_the_first_limit_reached_names_the_reason():
    clock = FakeClock()
    inner = SlowChatty(clock, step_seconds=6.0)
    env = MaxTurns(EnvBudget(inner, seconds=5, clock=clock), max_turns=1)
    env.reset(seed=0)
    _, reward, _, truncated, info = env.step("hi")
    assert truncated and info["stop_reason"] == "env_budget"
    assert reward == 0.5 and inner.cuts == ["env_budget"]  # paid once, by the wrapper that cut


def test_max_turns_pays_what_the_env_owes_for_the_cut():
    inner = SlowChatty(FakeClock())
    env = MaxTurns(inner, max_turns=1)
    env.reset(seed=0)
    assert env.step("hi")[1:4] == (0.5, False, True) and inner.cuts == ["max_turns"]


def test_the_budget_is_spent_when_reached_not_only_when_passed():
    # the rule the runner's env_budget_s shares (TimeBudget): the call that brings the spending to the budget cuts
    clock = FakeClock()
    inner = SlowChatty(clock, step_seconds=5.0)
    env = EnvBudget(inner, seconds=5, clock=clock)
    env.reset(seed=0)
    _, reward, _, truncated, info = env.step("hi")
    assert truncated and info["stop_reason"] == "env_budget" and env.spent == 5.0
    assert reward == 0.5 and inner.cuts == ["env_budget"]


def test_the_counters_say_the_current_episode():
    clock = FakeClock()
    turns, budget = (
        MaxTurns(Chatty(), max_turns=5),
        EnvBudget(SlowChatty(clock, step_seconds=2.0), seconds=60, clock=clock),
    )
    for env in (turns, budget):
        env.reset(seed=0)
        env.step("hi")
        env.step("hi")
    assert (turns.turns, budget.spent) == (2, 4.0)
    turns.reset(seed=0)
    budget.reset(seed=0)
    assert (turns.turns, budget.spent) == (0, 0.0)


def test_limits_are_checked_at_construction():
    with pytest.raises(ValueError, match="max_turns: expected >= 1, got 0"):
        MaxTurns(Chatty(), max_turns=0)
    with pytest.raises(ValueError, match="seconds: expected > 0, got -1"):
        EnvBudget(Chatty(), seconds=-1)
