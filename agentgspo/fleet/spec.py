"""The fleet file: what to run (sampler replicas, sandbox servers, env servers), how many, with which resources, and
how to watch it. YAML, read by :func:`load_spec`; a mistake is a :class:`FleetSpecError` naming the field and the fix.

    launcher: local              # or ray (Ray Core on an existing cluster: ray.address)
    max_restarts: 3              # restarts of one part before it is given up ("failed")
    probes: {interval_s: 5, timeout_s: 10, failures: 2, start_timeout_s: 900}
    samplers:                    # vLLM OpenAI servers: agentgspo serve-policy
      - {name: policy, model: tiny, count: 2, cpus: 1, enforce_eager: true, max_num_seqs: 64}
    sandboxes:                   # agentgspo sandbox-server (token: $AGENTGSPO_SANDBOX_TOKEN, else generated)
      - {name: judge, count: 1, backend: local, cpus: 1}
    env_servers:                 # agentgspo env-server (openenv cannot share vLLM's venv: python is its venv's)
      - {name: calc, env: agentgspo/Calculator-v0, count: 1, python: .venv-openenv/bin/python}

Relative paths (``model``, ``python``) are read from the fleet file's folder. Each part is one process started by its
own command line; a part's id is ``GROUP-INDEX`` (``policy-0``, ``policy-1``, ``judge-0``), unique in the fleet.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentgspo.core.errors import AgentGSPOError

__all__ = [
    "FleetSpecError",
    "ProbeSettings",
    "RaySettings",
    "SamplerGroup",
    "SandboxGroup",
    "EnvServerGroup",
    "FleetSpec",
    "PartSpec",
    "load_spec",
]

PART_KINDS = ("sampler", "sandbox", "env_server")
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


class FleetSpecError(ValueError, AgentGSPOError):
    """A fleet file that cannot be run: the message names the file, the field and the fix."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProbeSettings(_Strict):
    """How parts are watched. A part is unhealthy after ``failures`` probes in a row failed (each at most
    ``timeout_s``), or at once when its process exits; a (re)started part has ``start_timeout_s`` to pass its first
    probe (vLLM on a loaded CPU takes minutes), else it is restarted. A sampler that passes its probes only as
    paused (``GET /is_paused``) for longer than ``max_paused_s`` is restarted too (why: the supervisor's docstring)."""

    interval_s: float = Field(5.0, gt=0, description="seconds between two probes of one part")
    timeout_s: float = Field(10.0, gt=0, description="seconds one probe may take before it counts as failed")
    failures: int = Field(2, ge=1, description="consecutive failed probes that make a serving part unhealthy")
    start_timeout_s: float = Field(900.0, gt=0, description="seconds a (re)started part has to pass its first probe")
    max_paused_s: float = Field(
        1800.0,
        gt=0,
        description="seconds a sampler may stay paused (a learner's weight update) before it is restarted: above "
        "your longest weight update, retry included (a learner that died mid-update leaves it paused for good)",
    )


class RaySettings(_Strict):
    """Where the ``ray`` launcher finds its cluster (``ray.init(address=..., namespace=...)``)."""

    address: str = Field("auto", description="'auto' (this node's cluster), HOST:PORT of the head, or ray://HOST:PORT")
    namespace: str = Field("agentgspo-fleet", description="Ray namespace of the fleet's named actors")


class _Group(_Strict):
    name: str
    count: int = Field(1, ge=1, description="processes (replicas) of this group")
    cpus: float = Field(1, ge=0, description="CPUs reserved per process (Ray: num_cpus; 0 reserves none)")
    environment: dict[str, str] = Field(default_factory=dict, description="extra environment variables")
    ray_resources: dict[str, float] = Field(
        default_factory=dict, description="Ray custom resources per process, e.g. {cpu_node: 0.01} to keep it there"
    )

    @model_validator(mode="after")
    def _check_name(self):
        if not _NAME.match(self.name):
            raise ValueError(
                f"name {self.name!r}: use 1-40 lower-case letters, digits or '_', starting with a letter "
                "(parts are named NAME-INDEX)"
            )
        return self


class SamplerGroup(_Group):
    """Sampler replicas: ``agentgspo serve-policy`` (vLLM's OpenAI server with the weight-sync extension)."""

    name: str = "policy"
    model: str = Field("tiny", description="'tiny', a model folder (save_pretrained) or a hub id in the local cache")
    cpus: int = Field(1, ge=1, description="cores per replica, each pinned to it (bind_cores); Ray: num_cpus")
    gpus: int = Field(0, ge=0, description="GPUs per replica: 0 (CPU build) or tensor_parallel x pipeline_parallel")
    tensor_parallel_size: int = Field(1, ge=1)
    pipeline_parallel_size: int = Field(1, ge=1)
    bind_cores: bool = Field(True, description="pin each replica to its own cores (vLLM on CPU takes all otherwise)")
    dtype: str = "float32"
    max_num_seqs: int = Field(256, ge=1)
    seed: int = 0
    enforce_eager: bool = False
    weight_transfer: Literal["gloo", "folder"] = "gloo"
    vllm_args: list[str] = Field(default_factory=list, description="more arguments of vLLM's server")

    @model_validator(mode="after")
    def _check_parallelism(self):
        width = self.tensor_parallel_size * self.pipeline_parallel_size
        if self.gpus and self.gpus != width:
            raise ValueError(
                f"gpus {self.gpus} != tensor_parallel_size x pipeline_parallel_size = {width}: a replica holds one "
                f"GPU per model shard; set gpus: {width}"
            )
        if not self.gpus and width > 1 and self.cpus < width:
            raise ValueError(
                f"a CPU replica with {width} shards needs at least one core each: cpus >= {width} (got {self.cpus})"
            )
        return self


