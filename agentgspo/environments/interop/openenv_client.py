"""An OpenEnv server played as a chat env: OpenEnv's WebSocket protocol spoken here, no openenv package needed.

``OpenEnvEnv(url)`` (registered as ``openenv/Remote-v0``; a bare ``http://``/``ws://`` URL as the env id means the
same, :func:`agentgspo.environments.registry.make`) holds one WebSocket to ``URL/ws`` per episode env: OpenEnv gives
each connection its own environment. Messages are OpenEnv's: ``{"type": "reset"|"step"|"close", "data": ...}``,
answered by ``{"type": "observation", "data": {"observation": {...}, "reward": r, "done": d}}`` or
``{"type": "error", "data": {"message", "code"}}``.

Two kinds of server:

- ``agentgspo env-server`` (it answers ``GET /agentgspo/env``): the env's own chat messages, tools, rewards, info
  and truncation hook travel unchanged (:mod:`~agentgspo.environments.interop.openenv_server`), so a remote episode
  records what a local one records; its budget and its ``oracle``/``wrong`` demonstrators come from that route.
- any other OpenEnv environment: its observation becomes a ``user`` message (its one text field, or
  ``observation_field``, else its fields as JSON); an MCP environment's tools (``list_tools``) become the tools in the
  prompt and ``<tool_call>`` blocks become ``call_tool`` actions whose results come back as ``tool`` messages; a turn
  without tool calls becomes the env's own action (its one string field, or ``action_field``, else the turn read as
  a JSON object), and for an environment whose only actions are MCP calls it ends the episode. Rewards are OpenEnv's
  per-step rewards (``None`` counts 0.0), summed by the runner; ``done`` is ``terminated``.

Failures: a server that refuses the connection for capacity is retried until ``connect_timeout_s``; an error the
server reports for a step (the env raised) raises :class:`RemoteEnvError`, which the runner records as that
episode's ``env_error``; a connection that drops or a server that does not answer raises :class:`EnvServerLost`,
``infra_error`` (the table's row for a dead env server: not trained, re-queueable); the rest of the batch goes on
either way. An action the env's schema rejects,
or a turn that is not one, is the policy's mistake: a ``user`` message saying what was expected, the episode goes on.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import gymnasium as gym
import httpx
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync.client import ClientConnection, connect

from agentgspo.environments.env import AssistantTurnSpace, EnvInfrastructureError, MessagesSpace, as_action
from agentgspo.environments.registry import EnvBudget

__all__ = [
    "OpenEnvEnv",
    "RemoteEnvError",
    "EnvServerLost",
    "is_remote_env_id",
    "describe_server",
    "remote_budget",
    "http_base",
    "websocket_url",
]

#: env ids that name a server rather than a registration.
REMOTE_SCHEMES = ("http://", "https://", "ws://", "wss://")
#: OpenEnv's MCP action types (``openenv.core.env_server.mcp_types``).
MCP_ACTION_TYPES = ("list_tools", "call_tool")


class RemoteEnvError(RuntimeError):
    """The env server reported an error for a call of this episode (the env raised): ``env_error``."""


class EnvServerLost(RemoteEnvError, EnvInfrastructureError):
    """The env server is gone for this episode (the connection dropped, it does not answer, it stayed at capacity):
    infrastructure, not the env's logic, so ``infra_error`` (re-queueable)."""


def is_remote_env_id(env_id: str) -> bool:
    """True for an env id that is a server URL (``http://host:port`` and the like)."""
    return env_id.startswith(REMOTE_SCHEMES)


