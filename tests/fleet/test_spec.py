"""The fleet file (errors name the field and the fix; parts become the project's own command lines) and the manifest's
weights handshake, without starting anything."""

from __future__ import annotations

import json

import pytest

from agentgspo.cli import main
from agentgspo.core.fleet_manifest import (
    Manifest,
    SupervisorEntry,
    acknowledge_weights,
    manifest_path,
    read_manifest,
    read_weights,
    run_folder,
    write_json_atomic,
)
from agentgspo.fleet.spec import FleetSpecError, load_spec

FLEET = """
probes: {interval_s: 1, timeout_s: 5}
samplers:
  - {name: policy, model: tiny, count: 2, cpus: 1, enforce_eager: true, max_num_seqs: 8,
     vllm_args: [--max-model-len, "512"]}
sandboxes:
  - {name: judge, cpus: 0}
env_servers:
  - {name: calc, env: agentgspo/Calculator-v0, env_kwargs: {max_turns: 3}, python: venv/bin/python}
"""


def write(tmp_path, text, name="fleet.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_fleet_file_becomes_the_projects_own_command_lines(tmp_path):
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").touch()
    spec = load_spec(write(tmp_path, FLEET))
    assert spec.name == "fleet" and spec.launcher == "local" and spec.max_restarts == 3
    parts = spec.parts()
    assert [(p.id, p.kind) for p in parts] == [
        ("policy-0", "sampler"),
        ("policy-1", "sampler"),
        ("judge-0", "sandbox"),
        ("calc-0", "env_server"),
    ]
    sampler = parts[0].command("/py", "127.0.0.1", 8001)
    assert sampler[:4] == ["/py", "-m", "agentgspo.cli", "serve-policy"]
    assert sampler[sampler.index("--port") + 1] == "8001" and "--enforce-eager" in sampler
    assert sampler[sampler.index("--") :] == ["--", "--max-model-len", "512"]
    assert parts[0].bind_cores and parts[0].cpus == 1
    sandbox = parts[2].command("/py", "0.0.0.0", 9)
    assert sandbox[3:] == "sandbox-server --host 0.0.0.0 --port 9 --backend local --max-concurrency 1".split()
    env_server = parts[3].command("/py", "h", 7)
    assert env_server[0] == str(tmp_path / "venv" / "bin" / "python")  # relative to the fleet file's folder
    assert json.loads(env_server[env_server.index("--env-kwargs") + 1]) == {"max_turns": 3}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("samplers: [{cuont: 2}]", r"samplers\[0\]\.cuont: unknown setting; did you mean 'count'\?"),
        ("samplers: [{count: 0}]", r"samplers\[0\]\.count: Input should be greater than or equal to 1 \(got 0\)"),
        (
            "samplers: [{gpus: 2}]",
            r"samplers\[0\]: gpus 2 != tensor_parallel_size x pipeline_parallel_size = 1.*gpus: 1",
        ),
        ("sandboxes: [{}]\nenv_servers: [{name: sandbox, env: x}]", r"group names must be unique.*\['sandbox'\]"),
        ("launcher: local", r"the fleet has no parts: add samplers, sandboxes or env_servers"),
        ("launcher: slurm\nsandboxes: [{}]", r"launcher: Input should be 'local' or 'ray'"),
        ("probes: {intreval_s: 1}\nsandboxes: [{}]", r"probes\.intreval_s: unknown setting; did you mean 'interval_s'"),
        ("sandboxes: [{name: Judge}]", r"sandboxes\[0\]: name 'Judge': use 1-40 lower-case letters"),
        ("samplers: [{model: ./nowhere}]", r"samplers\[0\]\.model: no folder './nowhere'.*'tiny', a model folder"),
        ("env_servers: [{env: x, python: v/bin/python}]", r"env_servers\[0\]\.python: no interpreter.*\.venv-openenv"),
        ("- a list", r"expected a mapping of settings"),
        ("samplers: [", r"is not valid YAML"),
    ],
)
def test_a_wrong_fleet_file_names_the_field_and_the_fix(tmp_path, text, expected):
    with pytest.raises(FleetSpecError, match=expected):
        load_spec(write(tmp_path, text))


def test_the_command_reports_a_wrong_file_in_one_line(tmp_path, capsys):
    assert main(["fleet", "up", str(write(tmp_path, "samplers: [{cuont: 2}]"))]) == 2
    err = capsys.readouterr().err
    assert "agentgspo fleet: error:" in err and "did you mean 'count'" in err and "Traceback" not in err
    assert main(["fleet", "status", str(tmp_path / "none.yaml")]) == 2
    assert "no fleet manifest" in capsys.readouterr().err


def test_the_weights_handshake_acknowledges_incarnations(tmp_path):
    path = manifest_path(tmp_path / "f.yaml")
    assert path.name == "f.manifest.json" and run_folder(path).name == "f.fleet"
    manifest = Manifest(
        fleet="f",
        spec=str(tmp_path / "f.yaml"),
        launcher="local",
        supervisor=SupervisorEntry(pid=1, host="h", started_at=0.0),
        weights_file=str(tmp_path / "weights.json"),
    )
    write_json_atomic(path, manifest.dump())
    assert read_manifest(path).weights_file == manifest.weights_file
    assert read_weights(manifest.weights_file).version == 0  # nothing written yet: the fleet file's model
    acknowledge_weights(path, 1, {"policy-0": 0, "policy-1": 2})
    acknowledge_weights(manifest, 2, {"policy-0": 0})
    weights = read_weights(manifest.weights_file)
    assert weights.version == 2
    assert weights.acknowledged("policy-0", 0) == 2
    assert weights.acknowledged("policy-1", 2) == 1  # kept: it missed version 2, so it needs weights
    assert weights.acknowledged("policy-1", 3) is None  # another incarnation holds the fleet file's model
    assert not list(tmp_path.glob(".*"))  # no temporary file left by the atomic writes
