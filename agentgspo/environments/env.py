"""The chat environment contract: Gymnasium's `reset`/`step`, with chat messages as observations.

Contract (checked by :func:`agentgspo.environments.env_checker.check_env`):

- ``reset(*, seed=None, options=None) -> (messages, info)``: ``messages`` is the opening conversation, a non-empty
  list of ``{"role": str, "content": str}`` dicts (roles ``system``, ``user``); ``info`` is a dict. The same seed
  gives the same messages (the G samples of a group share a seed, hence a task).
- ``step(action) -> (messages, reward, terminated, truncated, info)``: ``action`` is the assistant turn, as an
  :class:`Action` or plain text. Only its text after the last ``</think>`` (``Action.content``) acts: tool calls
  are parsed from it and envs read final answers from it; what the model writes while reasoning is a thought.
  ``messages`` are the environment's new messages
  (``tool`` results, ``user`` replies; may be empty when the episode ends); ``reward`` a float; ``terminated``
  means the task ended (solved or failed for good); ``truncated`` means the episode was cut by a limit (wrappers
  :class:`~agentgspo.environments.wrappers.MaxTurns` and :class:`~agentgspo.environments.wrappers.EnvBudget`), exactly
  as in Gymnasium. The rollout runner's ``max_turns`` and ``env_budget_s`` apply the same rules, written once in
  :mod:`agentgspo.environments.wrappers`.
- Rewards are paid as they are earned: each step's ``reward`` is what that step added to the episode's score (a
  tool-error penalty, a partial-credit improvement, the final answer's score), and the trajectory's reward is the sum
  of all steps' rewards. So the sum so far is the episode's score at every step, and an episode cut before the env
  ends it (the runner's ``max_turns``, ``max_tokens``, ``context_overflow``, ``env_budget``, ``end_of_text``, or a
  limit wrapper) keeps what it earned. An env whose score only exists at the end (a judge that needs the whole
  transcript) writes :meth:`ChatEnv.on_truncation`: whoever cuts the episode (the runner, a limit wrapper) calls
  ``env.unwrapped.on_truncation(reason) -> float`` once, and its return is added to the reward (and to the last
  turn's step reward, so ``sum(turn_rewards) == reward`` holds). A wrapped env the runner plays is cut by its wrapper
  (its own ending, paid once there), not again by the runner. It is not called when the env ends the episode
  itself, nor for endings that are not trained (an env error, a hung env call, a sampler failure), nor for an
  episode without a turn.
- Optional members: an env that is a plain ``gymnasium.Env`` may leave out any of :data:`OPTIONAL_MEMBERS`:
  ``tool_schemas`` (its tools' OpenAI-style JSON schemas), ``toolset`` (its tools as Python functions,
  :class:`~agentgspo.environments.tools.ToolSet`), ``on_truncation`` (above), ``oracle`` and ``wrong`` (text policies
  ``fn(messages) -> str`` that solve and fail its tasks). :class:`ChatEnv` declares each; whoever reads one reads it
  from ``env.unwrapped`` through :func:`optional_member`.
- ``info["stop_reason"]`` may name why an episode ended (``parse_error``, ...); ``info["tool_errors"]`` counts
  failed tool calls of the step by kind; ``info["mask_turn"]`` asks the learner not to train on this turn.

:class:`ChatEnv` implements the tool loop: an assistant turn with ``<tool_call>`` blocks gets one ``tool`` message
per call; a turn without tool calls goes to :meth:`ChatEnv.respond`, the one method a subclass must write (plus
``reset``). Failed tool calls never raise: they become tool messages the model can read and follow the env's
``tool_error_policy``.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym

from agentgspo.core.errors import AgentGSPOError
from agentgspo.environments.tool_calls import ToolCall, final_content, parse_tool_calls
from agentgspo.environments.tools import ToolSet

__all__ = [
    "Action",
    "as_action",
    "OPTIONAL_MEMBERS",
    "optional_member",
    "truncation_reward",
    "is_message",
    "MessagesSpace",
    "AssistantTurnSpace",
    "ToolStepOutcome",
    "ChatEnv",
]

Message = dict[str, Any]
ToolErrorPolicy = Literal["feedback", "penalise", "mask"]
TOOL_ERROR_POLICIES: tuple[str, ...] = ("feedback", "penalise", "mask")


@dataclass(frozen=True)
class Action:
    """One assistant turn: its text (without the end-of-turn token) and the tool calls parsed from it."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    parse_errors: tuple[str, ...] = ()

    @property
    def content(self) -> str:
        """The text after the last ``</think>`` (all of it without one): where envs read final answers and code,
        so an answer written while reasoning does not count (tool calls are parsed from it too)."""
        return final_content(self.text)

    @classmethod
    def from_text(cls, text: str) -> Action:
        """Parse the Hermes/Qwen ``<tool_call>{json}</tool_call>`` blocks of ``text``; never raises."""
        calls, errors = parse_tool_calls(text)
        return cls(text=text, tool_calls=tuple(calls), parse_errors=tuple(errors))


