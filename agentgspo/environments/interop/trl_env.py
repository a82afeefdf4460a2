"""A registered env as TRL's ``GRPOTrainer(environment_factory=...)`` class, and the reward function that scores it.

TRL's contract (trl 1.16.0, ``trainer/grpo_trainer.py``): the factory is called with no arguments, once per
rollout (instances are pooled and reused); ``reset(**row)`` gets the dataset row and returns ``None`` or text that
TRL appends to the row's last prompt message; every public function of the class (but ``reset`` and ``get_reward``)
is a tool, shown to the model through ``transformers.utils.get_json_schema`` (signature, type hints, Google-style
docstring) and called as ``method(**arguments)`` with the arguments the tokenizer's response template parsed; its
return value, as ``str``, is the tool message; an exception becomes ``{"error": ...}``. A rollout ends at the first
assistant turn without tool calls, at ``max_tool_calling_iterations`` or at ``max_completion_length``. Reward
functions get ``completions`` (each a list of messages: assistant turns, tool messages) and ``environments`` (the
rollouts' instances, in the same order).

How ours map (:func:`trl_environment`): the instance makes the env (``agentgspo.make(env_id, **env_kwargs)``);
``reset`` reads the row's ``seed`` (and ``options``) and returns the opening messages' contents (a system prompt
included: TRL can only extend the last message); each tool is a method with the tool's signature and docstring that
steps the env with the call written in our format (``<tool_call>{json}</tool_call>``), so the env validates the
arguments, runs the tool, pays its reward and applies its ``tool_error_policy`` exactly as in our runner; the final
answer (the last assistant message, without tool calls) reaches ``env.step`` through :data:`trl_reward`, which
returns the episode's score: the sum of every step's reward, plus ``on_truncation`` when TRL cut the episode. An
episode whose ending agentgspo does not train or count (``judge_error``, ...: not the model's doing) is not scored:
``trl_reward`` returns ``None`` for it, TRL's "not scored" (see :func:`trl_reward_function`).
What does not map: ``docs/envs.md``, "TRL environment_factory".
"""

from __future__ import annotations

import inspect
import keyword
import numbers
import traceback
import typing
import weakref
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agentgspo.environments.env import Message, optional_member, truncation_reward
from agentgspo.environments.registry import make
from agentgspo.environments.tool_calls import ToolCall
from agentgspo.environments.tools import Tool

__all__ = ["SCORED_STOPS", "TRLEnvironment", "TRLEpisode", "trl_environment", "trl_reward", "trl_reward_function"]

#: The endings an export of ours may score (here, and the verifiers export's ``play_episode``): the rows of
#: ``agentgspo.core.trajectory.ENDINGS`` marked trained and counted, the endings the policy earned. Any other
#: stop reason (the table's untrained or uncounted rows, ``judge_error`` among them, or one it lacks, which our
#: runner records as ``env_error``) is not the model's doing and is never scored as if it were. A copy, because the
#: environments wing may not import the rollouts wing (README, "Architecture"; ``tests/test_layers.py``): the
#: interop tests play every row of ``ENDINGS`` through both exports, so the copy cannot drift from the table.
SCORED_STOPS: frozenset[str] = frozenset(
    {"completed", "max_turns", "max_tokens", "context_overflow", "parse_error", "env_budget", "end_of_text"}
)

#: The stop reason of an episode TRL ended before the env did: TRL ends a rollout at the first assistant turn
#: without tool calls (or at ``max_tool_calling_iterations``), a turn budget as our runner's ``max_turns`` is.
TRL_TURN_CUT = "max_turns"
#: The stop reason of a rollout cut by ``max_completion_length`` (known only to :func:`trl_reward_function` given
#: the stop ids, or when no room was left after a tool result).
TRL_TOKEN_CUT = "max_tokens"
_TRL_RESERVED = ("reset", "get_reward")  # TRL calls these itself; never tools


