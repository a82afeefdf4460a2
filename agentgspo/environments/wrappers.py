"""Episode limits, written once: the rules, and the Gymnasium wrappers that apply them to an env.

:class:`TurnLimit` (assistant turns against ``max_turns``) and :class:`TimeBudget` (seconds inside env calls against
a budget) decide when a limit is reached. Two places apply them, and neither has its own copy:

- the wrappers :class:`MaxTurns` and :class:`EnvBudget`, like Gymnasium's ``TimeLimit``: for an env played outside
  the rollout runner, or cut tighter than the runner's config. They set ``truncated``, say why in ``info`` and pay
  what the env owes for the cut (:meth:`~agentgspo.environments.env.ChatEnv.on_truncation`, added to the step's
  reward, by :func:`truncate`);
- the rollout runner (``agentgspo.rollouts.rollout``), whose ``max_turns`` and ``env_budget_s`` are a
  :class:`TurnLimit` and a :class:`TimeBudget` per episode.

The runner does not wrap its envs in :class:`MaxTurns` and :class:`EnvBudget`: its limits are these rules, but
applied where a wrapper cannot see. Its budget counts the time of ``make_env`` and of the ``on_truncation`` call
too, and is checked after ``reset`` (an episode can spend it before its first turn), while a wrapper sees only
``reset`` and ``step``. Its cuts after a step go in one order, ``env_budget``, then ``end_of_text`` (a turn that
ended on a stop id other than end-of-turn), then ``max_turns``: a :class:`MaxTurns` around the env would cut an
end-of-text last turn as ``max_turns`` inside the step and pay ``on_truncation("max_turns")`` where the runner pays
``on_truncation("end_of_text")``. And it pays ``on_truncation`` once, after the episode, for its five cuts alike
(``max_tokens`` and ``context_overflow`` come without a step to add it to). An env the runner plays may still be
wrapped: a wrapper's cut is the env's own ending (``truncated`` with its ``stop_reason``), paid by the wrapper, and
the runner pays nothing more.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym

from agentgspo.environments.env import truncation_reward

__all__ = ["TurnLimit", "TimeBudget", "truncate", "MaxTurns", "EnvBudget"]


class TurnLimit:
    """Assistant turns of one episode against ``max_turns``."""

    def __init__(self, max_turns: int):
        self.max_turns = max_turns
        self.turns = 0

    def count(self) -> None:
        """One more assistant turn."""
        self.turns += 1

    @property
    def reached(self) -> bool:
        """True once ``max_turns`` turns were played: the episode is cut after the ``max_turns``-th turn."""
        return self.turns >= self.max_turns


class TimeBudget:
    """Seconds one episode spent inside env calls against ``seconds`` (``None``: no budget). Time between calls (a
    policy waiting for its sampler) is not added, so it is not spent."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.spent = 0.0

    def add(self, seconds: float) -> None:
        """Add the time one env call took."""
        self.spent += seconds

    @property
    def spent_out(self) -> bool:
        """True once the calls took ``seconds`` in all (checked as a call returns: the call that spends the budget
        has run to its end)."""
        return self.seconds is not None and self.spent >= self.seconds


def truncate(env: gym.Env, step: tuple, reason: str) -> tuple:
    """``step``'s 5-tuple cut for ``reason``: ``truncated``, ``info["stop_reason"] = reason`` and the reward plus what
    the env owes for the cut (:func:`~agentgspo.environments.env.truncation_reward`, called once here)."""
    messages, reward, terminated, _, info = step
    return messages, float(reward) + truncation_reward(env, reason), terminated, True, {**info, "stop_reason": reason}


class MaxTurns(gym.Wrapper):
    """Truncate the episode after ``max_turns`` assistant turns (``info["stop_reason"] = "max_turns"``)."""

    def __init__(self, env: gym.Env, max_turns: int):
        if max_turns < 1:
            raise ValueError(f"max_turns: expected >= 1, got {max_turns}")
        super().__init__(env)
        self.max_turns = max_turns
        self.limit = TurnLimit(max_turns)

    @property
    def turns(self) -> int:
        """Turns stepped since the last ``reset``."""
        return self.limit.turns

    def reset(self, **kwargs: Any):
        """Reset the env and the turn count."""
        self.limit = TurnLimit(self.max_turns)
        return self.env.reset(**kwargs)

    def step(self, action: Any):
        """Step the env; truncate the episode at the ``max_turns``-th turn unless it already ended."""
        step = self.env.step(action)
        _, _, terminated, truncated, _ = step
        self.limit.count()
        if self.limit.reached and not terminated and not truncated:
            return truncate(self.env, step, "max_turns")
        return step


class EnvBudget(gym.Wrapper):
    """Truncate the episode once its ``reset`` and ``step`` calls have taken ``seconds`` in all
    (``info["stop_reason"] = "env_budget"``): time inside the env, not time between steps (a policy waiting for its
    sampler spends none of it). Checked when a step returns: the step that spends the budget keeps its reward. It
    cannot interrupt a step that hangs; the rollout runner's ``env_call_timeout_s`` does that, and the runner's
    ``env_budget_s`` is this same :class:`TimeBudget` for any env (over its ``make_env`` too)."""

    def __init__(self, env: gym.Env, seconds: float, clock: Any = time.monotonic):
        if seconds <= 0:
            raise ValueError(f"seconds: expected > 0, got {seconds}")
        super().__init__(env)
        self.seconds = seconds
        self.clock = clock
        self.budget = TimeBudget(seconds)

    @property
    def spent(self) -> float:
        """Seconds inside ``reset`` and ``step`` since the last ``reset`` began."""
        return self.budget.spent

    def reset(self, **kwargs: Any):
        """Reset the env; the time it takes starts the episode's spending."""
        self.budget = TimeBudget(self.seconds)
        started = self.clock()
        try:
            return self.env.reset(**kwargs)
        finally:
            self.budget.add(self.clock() - started)

    def step(self, action: Any):
        """Step the env and add its time to the spending; truncate the episode once it reaches ``seconds``."""
        started = self.clock()
        step = self.env.step(action)
        _, _, terminated, truncated, _ = step
        self.budget.add(self.clock() - started)
        if self.budget.spent_out and not terminated and not truncated:
            return truncate(self.env, step, "env_budget")
        return step