class EnvInfrastructureError(RuntimeError, AgentGSPOError):
    """An env's infrastructure died, not the env's logic (a remote env server dropped, a sandbox host went away).

    Raised from ``reset``/``step``, it ends the episode as ``infra_error``: not trained, re-queueable
    (:data:`agentgspo.core.trajectory.ENDINGS`), where any other exception is ``env_error``.
    """


def as_action(action: Action | str) -> Action:
    """Accept an :class:`Action` or the raw text of an assistant turn."""
    if isinstance(action, Action):
        return action
    if isinstance(action, str):
        return Action.from_text(action)
    raise TypeError(f"expected an Action or the assistant turn as str, got {type(action).__name__}")


#: The members of the contract an env may leave out (the module docstring); :class:`ChatEnv` declares each.
OPTIONAL_MEMBERS: tuple[str, ...] = ("tool_schemas", "toolset", "on_truncation", "oracle", "wrong")


def optional_member(env: gym.Env, name: str) -> Any:
    """``env.unwrapped.<name>`` for one of :data:`OPTIONAL_MEMBERS`, or ``None`` where the env leaves it out.

    The one place that reads an env's optional members: a plain ``gymnasium.Env`` may not have them, an env
    subclassing :class:`ChatEnv` always does. A name outside :data:`OPTIONAL_MEMBERS` is an error, not a silent
    ``None``: the rest of the contract (``reset``, ``step``, ``close``) every env has."""
    if name not in OPTIONAL_MEMBERS:
        raise ValueError(f"optional env member: expected one of {OPTIONAL_MEMBERS}, got {name!r}")
    return getattr(env.unwrapped, name, None)


def truncation_reward(env: gym.Env, reason: str) -> float:
    """``env.unwrapped.on_truncation(reason)`` where the env has the hook, else 0.0; a reward that is not a finite
    number is an error (never a silent 0)."""
    hook = optional_member(env, "on_truncation")
    if hook is None:
        return 0.0
    reward = hook(reason)
    if isinstance(reward, bool) or not isinstance(reward, numbers.Real) or not math.isfinite(reward):
        raise ValueError(
            f"{type(env.unwrapped).__name__}.on_truncation({reason!r}): expected a finite float, got {reward!r}"
        )
    return float(reward)


def is_message(obj: Any) -> bool:
    """True for a chat message: a dict with a str ``role`` and a str ``content``."""
    return isinstance(obj, dict) and isinstance(obj.get("role"), str) and isinstance(obj.get("content"), str)


class MessagesSpace(gym.Space):
    """Observation space: a list of chat messages (dicts with str ``role`` and ``content``)."""

    def __init__(self) -> None:
        super().__init__(shape=None, dtype=None)

    def contains(self, x: Any) -> bool:
        """True for a list of chat messages."""
        return isinstance(x, list) and all(is_message(m) for m in x)

    def sample(self, mask: Any = None, probability: Any = None) -> list[Message]:
        """A fixed one-message observation (a user's "hello")."""
        return [{"role": "user", "content": "hello"}]

    def __repr__(self) -> str:
        return "MessagesSpace()"