def http_base(url: str) -> str:
    """The server's HTTP root for a URL given as ``http(s)://`` or ``ws(s)://``, with or without ``/ws``."""
    parts = urlsplit(url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    path = parts.path.rstrip("/").removesuffix("/ws")
    return urlunsplit((scheme, parts.netloc, path, "", ""))


def websocket_url(url: str) -> str:
    """OpenEnv's session endpoint (``ws(s)://host:port/ws``) for a server URL."""
    parts = urlsplit(http_base(url))
    scheme = "wss" if parts.scheme == "https" else "ws"
    return urlunsplit((scheme, parts.netloc, parts.path + "/ws", "", ""))


_HTTP: list[httpx.Client] = []  # one client for the process: building one per call costs milliseconds (TLS setup)


def http_client() -> httpx.Client:
    """The process's HTTP client for env servers' extension routes (thread-safe, connections kept alive)."""
    with _DESCRIPTIONS_LOCK:
        if not _HTTP:
            _HTTP.append(httpx.Client(timeout=30))
        return _HTTP[0]


_DESCRIPTIONS: dict[str, dict[str, Any] | None] = {}
_DESCRIPTIONS_LOCK = threading.Lock()


def describe_server(url: str, timeout_s: float = 30.0) -> dict[str, Any] | None:
    """What an ``agentgspo env-server`` at ``url`` serves (``GET /agentgspo/env``: id, budget, demonstrators), or
    ``None`` for another OpenEnv server; asked once per URL and process. Unreachable: :class:`EnvServerLost`."""
    base = http_base(url)
    with _DESCRIPTIONS_LOCK:
        if base in _DESCRIPTIONS:
            return _DESCRIPTIONS[base]
    try:
        response = http_client().get(f"{base}/agentgspo/env", timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise EnvServerLost(
            f"env server {base} did not answer ({type(exc).__name__}: {exc}); start it (agentgspo env-server "
            "--env ID --port N) or pass the URL it serves on"
        ) from None
    description = response.json() if response.status_code == 200 else None
    with _DESCRIPTIONS_LOCK:
        _DESCRIPTIONS[base] = description
    return description


def remote_budget(url: str) -> EnvBudget | None:
    """The budget the env behind ``url`` registered (an ``agentgspo env-server``), else ``None``."""
    description = describe_server(url)
    budget = (description or {}).get("budget")
    return EnvBudget(**budget) if budget else None


def text_of_tool_result(observation: dict[str, Any]) -> str:
    """The text of an MCP ``call_tool`` observation: its result's text parts, or its error."""
    error = observation.get("error")
    if error:
        return f"Error: {error.get('message', error)}"
    result = observation.get("result")
    if isinstance(result, dict) and isinstance(result.get("content"), list):
        texts = [part.get("text", "") for part in result["content"] if isinstance(part, dict)]
        text = "\n".join(t for t in texts if t)
        return f"Error: {text}" if result.get("is_error") or result.get("isError") else text
    return result if isinstance(result, str) else json.dumps(result, default=str)


class OpenEnvEnv(gym.Env):
    """An OpenEnv environment server played as a chat env (see the module docstring for what maps).

    Args:
        url: the server, ``http://host:port`` (or ``ws://``, with or without ``/ws``).
        system_prompt: a system message put before the first observation (another server's env only).
        observation_field: the observation field that is the user's message (another server's env only).
        action_field: the action field a turn's text goes to (another server's env only).
        connect_timeout_s: how long a server at capacity is retried before the episode fails.
        reset_kwargs: extra keyword arguments of every reset (OpenEnv passes those the env's ``reset`` accepts).
        env_kwargs: the keyword arguments the env should have been made with: an ``agentgspo env-server`` makes its
            env once, from its ``--env-kwargs``, so other ones are an error naming the flag (never ignored); another
            OpenEnv server's env takes none.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        url: str,
        *,
        system_prompt: str | None = None,
        observation_field: str | None = None,
        action_field: str | None = None,
        connect_timeout_s: float = 120.0,
        reset_kwargs: dict[str, Any] | None = None,
        env_kwargs: dict[str, Any] | None = None,
    ):
        if not is_remote_env_id(url):
            raise ValueError(f"OpenEnvEnv: url {url!r} is not a server URL; expected http(s):// or ws(s)://HOST:PORT")
        self.url = http_base(url)
        self.system_prompt = system_prompt
        self.observation_field = observation_field
        self.action_field = action_field
        self.connect_timeout_s = connect_timeout_s
        self.reset_kwargs = dict(reset_kwargs or {})
        self.observation_space = MessagesSpace()
        self.action_space = AssistantTurnSpace()
        self.description = describe_server(self.url)
        self.native = self.description is not None  # an agentgspo env-server
        served_kwargs = (self.description or {}).get("env_kwargs", {})
        if env_kwargs and env_kwargs != served_kwargs:
            if not self.native:
                raise ValueError(
                    f"env kwargs {env_kwargs}: the OpenEnv server at {self.url} is not an agentgspo env-server and "
                    "takes no env keyword arguments; configure its env where it is served"
                )
            raise ValueError(
                f"env kwargs {env_kwargs}: the env server at {self.url} plays {self.description['env_id']} with "
                f"{served_kwargs}; start it with --env-kwargs '{json.dumps(env_kwargs)}' or pass its kwargs"
            )
        self.tool_schemas: list[dict[str, Any]] | None = None
        self._action_schema: dict[str, Any] | None = None
        self._mcp = False
        self._socket: ClientConnection | None = None
        demonstrators = (self.description or {}).get("demonstrators", [])
        self.oracle = self._demonstrator("oracle") if "oracle" in demonstrators else None
        self.wrong = self._demonstrator("wrong") if "wrong" in demonstrators else None

    # --- the wire ----------------------------------------------------------------------------------------------

    def _connect(self) -> None:
        """Open this env's session; a server at capacity is retried with backoff until ``connect_timeout_s``."""
        deadline, delay = time.monotonic() + self.connect_timeout_s, 0.05
        while True:
            try:
                # __enter__: the connection itself (websockets >= 17 warns when connect() is not entered).
                self._socket = connect(websocket_url(self.url), max_size=64 * 2**20, open_timeout=30).__enter__()
                return
            except (OSError, InvalidHandshake, TimeoutError) as exc:
                if time.monotonic() + delay > deadline:
                    raise EnvServerLost(f"env server {self.url}: cannot open a session ({exc})") from None
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def _call(self, kind: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one message of the session; the answer's ``data`` (an ``error`` answer raises)."""
        if self._socket is None:
            self._connect()
        try:
            self._socket.send(json.dumps({"type": kind, "data": data or {}}))
        except ConnectionClosed:
            pass  # the server may have answered and closed before reading (at capacity): read what it said
        try:
            answer = json.loads(self._socket.recv())
        except ConnectionClosed as exc:
            self._socket = None
            raise EnvServerLost(f"env server {self.url} closed the connection during {kind} ({exc})") from None
        if answer.get("type") == "error":
            raise _ServerError(answer.get("data", {}))
        return answer.get("data", {})

    def _reset_call(self, data: dict[str, Any]) -> dict[str, Any]:
        """``reset``, reconnecting while the server reports it is at capacity (until ``connect_timeout_s``)."""
        deadline, delay = time.monotonic() + self.connect_timeout_s, 0.05
        while True:
            try:
                return self._call("reset", data)
            except _ServerError as exc:
                if exc.code != "CAPACITY_REACHED":
                    raise RemoteEnvError(f"env server {self.url}: reset failed: {exc}") from None
                if time.monotonic() + delay > deadline:
                    raise EnvServerLost(
                        f"env server {self.url} stayed at capacity for {self.connect_timeout_s} s: {exc}"
                    ) from None
                self._drop_socket()
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _drop_socket(self) -> None:
        if self._socket is not None:
            try:
                self._socket.close()
            except Exception:  # noqa: BLE001 -- closing a dead socket
                pass
            self._socket = None

    def _demonstrator(self, name: str):
        """The server's ``name`` policy as a local ``fn(messages) -> text``."""

        def demonstrate(messages: list[dict[str, Any]]) -> str:
            response = http_client().post(
                f"{self.url}/agentgspo/demonstrate", json={"policy": name, "messages": messages}, timeout=300
            )
            response.raise_for_status()
            return response.json()["text"]

        demonstrate.__name__ = name
        return demonstrate

    # --- Gymnasium ---------------------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode on the server (a new session, OpenEnv's one env per connection)."""
        super().reset(seed=seed)
        self._drop_socket()
        data: dict[str, Any] = {**self.reset_kwargs, "seed": seed}
        if options is not None:
            data["options"] = options
        answer = self._reset_call(data)
        observation = answer.get("observation", {})
        if self.native:
            self.tool_schemas = observation.get("tools")
            return observation.get("messages", []), observation.get("info", {})
        self._learn_schema()
        messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        messages.append({"role": "user", "content": self._observation_text(observation)})
        return messages, {"openenv_metadata": answer.get("metadata", {})}

    def step(self, action):
        """One assistant turn: sent as is to an agentgspo env-server, else mapped (module docstring)."""
        if self.native:
            answer = self._step({"message": as_action(action).text})
            observation = answer.get("observation", {})
            return (
                observation.get("messages", []),
                float(answer.get("reward") or 0.0),
                bool(answer.get("done")) and not observation.get("truncated", False),
                bool(observation.get("truncated", False)),
                observation.get("info", {}),
            )
        return self._step_foreign(as_action(action))

    def _step(self, action: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._call("step", action)
        except _ServerError as exc:
            raise RemoteEnvError(f"env server {self.url}: step failed: {exc}") from None

    def on_truncation(self, reason: str) -> float:
        """The remote env's ``on_truncation(reason)`` (an agentgspo env-server); 0.0 for other servers."""
        if not self.native:
            return 0.0
        return float(self._step({"message": "", "truncate": reason}).get("reward") or 0.0)

    def close(self) -> None:
        """End the session (the server closes its env)."""
        if self._socket is not None:
            try:
                self._socket.send(json.dumps({"type": "close", "data": {}}))
            except Exception:  # noqa: BLE001 -- the server may be gone already
                pass
            self._drop_socket()

    # --- other servers' envs -----------------------------------------------------------------------------------

    def _learn_schema(self) -> None:
        """The action schema (``GET /schema``) and, for an MCP environment, its tools (a ``list_tools`` step)."""
        if self._action_schema is not None:
            return
        try:
            self._action_schema = http_client().get(f"{self.url}/schema").json().get("action", {})
        except httpx.HTTPError as exc:
            raise EnvServerLost(f"env server {self.url}: GET /schema failed ({exc})") from None
        fields = set(self._action_schema.get("properties", {})) - {"metadata"}
        self._mcp = not fields or fields <= {"type", "tool_name", "arguments"}
        if self._mcp:
            tools = self._step({"type": "list_tools"}).get("observation", {}).get("tools", [])
            self.tool_schemas = [
                {
                    "type": "function",
                    "function": {
                        "name": tool["name"],
                        "description": tool.get("description", ""),
                        "parameters": tool.get("input_schema") or {"type": "object", "properties": {}},
                    },
                }
                for tool in tools
            ] or None

    def _observation_text(self, observation: dict[str, Any]) -> str:
        """A foreign observation as the text of a user message."""
        fields = {k: v for k, v in observation.items() if k != "metadata"}
        if self.observation_field is not None:
            if self.observation_field not in fields:
                raise RemoteEnvError(
                    f"env server {self.url}: observation has no field {self.observation_field!r} "
                    f"(observation_field); it has {sorted(fields)}"
                )
            value = fields[self.observation_field]
            return value if isinstance(value, str) else json.dumps(value, default=str)
        texts = [v for v in fields.values() if isinstance(v, str) and v]
        if not texts and all(v in (None, "", [], {}) for v in fields.values()):
            return ""  # nothing to say (a finished episode's last observation)
        if len(texts) == 1 and all(isinstance(v, str) or v in (None, [], {}) for v in fields.values()):
            return texts[0]
        return json.dumps(fields, sort_keys=True, default=str)

    def _action_of(self, text: str) -> dict[str, Any] | str:
        """The env's own action for a turn without tool calls, or the reason there is none (a str)."""
        properties = {k: v for k, v in self._action_schema.get("properties", {}).items() if k != "metadata"}
        if self.action_field is not None:
            return {self.action_field: text}
        strings = [name for name, spec in properties.items() if spec.get("type") == "string"]
        if len(properties) == 1 and len(strings) == 1:
            return {strings[0]: text}
        try:
            action = json.loads(text)
        except json.JSONDecodeError:
            action = None
        if isinstance(action, dict):
            return action
        return f"expected the action as a JSON object with the fields {sorted(properties)}"

    def _step_foreign(self, action):
        """A turn of another server's env: tool calls as MCP ``call_tool`` steps, else the env's own action."""
        if self._mcp and (action.tool_calls or action.parse_errors):
            messages, reward, done = [], 0.0, False
            for error in action.parse_errors:
                messages.append({"role": "tool", "name": "error", "content": f"Error: {error}"})
            for call in action.tool_calls:
                answer = self._step({"type": "call_tool", "tool_name": call.name, "arguments": call.arguments})
                reward += float(answer.get("reward") or 0.0)
                done = done or bool(answer.get("done"))
                content = text_of_tool_result(answer.get("observation", {}))
                messages.append({"role": "tool", "name": call.name, "content": content})
                if done:
                    break
            return messages, reward, done, False, {}
        if self._mcp:  # no action of its own: a turn without a tool call is the agent's last word
            return [], 0.0, True, False, {}
        payload = self._action_of(action.content)
        if isinstance(payload, str):
            return [{"role": "user", "content": payload}], 0.0, False, False, {"tool_errors": {"invalid_action": 1}}
        try:
            answer = self._call("step", payload)
        except _ServerError as exc:
            if exc.code != "VALIDATION_ERROR":
                raise RemoteEnvError(f"env server {self.url}: step failed: {exc}") from None
            problem = f"the env rejected the action: {exc}"
            return [{"role": "user", "content": problem}], 0.0, False, False, {"tool_errors": {"invalid_action": 1}}
        text = self._observation_text(answer.get("observation", {}))
        messages = [{"role": "user", "content": text}] if text else []
        return messages, float(answer.get("reward") or 0.0), bool(answer.get("done")), False, {}


class _ServerError(Exception):
    """An ``error`` answer of the server (its ``code`` and message)."""

    def __init__(self, data: dict[str, Any]):
        self.code = data.get("code", "")
        message = data.get("message", "")
        details = data.get("errors")
        super().__init__(f"{message} [{self.code}]" + (f": {json.dumps(details, default=str)}" if details else ""))
