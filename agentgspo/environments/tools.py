"""Tools are plain Python functions; their JSON schema comes from the type hints via pydantic.

A tool is any function (sync or ``async``) with annotated parameters and a docstring. Its description is the
docstring's first paragraph; parameter descriptions come from a Google-style ``Args:`` section. Calling a tool
never raises: an unknown name, arguments that fail validation and exceptions inside the tool all come back as a
:class:`ToolResult` whose ``content`` tells the model what went wrong and whose ``error_kind`` is counted.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pydantic

from agentgspo.environments.tool_calls import ToolCall

__all__ = ["ToolResult", "Tool", "ToolSet"]

ERROR_KINDS = ("parse_error", "unknown_tool", "invalid_arguments", "tool_exception")
_ARG_LINE = re.compile(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


@dataclass(frozen=True)
class ToolResult:
    """The text the model reads, and the kind of failure (``None`` when the call succeeded)."""

    content: str
    error_kind: str | None = None


def _docstring_parts(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    doc = inspect.getdoc(fn) or ""
    description = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    params: dict[str, str] = {}
    in_args = False
    arg_indent, last = None, None
    for line in doc.splitlines():
        if line.strip() in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
            continue
        if in_args:
            if line.strip() and not line.startswith((" ", "\t")):
                break
            indent = len(line) - len(line.lstrip())
            if last is not None and line.strip() and indent > arg_indent:  # a wrapped description goes on
                params[last] += " " + line.strip()
                continue
            match = _ARG_LINE.match(line)
            if match:
                arg_indent, last = indent, match.group(1)
                params[last] = match.group(2).strip()
    return description, params


def _run_coroutine(coro: Any) -> Any:
    """Run a coroutine to completion from sync code, also when this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


@dataclass(frozen=True)
class _ToolSpec:
    """What a model is told about a tool, and how its arguments are validated."""

    description: str
    arguments_model: type[pydantic.BaseModel]
    schema: dict[str, Any]


# The rollout runner builds one env per episode, so the same tool definitions come back again and again. Their
# specs are cached under keys that hold no instance (a bound method's code object, not the method), so a cached
# tool never keeps an env (and its sandboxes) alive.
_SPECS: dict[tuple, _ToolSpec] = {}
_SPECS_LOCK = threading.Lock()
_MAX_SPECS = 1024


def _spec_key(fn: Callable[..., Any], name: str) -> tuple | None:
    """A hashable description of ``fn``'s schema inputs that references no instance; None if there is none."""
    function = fn.__func__ if inspect.ismethod(fn) else fn  # a bound method's function
    if not inspect.isfunction(function):
        return None  # a builtin, a partial, a callable object: built each time, not cached
    return function.__code__, name, str(inspect.signature(fn)), inspect.getdoc(fn)


def _build_spec(fn: Callable[..., Any], name: str) -> _ToolSpec:
    description, param_docs = _docstring_parts(fn)
    if not description:
        raise ValueError(f"tool {name!r} needs a docstring: the model reads it to know what the tool does")
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ValueError(f"tool {name!r}: *args/**kwargs cannot be described to a model; name them")
        if param.annotation is inspect.Parameter.empty:
            raise ValueError(f"tool {name!r}: parameter {param.name!r} needs a type hint")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (param.annotation, pydantic.Field(default, description=param_docs.get(param.name)))
    arguments_model = pydantic.create_model(
        f"{name}_arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields
    )
    parameters = arguments_model.model_json_schema()
    parameters.pop("title", None)
    for prop in parameters.get("properties", {}).values():
        prop.pop("title", None)
    schema = {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}
    return _ToolSpec(description, arguments_model, schema)


def _spec_of(fn: Callable[..., Any], name: str) -> _ToolSpec:
    key = _spec_key(fn, name)
    if key is None:
        return _build_spec(fn, name)
    with _SPECS_LOCK:
        spec = _SPECS.get(key)
    if spec is None:
        spec = _build_spec(fn, name)
        with _SPECS_LOCK:
            if len(_SPECS) >= _MAX_SPECS:
                _SPECS.clear()
            _SPECS[key] = spec
    return spec


class Tool:
    """A function the model may call, with its pydantic argument model and JSON schema."""

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None, max_output_chars: int = 4000):
        if not callable(fn):
            raise TypeError(f"a tool must be a function, got {type(fn).__name__}")
        self.fn = fn
        self.name = name or fn.__name__
        self.is_async = inspect.iscoroutinefunction(fn)
        self.max_output_chars = max_output_chars
        spec = _spec_of(fn, self.name)
        self.description, self.arguments_model, self._schema = spec.description, spec.arguments_model, spec.schema

    @property
    def schema(self) -> dict[str, Any]:
        """OpenAI/Hermes function schema: ``{"type": "function", "function": {name, description, parameters}}``
        (a copy: callers may modify it)."""
        return copy.deepcopy(self._schema)

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        """Validate ``arguments`` and run the tool; every failure becomes an error result."""
        try:
            validated = self.arguments_model.model_validate(arguments)
        except pydantic.ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
            return ToolResult(f"Error: invalid arguments for {self.name}: {problems}", "invalid_arguments")
        kwargs = dict(validated)  # the fields as validated (extra="forbid": no others), nested models kept as models
        try:
            value = self.fn(**kwargs)
            if self.is_async or inspect.isawaitable(value):
                value = _run_coroutine(value)
        except Exception as exc:  # noqa: BLE001 -- a tool's failure is an observation, not a crash
            return ToolResult(f"Error: {self.name} raised {type(exc).__name__}: {exc}", "tool_exception")
        return ToolResult(self._format(value))

    def _format(self, value: Any) -> str:
        if isinstance(value, str):
            text = value
        else:
            try:
                text = json.dumps(value)
            except (TypeError, ValueError):
                text = str(value)
        if len(text) > self.max_output_chars:
            text = text[: self.max_output_chars] + f"\n[output truncated to {self.max_output_chars} characters]"
        return text


class ToolSet:
    """The tools of an environment, by name."""

    def __init__(self, tools: Iterable[Callable[..., Any] | Tool] = ()):
        self.tools: dict[str, Tool] = {}
        for item in tools:
            tool = item if isinstance(item, Tool) else Tool(item)
            if tool.name in self.tools:
                raise ValueError(f"two tools are named {tool.name!r}; tool names must be unique")
            self.tools[tool.name] = tool

    @property
    def schemas(self) -> list[dict[str, Any]]:
        """The JSON schema of every tool, in registration order (copies: callers may modify them)."""
        return [tool.schema for tool in self.tools.values()]

    def call(self, call: ToolCall) -> ToolResult:
        """Run one parsed call; an unknown name is an error result that lists the available tools."""
        tool = self.tools.get(call.name)
        if tool is None:
            available = ", ".join(self.tools) or "none"
            return ToolResult(f"Error: unknown tool {call.name!r}; available tools: {available}", "unknown_tool")
        return tool(call.arguments)
