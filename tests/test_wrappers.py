"""MaxTurns and Deadline set ``truncated`` (never ``terminated``) and say why in ``info["stop_reason"]``."""

from __future__ import annotations

import pytest

from agentgspo.env import Action, ChatEnv
from agentgspo.wrappers import Deadline, MaxTurns


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


def test_deadline_truncates_once_the_clock_passes_it():
    clock = FakeClock()
    env = Deadline(Chatty(), seconds=10, clock=clock)
    env.reset(seed=0)
    clock.now += 9.9
    assert env.step("hi")[3] is False
    clock.now += 0.1
    _, _, terminated, truncated, info = env.step("hi")
    assert (terminated, truncated) == (False, True) and info["stop_reason"] == "deadline"


def test_deadline_restarts_at_reset_and_does_not_override_termination():
    clock = FakeClock()
    env = Deadline(Chatty(), seconds=5, clock=clock)
    clock.now += 60  # time before reset does not count
    env.reset(seed=0)
    assert env.step("hi")[3] is False
    clock.now += 5
    _, _, terminated, truncated, info = env.step("stop")
    assert (terminated, truncated) == (True, False) and "stop_reason" not in info


def test_wrappers_compose_and_the_first_limit_reached_names_the_reason():
    clock = FakeClock()
    env = MaxTurns(Deadline(Chatty(), seconds=5, clock=clock), max_turns=10)
    env.reset(seed=0)
    clock.now += 6
    assert env.step("hi")[4]["stop_reason"] == "deadline"


def test_limits_are_checked_at_construction():
    with pytest.raises(ValueError, match="max_turns: expected >= 1, got 0"):
        MaxTurns(Chatty(), max_turns=0)
    with pytest.raises(ValueError, match="seconds: expected > 0, got -1"):
        Deadline(Chatty(), seconds=-1)
