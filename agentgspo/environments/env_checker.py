"""`check_env`: play scripted episodes and assert the chat-env contract of :mod:`agentgspo.environments.env`.

Every failure says what was expected and what came back, like Gymnasium's own checker.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import gymnasium as gym
import numpy as np

from agentgspo.core.errors import AgentGSPOError
from agentgspo.environments.env import is_message, optional_member

__all__ = ["EnvContractError", "play", "check_env"]


class EnvContractError(AssertionError, AgentGSPOError):
    """An environment broke the reset/step contract."""


def _expect(condition: bool, where: str, expected: str, got: Any) -> None:
    if not condition:
        raise EnvContractError(f"{where}: expected {expected}, got {got!r}")


def _check_messages(messages: Any, where: str, *, allow_empty: bool) -> None:
    _expect(isinstance(messages, list), where, "a list of messages", type(messages).__name__)
    _expect(allow_empty or len(messages) > 0, where, "at least one message", messages)
    for i, message in enumerate(messages):
        _expect(is_message(message), f"{where}[{i}]", "a dict with str 'role' and str 'content'", message)


def _check_reset(env: gym.Env, seed: int) -> list[dict[str, Any]]:
    result = env.reset(seed=seed)
    _expect(isinstance(result, tuple) and len(result) == 2, "reset()", "a (messages, info) tuple", result)
    messages, info = result
    _check_messages(messages, "reset() messages", allow_empty=False)
    _expect(isinstance(info, dict), "reset() info", "a dict", type(info).__name__)
    return messages


def _check_step(env: gym.Env, action: str, where: str) -> tuple[list, float, bool, bool, dict]:
    result = env.step(action)
    _expect(
        isinstance(result, tuple) and len(result) == 5, where, "(messages, reward, terminated, truncated, info)", result
    )
    messages, reward, terminated, truncated, info = result
    _check_messages(messages, f"{where} messages", allow_empty=True)
    # As Gymnasium's checker: Python or numpy numbers (a bool is not a reward), and a NaN or inf reward is a bug.
    is_number = isinstance(reward, numbers.Real) and not isinstance(reward, (bool, np.bool_))
    _expect(is_number, f"{where} reward", "a float", reward)
    _expect(math.isfinite(reward), f"{where} reward", "a finite float", reward)
    _expect(isinstance(terminated, (bool, np.bool_)), f"{where} terminated", "a bool", terminated)
    _expect(isinstance(truncated, (bool, np.bool_)), f"{where} truncated", "a bool", truncated)
    _expect(isinstance(info, dict), f"{where} info", "a dict", type(info).__name__)
    return messages, float(reward), bool(terminated), bool(truncated), info


def play(env: gym.Env, policy: Any, *, seed: int, max_turns: int = 20) -> tuple[float, bool, list[dict]]:
    """Play one episode with a text policy ``policy(messages) -> str``; returns (total reward, terminated, messages)."""
    history = list(_check_reset(env, seed))
    total = 0.0
    for turn in range(max_turns):
        text = policy(history)
        history.append({"role": "assistant", "content": text})
        messages, reward, terminated, truncated, _ = _check_step(env, text, f"step() turn {turn}")
        history.extend(messages)
        total += reward
        if terminated or truncated:
            return total, terminated, history
    return total, False, history


def check_env(env: gym.Env, *, seed: int = 0, max_turns: int = 20) -> None:
    """Assert the chat-env contract on ``env``; raises :class:`EnvContractError` naming the first violation.

    Checks: spaces; ``reset`` shape and determinism under a seed; ``step`` shape on a plain answer; a malformed
    and an unknown tool call come back as error tool messages (for envs with tools); ``on_truncation`` (where the
    env has it) returns a finite float; the env's oracle episode ends with ``terminated`` and scores above its wrong
    policy's episode.
    """
    unwrapped = env.unwrapped
    _expect(
        isinstance(env.observation_space, gym.Space), "observation_space", "a gymnasium.Space", env.observation_space
    )
    _expect(isinstance(env.action_space, gym.Space), "action_space", "a gymnasium.Space", env.action_space)

    first = _check_reset(env, seed)
    again = _check_reset(env, seed)
    _expect(first == again, f"reset(seed={seed}) twice", "the same messages (seeded tasks)", (first, again))

    if optional_member(env, "tool_schemas"):
        _check_reset(env, seed)
        messages, *_, info = _check_step(env, "<tool_call>{not json</tool_call>", "step(malformed tool call)")
        _expect(
            any(m["role"] == "tool" and "Error" in m["content"] for m in messages),
            "step(malformed tool call) messages",
            "a tool message with an error",
            messages,
        )
        _expect(
            info.get("tool_errors", {}).get("parse_error", 0) >= 1,
            "step(malformed tool call) info",
            "tool_errors['parse_error'] >= 1",
            info.get("tool_errors"),
        )
        _check_reset(env, seed)
        unknown = '<tool_call>{"name": "no_such_tool_xyz", "arguments": {}}</tool_call>'
        messages, *_, info = _check_step(env, unknown, "step(unknown tool)")
        _expect(
            any(m["role"] == "tool" and "no_such_tool_xyz" in m["content"] for m in messages),
            "step(unknown tool) messages",
            "a tool message naming the unknown tool",
            messages,
        )
        _expect(
            info.get("tool_errors", {}).get("unknown_tool", 0) >= 1,
            "step(unknown tool) info",
            "tool_errors['unknown_tool'] >= 1",
            info.get("tool_errors"),
        )

    _check_reset(env, seed)
    _check_step(env, "I do not know.", "step(plain text)")

    if optional_member(env, "on_truncation") is not None:  # what a cut episode is paid (agentgspo.environments.env)
        _check_reset(env, seed)
        _check_step(env, "I do not know yet.", "step(plain text)")
        cut = unwrapped.on_truncation("max_turns")
        is_number = isinstance(cut, numbers.Real) and not isinstance(cut, (bool, np.bool_))
        _expect(is_number and math.isfinite(cut), "on_truncation('max_turns')", "a finite float", cut)

    oracle = optional_member(env, "oracle")
    if oracle is not None:
        gold, terminated, history = play(env, oracle, seed=seed, max_turns=max_turns)
        _expect(terminated, "the oracle's episode", f"terminated within {max_turns} turns", history[-3:])
        wrong = optional_member(env, "wrong")
        if wrong is not None:
            bad, _, _ = play(env, wrong, seed=seed, max_turns=max_turns)
            _expect(gold > bad, "oracle vs wrong policy reward", f"oracle > wrong ({bad})", gold)