@dataclass
class TRLEpisode:
    """One rollout's episode as the env saw it.

    Attributes:
        messages: the env's opening messages, then per tool call the assistant's call (our format) and the env's
            reply, then the final answer and the env's reply to it.
        reward: the sum of the step rewards so far (plus ``on_truncation``'s once the episode is cut).
        ended: the env ended the episode, or the reward path closed it.
        stop_reason: why it ended (the env's ``info["stop_reason"]``, ``completed``, or a cut's reason).
        tool_calls: tool methods called (each one env step).
        tool_errors: failed tool calls by kind, as the env counted them (``info["tool_errors"]``).
        masked_turns: steps whose info asked the learner not to train on them (``info["mask_turn"]``); TRL has no
            way to leave them out.
        error: the traceback of an exception the env raised in a tool call (``stop_reason="env_error"``).
    """

    messages: list[Message] = field(default_factory=list)
    reward: float = 0.0
    ended: bool = False
    stop_reason: str | None = None
    tool_calls: int = 0
    tool_errors: Counter = field(default_factory=Counter)
    masked_turns: int = 0
    error: str | None = None


class TRLEnvironment:
    """Base of the classes :func:`trl_environment` builds; one agentgspo episode per TRL rollout.

    Public names are TRL's: ``reset`` and the tool methods :func:`trl_environment` adds (plus the read-only
    ``env`` and ``episode``, which are not functions, hence not tools).
    """

    _env_id: str = ""
    _env_kwargs: dict[str, Any] = {}

    def __init__(self) -> None:
        if not self._env_id:
            raise TypeError("TRLEnvironment is a base class: build a class with trl_environment(env_id, **env_kwargs)")
        self._env = make(self._env_id, **self._env_kwargs)
        weakref.finalize(self, self._env.close)
        self._episode = TRLEpisode()
        self._started = False

    @property
    def env(self) -> Any:
        """The agentgspo env this instance plays (wrappers included)."""
        return self._env

    @property
    def episode(self) -> TRLEpisode:
        """The current episode (see :class:`TRLEpisode`)."""
        return self._episode

    def reset(self, **row: Any) -> str | None:
        """Start the episode the dataset row names and return its opening text, which TRL appends to the row's last
        prompt message.

        The row's ``seed`` (an int) and/or ``options`` (a dict, e.g. ``{"index": 3}``) go to ``env.reset``; other
        columns (``prompt``, ...) are TRL's or the reward functions'. One of them is required: TRL plays each of a
        group's G rollouts on its own instance, so without one the group's rollouts would get different tasks.
        """
        seed, options = row.get("seed"), row.get("options")
        if options is not None and not isinstance(options, dict):
            raise TypeError(f"reset(**row) of {self._env_id}: the 'options' column must hold dicts, got {options!r}")
        options = {k: v for k, v in (options or {}).items() if v is not None}  # Arrow fills a missing key with None
        if seed is None and not options:
            raise ValueError(
                f"reset(**row) of {self._env_id}: the dataset row has no 'seed' (nor 'options'), got columns "
                f"{sorted(row)}; TRL plays each of a group's rollouts on its own instance, so without a seed they "
                "would get different tasks. Add a seed column, e.g. Dataset.from_dict({'prompt': "
                "[[{'role': 'user', 'content': ''}]] * n, 'seed': list(range(n))})"
            )
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
            raise ValueError(f"reset(**row) of {self._env_id}: 'seed' must be an int, got {seed!r}")
        messages, _info = self._env.reset(seed=None if seed is None else int(seed), options=options or None)
        self._episode = TRLEpisode(messages=[dict(m) for m in messages])
        self._started = True
        text = "\n\n".join(m["content"] for m in messages)
        return text or None

    def _step(self, text: str) -> list[Message]:
        """Step the env with an assistant turn's text; record the turn, its reply, reward and ending."""
        episode = self._episode
        messages, reward, terminated, truncated, info = self._env.step(text)
        episode.messages.append({"role": "assistant", "content": text})
        episode.messages.extend(messages)
        episode.reward += float(reward)
        episode.tool_errors.update(info.get("tool_errors", {}))
        episode.masked_turns += bool(info.get("mask_turn"))
        if terminated or truncated:
            episode.ended = True
            episode.stop_reason = info.get("stop_reason", "completed" if terminated else TRL_TURN_CUT)
        return messages

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        """One tool call as one env step; the text of the env's reply (the tool message's content)."""
        if not self._started:
            raise RuntimeError(f"{name}() of {self._env_id} was called before reset(**row)")
        if self._episode.ended:
            return f"Error: the episode has ended ({self._episode.stop_reason}); answer without tool calls."
        self._episode.tool_calls += 1
        try:
            messages = self._step(ToolCall(name, arguments).to_text())
        except Exception:  # TRL shows the model {"error": ...} and goes on: the reward path raises it again
            self._episode.ended, self._episode.stop_reason = True, "env_error"
            self._episode.error = traceback.format_exc()
            raise
        return "\n\n".join(m["content"] for m in messages)

    def _finish(self, final_text: str | None, cut: str | None = None) -> float | None:
        """End the episode: step the final answer (unless TRL cut the rollout, ``cut`` naming how), pay
        ``on_truncation`` if the env has not ended it by then, and return the episode's score, or ``None`` (TRL's
        "not scored") when it ended in an ending not in :data:`SCORED_STOPS`. Idempotent."""
        episode = self._episode
        if not self._started:
            raise RuntimeError(f"the reward path of {self._env_id} ran before reset(**row)")
        if episode.error is not None:
            raise RuntimeError(
                f"{self._env_id} raised in a tool call of this rollout, which TRL showed the model as a tool error; "
                "agentgspo's runner leaves such an episode out of training (env_error), and trl_reward stops rather "
                "than score it or hide the bug. Fix the env:\n" + episode.error
            )
        if not episode.ended and cut is None and final_text is not None:
            self._step(final_text)
            cut = TRL_TURN_CUT  # the env wanted another turn, which TRL does not play
        if not episode.ended:
            episode.reward += truncation_reward(self._env, cut or TRL_TURN_CUT)
            episode.ended, episode.stop_reason = True, cut or TRL_TURN_CUT
        if episode.stop_reason not in SCORED_STOPS:
            return None  # not the model's doing (judge_error, ...): our runner leaves it out of training
        return episode.reward


