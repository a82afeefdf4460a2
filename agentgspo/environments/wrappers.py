"""Limits as wrappers, like Gymnasium's ``TimeLimit``: they set ``truncated``, say why in ``info``, and pay what the
env owes for the cut (:meth:`~agentgspo.environments.env.ChatEnv.on_truncation`, added to the step's reward)."""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym

from agentgspo.environments.env import truncation_reward


class MaxTurns(gym.Wrapper):
    """Truncate the episode after ``max_turns`` assistant turns (``info["stop_reason"] = "max_turns"``)."""

    def __init__(self, env: gym.Env, max_turns: int):
        if max_turns < 1:
            raise ValueError(f"max_turns: expected >= 1, got {max_turns}")
        super().__init__(env)
        self.max_turns = max_turns
        self.turns = 0

    def reset(self, **kwargs: Any):
        """Reset the env and the turn count."""
        self.turns = 0
        return self.env.reset(**kwargs)

    def step(self, action: Any):
        """Step the env; truncate the episode at the ``max_turns``-th turn unless it already ended."""
        messages, reward, terminated, truncated, info = self.env.step(action)
        self.turns += 1
        if self.turns >= self.max_turns and not terminated and not truncated:
            truncated = True
            info = {**info, "stop_reason": "max_turns"}
            reward = float(reward) + truncation_reward(self.env, "max_turns")
        return messages, reward, terminated, truncated, info


class EnvBudget(gym.Wrapper):
    """Truncate the episode once its ``reset`` and ``step`` calls have taken ``seconds`` in all
    (``info["stop_reason"] = "env_budget"``): time inside the env, not time between steps (a policy waiting for its
    sampler spends none of it). Checked when a step returns: the step that spends the budget keeps its reward. It
    cannot interrupt a step that hangs; the rollout runner's ``env_call_timeout_s`` does that, and the runner's
    ``env_budget_s`` is this same budget for any env."""

    def __init__(self, env: gym.Env, seconds: float, clock: Any = time.monotonic):
        if seconds <= 0:
            raise ValueError(f"seconds: expected > 0, got {seconds}")
        super().__init__(env)
        self.seconds = seconds
        self.clock = clock
        self.spent = 0.0

    def reset(self, **kwargs: Any):
        """Reset the env; the time it takes starts the episode's spending."""
        started = self.clock()
        try:
            return self.env.reset(**kwargs)
        finally:
            self.spent = self.clock() - started

    def step(self, action: Any):
        """Step the env and add its time to the spending; truncate the episode once it reaches ``seconds``."""
        started = self.clock()
        messages, reward, terminated, truncated, info = self.env.step(action)
        self.spent += self.clock() - started
        if self.spent >= self.seconds and not terminated and not truncated:
            truncated = True
            info = {**info, "stop_reason": "env_budget"}
            reward = float(reward) + truncation_reward(self.env, "env_budget")
        return messages, reward, terminated, truncated, info