class SandboxGroup(_Group):
    """Sandbox servers: ``agentgspo sandbox-server`` (the judge over HTTP, token from ``sandbox_token_env``)."""

    name: str = "sandbox"
    backend: Literal["local", "docker"] = "local"
    max_concurrency: int | None = Field(None, ge=1, description="requests executed at once (default: cpus, at least 1)")


class EnvServerGroup(_Group):
    """Env servers: ``agentgspo env-server`` (OpenEnv's WebSocket protocol), run by the openenv venv's Python."""

    name: str = "envs"
    env: str = Field(description="registered env id, e.g. agentgspo/Calculator-v0")
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    max_concurrent_envs: int = Field(256, ge=1)
    python: str | None = Field(
        None, description="the openenv venv's python (openenv cannot share vLLM's venv); default: this one"
    )
    probe_reset: bool = Field(True, description="probe with a WebSocket reset besides /health (turn off if costly)")


@dataclass
class PartSpec:
    """One process of the fleet, as the launchers start it: ``[python, -m, agentgspo.cli, *args]`` with ``{host}``
    and ``{port}`` in ``args`` filled in by the launcher, which also binds cores and GPUs."""

    id: str
    kind: str  # "sampler" | "sandbox" | "env_server"
    group: str
    index: int
    args: list[str]
    cpus: float
    gpus: int = 0
    bind_cores: bool = False
    shards: int = 1  # CPU replicas: one OpenMP core list per shard (VLLM_CPU_OMP_THREADS_BIND "a-b|c-d")
    python: str | None = None  # None: the launching process's interpreter
    environment: dict[str, str] = field(default_factory=dict)
    ray_resources: dict[str, float] = field(default_factory=dict)
    probe_reset: bool = True  # env servers
    describe: dict[str, Any] = field(default_factory=dict)  # copied into the manifest (model, env id, ...)

    def command(self, python: str, host: str, port: int) -> list[str]:
        """The command line of this part listening on ``host:port``."""
        filled = [arg.replace("{host}", host).replace("{port}", str(port)) for arg in self.args]
        return [self.python or python, "-m", "agentgspo.cli", *filled]


class FleetSpec(_Strict):
    """A fleet file (see the module docstring); :meth:`parts` lists its processes."""

    name: str | None = Field(None, description="the fleet's name (default: the file's stem)")
    launcher: Literal["local", "ray"] = "local"
    host: str | None = Field(
        None, description="address parts listen on (local: 127.0.0.1; ray: each node's IP as Ray reports it)"
    )
    ray: RaySettings = Field(default_factory=RaySettings)
    probes: ProbeSettings = Field(default_factory=ProbeSettings)
    max_restarts: int = Field(3, ge=0, description="restarts of one part before it is given up")
    sandbox_token_env: str = Field(
        "AGENTGSPO_SANDBOX_TOKEN", description="variable holding the sandbox servers' token (generated when unset)"
    )
    samplers: list[SamplerGroup] = Field(default_factory=list)
    sandboxes: list[SandboxGroup] = Field(default_factory=list)
    env_servers: list[EnvServerGroup] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check_fleet(self):
        groups = [g.name for g in [*self.samplers, *self.sandboxes, *self.env_servers]]
        if not groups:
            raise ValueError("the fleet has no parts: add samplers, sandboxes or env_servers")
        twice = sorted({name for name in groups if groups.count(name) > 1})
        if twice:
            raise ValueError(f"group names must be unique across the fleet (parts are NAME-INDEX): {twice} repeat")
        return self

    def parts(self) -> list[PartSpec]:
        """Every process of the fleet, samplers first, in file order."""
        parts = []
        for group in self.samplers:
            args = ["serve-policy", "--policy", group.model, "--host", "{host}", "--port", "{port}"]
            args += ["--dtype", group.dtype, "--max-num-seqs", str(group.max_num_seqs), "--seed", str(group.seed)]
            args += ["--weight-transfer", group.weight_transfer] + (["--enforce-eager"] if group.enforce_eager else [])
            vllm = list(group.vllm_args)
            if group.tensor_parallel_size > 1:
                vllm += ["--tensor-parallel-size", str(group.tensor_parallel_size)]
            if group.pipeline_parallel_size > 1:
                vllm += ["--pipeline-parallel-size", str(group.pipeline_parallel_size)]
            args += ["--", *vllm] if vllm else []
            shards = group.tensor_parallel_size * group.pipeline_parallel_size
            describe = {"model": group.model, "weight_transfer": group.weight_transfer}
            common = dict(gpus=group.gpus, bind_cores=group.bind_cores and not group.gpus, shards=shards)
            parts += [self._part(group, "sampler", i, args, describe, **common) for i in range(group.count)]
        for group in self.sandboxes:
            args = ["sandbox-server", "--host", "{host}", "--port", "{port}", "--backend", group.backend]
            args += ["--max-concurrency", str(group.max_concurrency or max(1, int(group.cpus)))]
            describe = {"backend": group.backend}
            parts += [self._part(group, "sandbox", i, args, describe) for i in range(group.count)]
        for group in self.env_servers:
            args = ["env-server", "--env", group.env, "--env-kwargs", json.dumps(group.env_kwargs)]
            args += ["--host", "{host}", "--port", "{port}", "--max-concurrent-envs", str(group.max_concurrent_envs)]
            describe = {"env": group.env, "max_concurrent_envs": group.max_concurrent_envs}
            common = dict(python=group.python, probe_reset=group.probe_reset)
            parts += [self._part(group, "env_server", i, args, describe, **common) for i in range(group.count)]
        return parts

    @staticmethod
    def _part(group: _Group, kind: str, index: int, args: list[str], describe: dict, **more: Any) -> PartSpec:
        return PartSpec(
            id=f"{group.name}-{index}",
            kind=kind,
            group=group.name,
            index=index,
            args=args,
            cpus=group.cpus,
            environment=group.environment,
            ray_resources=group.ray_resources,
            describe=describe,
            **more,
        )


