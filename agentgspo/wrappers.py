"""Limits as wrappers, like Gymnasium's ``TimeLimit``: they set ``truncated`` and say why in ``info``."""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym


class MaxTurns(gym.Wrapper):
    """Truncate the episode after ``max_turns`` assistant turns (``info["stop_reason"] = "max_turns"``)."""

    def __init__(self, env: gym.Env, max_turns: int):
        if max_turns < 1:
            raise ValueError(f"max_turns: expected >= 1, got {max_turns}")
        super().__init__(env)
        self.max_turns = max_turns
        self.turns = 0

    def reset(self, **kwargs: Any):
        self.turns = 0
        return self.env.reset(**kwargs)

    def step(self, action: Any):
        messages, reward, terminated, truncated, info = self.env.step(action)
        self.turns += 1
        if self.turns >= self.max_turns and not terminated and not truncated:
            truncated = True
            info = {**info, "stop_reason": "max_turns"}
        return messages, reward, terminated, truncated, info


class Deadline(gym.Wrapper):
    """Truncate the episode once ``seconds`` of wall clock have passed since ``reset``
    (``info["stop_reason"] = "deadline"``). It cannot interrupt a step that hangs; the rollout runner's
    per-episode deadline does that."""

    def __init__(self, env: gym.Env, seconds: float, clock: Any = time.monotonic):
        if seconds <= 0:
            raise ValueError(f"seconds: expected > 0, got {seconds}")
        super().__init__(env)
        self.seconds = seconds
        self.clock = clock
        self.started = clock()

    def reset(self, **kwargs: Any):
        self.started = self.clock()
        return self.env.reset(**kwargs)

    def step(self, action: Any):
        messages, reward, terminated, truncated, info = self.env.step(action)
        if self.clock() - self.started >= self.seconds and not terminated and not truncated:
            truncated = True
            info = {**info, "stop_reason": "deadline"}
        return messages, reward, terminated, truncated, info
