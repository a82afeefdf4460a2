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

A fleet's env servers (``agentgspo fleet up`` with an ``env_servers:`` group): the env id ``fleet:MANIFEST`` (or
``fleet:MANIFEST#GROUP`` when the fleet has several env server groups) plays the group's servers as one env
(:class:`FleetEnvServers`). Each episode's session (each reset opens one) goes to a server the manifest lists as
``healthy`` at that moment, round robin; with none healthy (a restart in progress) the reset waits for one, re-reading
the manifest, up to ``connect_timeout_s``, and fails at once (:class:`FleetEnvUnavailable`) when none could come back.
A server that dies under an episode ends it as ``infra_error``, as above; the runner's requeue plays it again, on
whichever server is healthy then (a restarted one serves on a new port: the manifest names it).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import gymnasium as gym
import httpx
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync.client import ClientConnection, connect

from agentgspo.core.errors import AgentGSPOError
from agentgspo.environments.env import AssistantTurnSpace, EnvInfrastructureError, MessagesSpace, as_action
from agentgspo.environments.interop import FLEET_PREFIX, REMOTE_SCHEMES
from agentgspo.environments.registry import EnvBudget, EnvIdResolver
from agentgspo.core.fleet_manifest import HEARTBEAT_S, FleetFollower, FleetUnavailable, Manifest

__all__ = [
    "OpenEnvEnv",
    "RemoteEnvError",
    "EnvServerLost",
    "FleetEnvUnavailable",
    "FleetEnvServers",
    "is_remote_env_id",
    "is_fleet_env_id",
    "fleet_env_servers",
    "describe_server",
    "remote_budget",
    "server_capacity",
    "REMOTE_IDS",
    "http_base",
    "websocket_url",
]

#: The registration that plays an OpenEnv server (``agentgspo env-server`` or any other) given by URL.
REMOTE_ENV_ID = "openenv/Remote-v0"
#: a manifest not rewritten for this long (the supervisor writes it every HEARTBEAT_S) has no supervisor behind it.
STALE_MANIFEST_S = 6 * HEARTBEAT_S
#: OpenEnv's MCP action types (``openenv.core.env_server.mcp_types``).
MCP_ACTION_TYPES = ("list_tools", "call_tool")


class RemoteEnvError(RuntimeError, AgentGSPOError):
    """The env server reported an error for a call of this episode (the env raised): ``env_error``."""


class EnvServerLost(RemoteEnvError, EnvInfrastructureError):
    """The env server is gone for this episode (the connection dropped, it does not answer, it stayed at capacity):
    infrastructure, not the env's logic, so ``infra_error`` (re-queueable)."""


class FleetEnvUnavailable(EnvServerLost, FleetUnavailable):
    """A fleet has no env server of the group that serves or could come back (all ``failed``, the fleet stopped, its
    supervisor gone): waiting is pointless, so a reset fails at once (``infra_error``; a requeue fails at once too)."""


def is_remote_env_id(env_id: str) -> bool:
    """True for an env id played over OpenEnv's protocol: a server URL (``http://host:port`` and the like) or a
    fleet's env servers (``fleet:MANIFEST[#GROUP]``)."""
    return env_id.startswith(REMOTE_SCHEMES) or is_fleet_env_id(env_id)


def is_fleet_env_id(env_id: str) -> bool:
    """True for an env id naming a fleet's env servers (``fleet:MANIFEST`` or ``fleet:MANIFEST#GROUP``)."""
    return env_id.startswith(FLEET_PREFIX)


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
    ``None`` for another OpenEnv server; asked once per URL and process. Unreachable: :class:`EnvServerLost`. For a
    fleet id, a healthy server's description (waiting up to ``timeout_s`` for one) with ``max_concurrent_envs`` the
    group's (:meth:`FleetEnvServers.describe`)."""
    if is_fleet_env_id(url):
        return fleet_env_servers(url).describe(time.monotonic() + timeout_s)[1]
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


def server_capacity(url: str) -> int | None:
    """How many episodes the ``agentgspo env-server`` at ``url`` (a fleet's group: all its servers) plays at once;
    ``None`` from another OpenEnv server, which does not say."""
    return (describe_server(url) or {}).get("max_concurrent_envs")