def _final_answer(completion: Any) -> tuple[str | None, str | None]:
    """(final answer text, cut reason) of one TRL completion: a list of messages (or the text of one turn)."""
    if isinstance(completion, str):
        return completion, None
    if not completion:
        return None, TRL_TOKEN_CUT
    last = completion[-1]
    if last.get("role") == "tool":  # no room was left to answer after the tool result
        return None, TRL_TOKEN_CUT
    if last.get("tool_calls"):  # max_tool_calling_iterations, or a tool result past max_completion_length
        return None, TRL_TURN_CUT
    content = last.get("content") or ""
    if isinstance(content, list):  # content blocks
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content, None


def trl_reward_function(stop_token_ids: Iterable[int] | None = None) -> Callable[..., list[float | None]]:
    """A TRL reward function that plays each completion's final answer in its env and returns the episode's score.

    Args:
        stop_token_ids: the ids that end a turn (the tokenizer's end-of-turn and pad ids). Given, a completion
            whose last id is not one of them was cut by ``max_completion_length``: its last turn is not stepped (as
            our runner's ``max_tokens`` ending) and ``on_truncation("max_tokens")`` is paid. ``None``: TRL gives
            reward functions no stop reason, so a cut last turn is stepped as written.

    Returns ``None`` for an environment that is not a :func:`trl_environment` class (TRL ignores it), so it mixes
    with other environments of a ``dict`` ``environment_factory``. Returns ``None`` too, TRL's "not scored", for a
    rollout whose episode ended in an ending agentgspo does not train or count (not in :data:`SCORED_STOPS`: the
    env reported ``judge_error``, ``env_timeout``, ...): trl 1.16 leaves a completion that every reward function
    scores ``None`` out of its group's baseline and gives it a zero advantage, as our runner leaves such an episode
    out of training; other reward functions that score it still do. Each rollout's stop reason goes to TRL's
    completions table (``log_extra``, column ``stop_reason``). An env that raised in a tool call makes it raise:
    that is a bug in the env, which TRL hid from the run as a tool error.
    """
    stops = None if stop_token_ids is None else frozenset(int(i) for i in stop_token_ids)

    def agentgspo_env_reward(
        completions: list[Any], environments: list[Any] | None = None, completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        """The episode score of each rollout (see :func:`trl_reward_function`)."""
        if environments is None:
            raise ValueError(
                "trl_reward got no environments: pass GRPOTrainer(environment_factory=trl_environment(env_id), "
                "reward_funcs=trl_reward)"
            )
        if stops is not None and completion_ids is None:
            raise ValueError("trl_reward_function(stop_token_ids=...) needs TRL's completion_ids; got none")
        rewards: list[float | None] = []
        for i, (completion, env) in enumerate(zip(completions, environments, strict=True)):
            if not isinstance(env, TRLEnvironment):
                rewards.append(None)
                continue
            final_text, cut = _final_answer(completion)
            if stops is not None and (not len(completion_ids[i]) or int(completion_ids[i][-1]) not in stops):
                cut = TRL_TOKEN_CUT
            rewards.append(env._finish(final_text, cut))
        if kwargs.get("log_extra") is not None:
            stop_reasons = [
                env.episode.stop_reason if isinstance(env, TRLEnvironment) else None for env in environments
            ]
            kwargs["log_extra"]("stop_reason", stop_reasons)
        return rewards

    return agentgspo_env_reward


#: The ready reward function: ``GRPOTrainer(..., reward_funcs=trl_reward, environment_factory=...)``.
trl_reward = trl_reward_function()


def _method_name_problem(name: str, reserved: set[str]) -> str | None:
    """Why a tool named ``name`` cannot be a TRL tool method (``None``: it can)."""
    if not name.isidentifier() or keyword.iskeyword(name):
        return "it is not a Python identifier, and TRL calls tools as methods of that name"
    if name.startswith("_"):
        return "TRL skips methods whose name starts with '_'"
    if name in _TRL_RESERVED:
        return f"TRL calls {name}() itself and never offers it as a tool"
    if name in reserved:
        return f"the class already has {name!r} (TRLEnvironment.{name})"
    return None


def _tool_docstring(tool: Tool, env_id: str) -> str:
    """A Google-style docstring from which ``get_json_schema`` rebuilds the tool's description and parameters."""
    properties = tool.schema["function"]["parameters"].get("properties", {})
    lines = [tool.description]
    if properties:
        lines += ["", "Args:"]
    for name, prop in properties.items():
        if not prop.get("description"):
            raise ValueError(
                f"trl_environment({env_id!r}): tool {tool.name!r} has no description for its parameter {name!r}; "
                "TRL shows tools through transformers' get_json_schema, which needs one per parameter: add "
                f"'{name}: ...' under 'Args:' in the tool's docstring"
            )
        lines.append(f"    {name}: {prop['description']}")
    return "\n".join(lines) + "\n"


def _tool_method(tool: Tool, env_id: str) -> Callable[..., str]:
    """A method with ``tool``'s name, signature (no return annotation) and docstring that steps the env with the
    call. Its body takes ``**arguments``, so wrong or missing arguments reach the env, which reports them as our
    runner's env would (an invalid-arguments tool message, its tool_error_policy), not as a Python TypeError."""
    signature = inspect.signature(tool.fn)
    try:
        hints = {k: v for k, v in typing.get_type_hints(tool.fn).items() if k != "return"}
    except (NameError, TypeError) as exc:  # a forward reference that does not resolve at run time
        raise ValueError(
            f"trl_environment({env_id!r}): the type hints of tool {tool.name!r} do not resolve ({exc}); TRL reads them "
            "with typing.get_type_hints: import the types the hints name at module level"
        ) from exc
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    parameters += [p.replace(annotation=hints[p.name]) for p in signature.parameters.values()]
    name = tool.name

    def method(self: TRLEnvironment, *args: Any, **arguments: Any) -> str:
        if args:  # a direct positional call from Python; TRL passes keywords
            arguments = dict(signature.bind_partial(*args, **arguments).arguments)
        return self._call_tool(name, arguments)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = _tool_docstring(tool, env_id)
    method.__signature__ = inspect.Signature(parameters)
    method.__annotations__ = hints
    return method


def trl_environment(env_id: str, **env_kwargs: Any) -> type[TRLEnvironment]:
    """A class for ``trl.GRPOTrainer(environment_factory=...)`` that plays the registered env ``env_id``.

    ``Cls()`` makes ``agentgspo.make(env_id, **env_kwargs)``; ``reset(**row)`` starts the task the row's ``seed``
    (or ``options``) names; one method per env tool, with the tool's signature and docstring, steps the env with the
    call. Score the rollouts with :data:`trl_reward` (or :func:`trl_reward_function`), which plays the final answer.

    Raises ``ValueError`` naming the tool and the fix when a tool cannot become a method (a name that is not an
    identifier, starts with ``_`` or clashes with ``reset``, ``get_reward``, ``env``, ``episode``; a parameter
    without a docstring description; type hints that do not resolve) or when the env's tools are not Python
    functions (``tool_schemas`` without a ``toolset``: a remote OpenEnv or a verifiers env).

    >>> Calculator = trl_environment("agentgspo/Calculator-v0")
    >>> calculator = Calculator()
    >>> calculator.reset(seed=0).splitlines()[-1]
    'What is 865*67+56?'
    >>> calculator.calculate(expression="865*67+56")
    '58011'
    >>> answer = [{"role": "assistant", "content": "<answer>58011</answer>"}]
    >>> trl_reward(completions=[answer], environments=[calculator])
    [1.0]
    """
    env = make(env_id, **env_kwargs)
    try:
        toolset = optional_member(env, "toolset")
        # hasattr, not optional_member: a remote env declares tool_schemas as None until its first reset
        if toolset is None and hasattr(env.unwrapped, "tool_schemas"):
            raise ValueError(
                f"trl_environment({env_id!r}): {type(env.unwrapped).__name__} has tool_schemas but no Python tools "
                "(env.unwrapped.toolset): its tools live elsewhere (a remote or foreign env's, known after reset), and "
                "TRL can only offer methods. Train it with agentgspo's runner, or register an env whose tools are "
                "functions (ChatEnv(tools=[...]))"
            )
        tools = list(toolset.tools.values()) if toolset is not None else []
    finally:
        env.close()
    reserved = {name for name in dir(TRLEnvironment) if not name.startswith("_")}
    attributes: dict[str, Any] = {"_env_id": env_id, "_env_kwargs": dict(env_kwargs)}
    for tool in tools:
        problem = _method_name_problem(tool.name, reserved)
        if problem is not None:
            raise ValueError(
                f"trl_environment({env_id!r}): the tool {tool.name!r} cannot become a method of TRL's environment "
                f"class: {problem}. Rename the tool in the env's tools, e.g. "
                f"Tool(fn, name='{_suggested_name(tool.name, reserved)}')"
            )
        attributes[tool.name] = _tool_method(tool, env_id)
    class_name = "".join(ch if ch.isalnum() else "_" for ch in env_id.rsplit("/", 1)[-1]) + "_TRL"
    attributes["__doc__"] = (
        f"{env_id} for TRL's environment_factory (env kwargs {env_kwargs}); tools: {[t.name for t in tools]}."
    )
    return type(class_name, (TRLEnvironment,), attributes)


def _suggested_name(name: str, reserved: set[str]) -> str:
    """A valid, unreserved method name close to ``name``."""
    cleaned = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name).strip("_") or "tool"
    if cleaned[0].isdigit() or keyword.iskeyword(cleaned) or cleaned in {*_TRL_RESERVED, *reserved}:
        cleaned = f"call_{cleaned}"
    return cleaned