def load_spec(path: str | Path) -> FleetSpec:
    """Read and check a fleet file; relative ``model`` and ``python`` paths are resolved against its folder.

    Raises :class:`FleetSpecError` naming the file, each wrong field (``samplers[0].count``) and the fix."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise FleetSpecError(f"fleet file {str(path)!r} does not exist; write one (docs/fleet.md has examples)")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise FleetSpecError(f"fleet file {str(path)!r} is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise FleetSpecError(
            f"fleet file {str(path)!r}: expected a mapping of settings (launcher, samplers, sandboxes, env_servers, "
            f"...), got {type(raw).__name__}"
        )
    try:
        spec = FleetSpec.model_validate(raw)
    except ValidationError as exc:
        lines = [_explain(error) for error in exc.errors()]
        raise FleetSpecError(f"fleet file {str(path)!r}:\n  " + "\n  ".join(lines)) from None
    if spec.name is None:
        spec.name = re.sub(r"[^A-Za-z0-9_.-]", "_", path.stem)
    base = path.resolve().parent
    problems = []
    for i, group in enumerate(spec.samplers):
        if group.model != "tiny" and (base / group.model).exists():
            group.model = str((base / group.model).resolve())
        elif group.model != "tiny" and not _hub_id(group.model) and spec.launcher == "local":
            problems.append(
                f"samplers[{i}].model: no folder {group.model!r} (relative paths are read from {str(base)!r}); give "
                "'tiny', a model folder written by save_pretrained, or a hub id in the local cache"
            )
    for i, group in enumerate(spec.env_servers):
        if group.python is not None:
            python = Path(group.python).expanduser()
            python = python if python.is_absolute() else base / python
            if spec.launcher == "local" and not python.exists():
                problems.append(
                    f"env_servers[{i}].python: no interpreter at {str(python)!r}; make the openenv venv "
                    '(python3 -m venv .venv-openenv && .venv-openenv/bin/pip install "torch==2.13.0" '
                    '-e ".[envs,openenv]") or give its path'
                )
            group.python = str(python) if python.exists() else group.python
    if problems:
        raise FleetSpecError(f"fleet file {str(path)!r}:\n  " + "\n  ".join(problems))
    return spec


def _hub_id(text: str) -> bool:
    """``owner/name``: a hub id serve-policy resolves from the local cache."""
    return bool(re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", text))


def _explain(error: dict[str, Any]) -> str:
    """One pydantic error as ``samplers[0].count: MESSAGE (got VALUE)``, unknown fields with 'did you mean'."""
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]).lstrip(".")
    where = where or "(top level)"
    if error["type"] == "extra_forbidden":
        known = _fields_at(error["loc"][:-1])
        close = difflib.get_close_matches(str(error["loc"][-1]), known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"{where}: unknown setting; {hint}(known: {', '.join(known)})"
    message = error["msg"].removeprefix("Value error, ")
    got = f" (got {error['input']!r})" if error["type"] not in ("value_error", "missing") else ""
    return f"{where}: {message}{got}"


def _fields_at(loc: tuple) -> list[str]:
    """The settings the model at ``loc`` (a pydantic error location inside :class:`FleetSpec`) accepts."""
    model: Any = FleetSpec
    groups = {"samplers": SamplerGroup, "sandboxes": SandboxGroup, "env_servers": EnvServerGroup}
    for part in loc:
        if isinstance(part, int):
            continue
        if model is FleetSpec and part in groups:
            model = groups[part]
        elif model is FleetSpec and part in ("probes", "ray"):
            model = {"probes": ProbeSettings, "ray": RaySettings}[part]
    return list(model.model_fields)