def _play_remote(url: str, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return REMOTE_ENV_ID, {"url": url, "env_kwargs": kwargs}


#: Server URLs and fleets as env ids (registered by ``agentgspo.environments.interop``): ``openenv/Remote-v0``
#: with ``url=`` the id and the given keyword arguments as the env's.
REMOTE_IDS = EnvIdResolver(resolve=_play_remote, budget=remote_budget, capacity=server_capacity)


class _Retry:
    """The waits between a client's attempts until ``deadline`` (``time.monotonic()``): the first ``first_s``, each
    next one twice as long, at most ``cap_s``."""

    def __init__(self, deadline: float, first_s: float = 0.05, cap_s: float = 1.0):
        self.deadline, self.delay, self.cap_s = deadline, first_s, cap_s

    def pause(self) -> bool:
        """Sleep the next wait and return True; False at once (no sleep) when that wait would end past the deadline."""
        if time.monotonic() + self.delay > self.deadline:
            return False
        time.sleep(self.delay)
        self.delay = min(2 * self.delay, self.cap_s)
        return True


class FleetEnvServers:
    """The env servers of one ``env_servers:`` group of a fleet, as its manifest lists them now (one per env id and
    process: :func:`fleet_env_servers`).

    Args:
        env_id: ``fleet:MANIFEST`` (the fleet's one env server group) or ``fleet:MANIFEST#GROUP``.

    A manifest that does not exist, a group the fleet lacks, an id naming no group of a fleet with several, or a
    fleet without env servers is refused here, naming the fix.
    """

    def __init__(self, env_id: str):
        path, _, group = env_id.removeprefix(FLEET_PREFIX).partition("#")
        if not path:
            raise ValueError(
                f"env id {env_id!r}: expected fleet:MANIFEST or fleet:MANIFEST#GROUP (the manifest that "
                "`agentgspo fleet up FILE` prints)"
            )
        self.env_id = env_id
        try:
            self.follower = FleetFollower(path)
        except FileNotFoundError as exc:  # its message names `agentgspo fleet up`
            raise FileNotFoundError(f"env id {env_id!r}: {exc}") from None
        manifest = self.follower.read()
        groups = list(dict.fromkeys(part.group for part in manifest.parts if part.kind == "env_server"))
        where = f"fleet {manifest.fleet} ({path})"
        if not groups:
            raise ValueError(
                f"env id {env_id!r}: {where} has no env servers; add an `env_servers:` group to its fleet file "
                f"{manifest.spec} (docs/fleet.md) or play another env id"
            )
        if group and group not in groups:
            raise ValueError(
                f"env id {env_id!r}: {where} has no env server group {group!r}; its env server groups: "
                f"{', '.join(groups)} (e.g. fleet:{path}#{groups[0]})"
            )
        if not group and len(groups) > 1:
            raise ValueError(
                f"env id {env_id!r}: {where} has several env server groups ({', '.join(groups)}); name one: "
                + " or ".join(f"fleet:{path}#{name}" for name in groups)
            )
        self.group = group or groups[0]
        self._turn = itertools.count()  # round robin over the healthy servers, shared by this process's envs
        self._described: tuple[str, dict[str, Any] | None] | None = None

    def _parts(self, manifest: Manifest) -> list:
        return [part for part in manifest.parts if part.kind == "env_server" and part.group == self.group]

    def healthy_urls(self) -> list[str]:
        """The URLs of the group's ``healthy`` servers now (empty while they restart); :class:`FleetEnvUnavailable`
        when none could serve again."""
        try:
            serving = set(self.follower.serving_urls("env_server"))
        except FleetUnavailable as exc:
            raise FleetEnvUnavailable(f"env id {self.env_id}: {exc}") from None
        manifest = self.follower.read()
        parts = self._parts(manifest)
        urls = [part.url.rstrip("/") for part in parts if part.url and part.url.rstrip("/") in serving]
        if not urls and all(part.status in ("failed", "stopped") for part in parts):
            raise FleetEnvUnavailable(
                f"env id {self.env_id}: group {self.group} of fleet {manifest.fleet} has no env server that could "
                f"serve ({', '.join(f'{part.id} {part.status}' for part in parts)}): see `agentgspo fleet status "
                f"{manifest.spec}`"
            )
        return urls

    def _check_supervisor(self) -> None:
        """:class:`FleetEnvUnavailable` when the manifest has not been rewritten for :data:`STALE_MANIFEST_S` (its
        supervisor is gone, and the servers it lists with it); asked after a listed server failed to answer."""
        manifest = self.follower.read()
        age = time.time() - manifest.updated_at
        if manifest.state not in ("stopped", "failed") and age > STALE_MANIFEST_S:
            raise FleetEnvUnavailable(
                f"env id {self.env_id}: the supervisor of fleet {manifest.fleet} is gone (its manifest was last "
                f"written {age:.0f} s ago, state {manifest.state}) and its env servers do not answer: see "
                f"`agentgspo fleet status {manifest.spec}`, then `agentgspo fleet up {manifest.spec}`"
            )

    def pick(self, deadline: float, after_failure: bool = False) -> str:
        """A healthy server's URL, round robin; while none is healthy, the manifest is read again until ``deadline``
        (``time.monotonic()``), then :class:`EnvServerLost`. ``after_failure``: the last server picked did not
        answer (a manifest left by a dead supervisor then fails at once)."""
        if after_failure:
            self._check_supervisor()
        retry = _Retry(deadline, cap_s=0.5)  # the manifest changes within a second of a death; look that often
        while True:
            urls = self.healthy_urls()
            if urls:
                return urls[next(self._turn) % len(urls)]
            if not retry.pause():
                manifest = self.follower.read()
                states = ", ".join(f"{part.id} {part.status}" for part in self._parts(manifest))
                raise EnvServerLost(
                    f"env id {self.env_id}: no env server of group {self.group} was healthy in time ({states}); "
                    f"see `agentgspo fleet status {manifest.spec}`"
                )

    def capacity(self, per_server: int | None) -> int | None:
        """Episodes the group serves at once: each server's session limit (the manifest's, else ``per_server``)
        summed over the servers that are not ``failed``."""
        parts = [part for part in self._parts(self.follower.read()) if part.status != "failed"]
        limits = [part.info.get("max_concurrent_envs", per_server) for part in parts]
        return sum(limits) if limits and None not in limits else None

    def describe(self, deadline: float) -> tuple[str, dict[str, Any] | None]:
        """(a server's URL, what the group's servers serve: :func:`describe_server` of a healthy one, its
        ``max_concurrent_envs`` the group's :meth:`capacity`), read once; waits for a healthy server until
        ``deadline`` (``time.monotonic()``)."""
        if self._described is not None:
            return self._described
        failed, retry = False, _Retry(deadline, first_s=0.2, cap_s=0.2)
        while True:
            url = self.pick(deadline, after_failure=failed)
            try:
                description = describe_server(url, timeout_s=max(min(30.0, deadline - time.monotonic()), 1.0))
                break
            except EnvServerLost:
                if not retry.pause():
                    raise
                failed = True
        if description is not None:
            description = {**description, "max_concurrent_envs": self.capacity(description.get("max_concurrent_envs"))}
        self._described = (url, description)
        return self._described


_FLEETS: dict[tuple[str, str], FleetEnvServers] = {}
_FLEETS_LOCK = threading.Lock()


def fleet_env_servers(env_id: str) -> FleetEnvServers:
    """The process's :class:`FleetEnvServers` for ``env_id`` (made on first use; bad input is not remembered)."""
    path, _, group = env_id.removeprefix(FLEET_PREFIX).partition("#")
    key = (str(Path(path).resolve()) if path else "", group)
    with _FLEETS_LOCK:
        if key not in _FLEETS:
            _FLEETS[key] = FleetEnvServers(env_id)
        return _FLEETS[key]


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
        url: the server, ``http://host:port`` (or ``ws://``, with or without ``/ws``); or a fleet's env servers,
            ``fleet:MANIFEST`` / ``fleet:MANIFEST#GROUP``: each reset opens its session on a healthy one
            (:class:`FleetEnvServers`), and :attr:`url` is then the server of the current session.
        system_prompt: a system message put before the first observation (another server's env only).
        observation_field: the observation field that is the user's message (another server's env only).
        action_field: the action field a turn's text goes to (another server's env only).
        connect_timeout_s: how long a server at capacity is retried before the episode fails (a fleet: also how
            long a reset waits for a healthy server).
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
            raise ValueError(
                f"OpenEnvEnv: url {url!r} is not a server URL; expected http(s):// or ws(s)://HOST:PORT, or "
                "fleet:MANIFEST[#GROUP] for a fleet's env servers"
            )
        self.system_prompt = system_prompt
        self.observation_field = observation_field
        self.action_field = action_field
        self.connect_timeout_s = connect_timeout_s
        self.reset_kwargs = dict(reset_kwargs or {})
        self.observation_space = MessagesSpace()
        self.action_space = AssistantTurnSpace()
        self.fleet = fleet_env_servers(url) if is_fleet_env_id(url) else None
        if self.fleet is None:
            self.url = http_base(url)
            self.description = describe_server(self.url)
        else:  # a healthy server's description (the group's servers all serve one env)
            self.url, self.description = self.fleet.describe(time.monotonic() + connect_timeout_s)
        self.native = self.description is not None  # an agentgspo env-server
        served_kwargs = (self.description or {}).get("env_kwargs", {})
        if env_kwargs and env_kwargs != served_kwargs:
            where = f"the env servers of {url}" if self.fleet else f"the env server at {self.url}"
            if not self.native:
                raise ValueError(
                    f"env kwargs {env_kwargs}: {where} is not an agentgspo env-server and takes no env keyword "
                    "arguments; configure its env where it is served"
                )
            fix = (
                f"set env_kwargs: {json.dumps(env_kwargs)} in group {self.fleet.group} of the fleet file"
                if self.fleet
                else f"start it with --env-kwargs '{json.dumps(env_kwargs)}'"
            )
            raise ValueError(
                f"env kwargs {env_kwargs}: {where} plays {self.description['env_id']} with {served_kwargs}; "
                f"{fix} or pass its kwargs"
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
        """Open this env's session; a server at capacity is retried with backoff until ``connect_timeout_s``. A
        fleet's: on a healthy server (:meth:`FleetEnvServers.pick`), another pick after each failed attempt."""
        retry, failed = _Retry(time.monotonic() + self.connect_timeout_s), False
        while True:
            if self.fleet is not None:
                self.url = self.fleet.pick(retry.deadline, after_failure=failed)
            failed = True
            try:
                # __enter__: the connection itself (websockets >= 17 warns when connect() is not entered).
                self._socket = connect(websocket_url(self.url), max_size=64 * 2**20, open_timeout=30).__enter__()
                return
            except (OSError, InvalidHandshake, TimeoutError, ConnectionClosed) as exc:
                # ConnectionClosed: the server closed the socket before the handshake request went out (a server
                # dying or restarting: websockets raises it from the send, InvalidMessage from the read after).
                if not retry.pause():
                    raise EnvServerLost(f"env server {self.url}: cannot open a session ({exc})") from None

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
        """``reset``, reconnecting while the server reports it is at capacity (until ``connect_timeout_s``); a
        fleet's also when its server died under the reset (another one takes it)."""
        retry = _Retry(time.monotonic() + self.connect_timeout_s)
        while True:
            try:
                return self._call("reset", data)
            except _ServerError as exc:
                if exc.code != "CAPACITY_REACHED":
                    raise RemoteEnvError(f"env server {self.url}: reset failed: {exc}") from None
                lost = EnvServerLost(f"env server {self.url} stayed at capacity for {self.connect_timeout_s} s: {exc}")
            except EnvServerLost as exc:
                if self.fleet is None or isinstance(exc, FleetUnavailable):
                    raise
                lost = exc
            self._drop_socket()
            if not retry.pause():
                raise lost

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
            retry, failed = _Retry(time.monotonic() + self.connect_timeout_s, first_s=0.2, cap_s=0.2), False
            while True:  # a fleet's: any healthy server, another one if it dies under the call (nothing is kept)
                url = self.url if self.fleet is None else self.fleet.pick(retry.deadline, after_failure=failed)
                try:
                    response = http_client().post(
                        f"{url}/agentgspo/demonstrate", json={"policy": name, "messages": messages}, timeout=300
                    )
                    break
                except httpx.TransportError:
                    if self.fleet is None or not retry.pause():
                        raise
                    failed = True
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