class AssistantTurnSpace(gym.Space):
    """Action space: an assistant turn, as :class:`Action` or text."""

    def __init__(self) -> None:
        super().__init__(shape=None, dtype=None)

    def contains(self, x: Any) -> bool:
        """True for an :class:`Action` or a str."""
        return isinstance(x, (str, Action))

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A fixed text turn ("I am not sure.")."""
        return "I am not sure."

    def __repr__(self) -> str:
        return "AssistantTurnSpace()"


@dataclass
class ToolStepOutcome:
    """What running the tool calls of one turn produced."""

    messages: list[Message]
    errors: Counter = field(default_factory=Counter)


class ChatEnv(gym.Env):
    """Base class for multi-turn chat environments with tools (the contract is in the module docstring).

    Subclasses write ``reset`` (call ``super().reset(seed=seed)`` first, then return the opening messages) and
    :meth:`respond` (the env's answer to a turn without tool calls: score it, end the episode or reply).

    Args:
        tools: plain Python functions (sync or async) with type hints and a docstring; see
            :mod:`agentgspo.environments.tools`.
        tool_error_policy: what a failed tool call (malformed JSON, unknown tool, bad arguments, a tool that
            raises) does besides the error message the model reads: ``"feedback"`` nothing more,
            ``"penalise"`` adds ``-tool_error_penalty`` per failed call to the step's reward, ``"mask"`` asks the
            learner to exclude the turn from the loss (``info["mask_turn"]``).
        tool_error_penalty: reward subtracted per failed call under ``"penalise"``.
        max_parse_errors: end the episode (``stop_reason="parse_error"``) after this many turns in a row whose
            tool calls could not be parsed; ``None`` never ends it.
    """

    metadata: dict[str, Any] = {"render_modes": []}
    observation_space = MessagesSpace()
    action_space = AssistantTurnSpace()
    #: Optional text policies ``fn(messages) -> str`` of the assistant's next turn: one that solves the task and
    #: one that fails it. ``check_env`` and the tests play them; the quickstart imitates the oracle.
    oracle: Callable[[list[Message]], str] | None = None
    wrong: Callable[[list[Message]], str] | None = None

    def __init__(
        self,
        tools: Sequence[Callable[..., Any]] = (),
        *,
        tool_error_policy: ToolErrorPolicy = "feedback",
        tool_error_penalty: float = 0.1,
        max_parse_errors: int | None = None,
    ) -> None:
        if tool_error_policy not in TOOL_ERROR_POLICIES:
            raise ValueError(f"tool_error_policy: expected one of {TOOL_ERROR_POLICIES}, got {tool_error_policy!r}")
        if max_parse_errors is not None and max_parse_errors < 1:
            raise ValueError(f"max_parse_errors: expected None or >= 1, got {max_parse_errors}")
        self.toolset = ToolSet(tools)
        self.tool_error_policy = tool_error_policy
        self.tool_error_penalty = float(tool_error_penalty)
        self.max_parse_errors = max_parse_errors
        self._parse_error_streak = 0

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """OpenAI-style JSON schemas of the tools, for the chat template's ``tools`` argument."""
        return self.toolset.schemas

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Seed ``self.np_random`` and clear per-episode state; subclasses call it first, then return
        ``(messages, info)``."""
        super().reset(seed=seed)
        self._parse_error_streak = 0

    def on_truncation(self, reason: str) -> float:
        """Reward for an episode cut before the env ended it (see the module docstring): ``reason`` is the stop
        reason (``max_turns``, ``max_tokens``, ``context_overflow``, ``env_budget``, ``end_of_text``). An env that
        pays as rewards are earned has nothing left to pay: 0.0. Override it when the score is only known at the
        end."""
        return 0.0

    def respond(self, action: Action) -> tuple[list[Message], float, bool, bool, dict[str, Any]]:
        """The env's reply to an assistant turn without tool calls, as ``step``'s 5-tuple."""
        raise NotImplementedError(f"{type(self).__name__} must implement respond(action)")

    def step(self, action: Action | str) -> tuple[list[Message], float, bool, bool, dict[str, Any]]:
        """Run the turn's tool calls, or hand a turn without tool calls to :meth:`respond`."""
        action = as_action(action)
        if not action.tool_calls and not action.parse_errors:
            self._parse_error_streak = 0
            return self.respond(action)
        outcome = self.run_tools(action)
        n_errors = sum(outcome.errors.values())
        info: dict[str, Any] = {"tool_calls": len(action.tool_calls), "tool_errors": dict(outcome.errors)}
        reward = 0.0
        if n_errors and self.tool_error_policy == "penalise":
            reward = -self.tool_error_penalty * n_errors
        if n_errors and self.tool_error_policy == "mask":
            info["mask_turn"] = True
        self._parse_error_streak = self._parse_error_streak + 1 if action.parse_errors else 0
        terminated = self.max_parse_errors is not None and self._parse_error_streak >= self.max_parse_errors
        if terminated:
            info["stop_reason"] = "parse_error"
        return outcome.messages, reward, terminated, False, info

    def run_tools(self, action: Action) -> ToolStepOutcome:
        """One ``tool`` message per call (and per unparseable block), errors counted by kind."""
        outcome = ToolStepOutcome(messages=[])
        for error in action.parse_errors:
            outcome.errors["parse_error"] += 1
            outcome.messages.append({"role": "tool", "name": "error", "content": f"Error: {error}"})
        for call in action.tool_calls:
            result = self.toolset.call(call)
            if result.error_kind is not None:
                outcome.errors[result.error_kind] += 1
            outcome.messages.append({"role": "tool", "name": call.name, "content": result.content})
        return outcome
