"""One command for a whole run, for real: `agentgspo fleet run FILE -- COMMAND` brings a fleet (a sandbox server) up,
runs the command (a script under `accelerate launch` that reads the manifest and has a program judged) and brings the
fleet down, whatever the command's end (its status, a SIGTERM passed on to it); `agentgspo fleet submit` does the same
as a Ray job on the package's local one-node cluster (tests/fleet/conftest.py); and what both refuse."""

from __future__ import annotations

import importlib.util
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fleet.fleet_support import ROOT, fleet, nothing_left

from agentgspo.fleet.job import job_entrypoint
from agentgspo.fleet.local import free_port, pid_alive
from agentgspo.core.fleet_manifest import manifest_path, read_manifest

pytest.importorskip("uvicorn", reason="sandbox servers need the server extra")
needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason="fleet submit needs Ray: pip install 'agentgspo[ray]'"
)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ACCELERATE = str(Path(sys.executable).with_name("accelerate"))
LOCAL_FLEET = "launcher: local\nprobes: {interval_s: 5, timeout_s: 30}\nsandboxes: [{name: judge, cpus: 0}]\n"
RAY_FLEET = """launcher: ray
ray: {address: "%s", namespace: agentgspo-fleet-job-test}
probes: {interval_s: 5, timeout_s: 30}
sandboxes: [{name: judge, cpus: 0}]
"""
#: The "learner": reads the manifest it is given, has a program judged by the fleet's sandbox server, writes what it
#: got (and the manifest its environment names) to OUT.
JUDGE = """
import base64, json, os, sys

import httpx

from agentgspo.core.fleet_manifest import read_manifest

manifest = read_manifest(sys.argv[1])
(part,) = manifest.serving("sandbox")
encode = lambda text: base64.b64encode(text.encode()).decode()
body = {
    "source": "print(int(input()) * 2)\\n",
    "lang": "py",
    "tests": [{"name": "double", "input_b64": encode("21\\n"), "answer_b64": encode("42\\n")}],
}
headers = {"Authorization": f"Bearer {manifest.sandbox_token()}"}
reply = httpx.post(f"{part.url}/judge", json=body, headers=headers, timeout=120, trust_env=False)
reply.raise_for_status()
environment = os.environ["AGENTGSPO_FLEET_MANIFEST"]
result = {"verdict": reply.json()["verdict"], "argument": sys.argv[1], "environment": environment}
open(sys.argv[2], "w").write(json.dumps(result))
"""
#: A command that waits to be stopped: says it is ready, then notes each signal it gets (one line each) and exits
#: 128 + the first.
WAITS = """
import pathlib, signal, sys, time

folder = pathlib.Path(sys.argv[1])

def stop(signum, frame):
    with open(folder / "got", "a") as handle:
        handle.write(signal.Signals(signum).name + "\\n")
    sys.exit(128 + signum)

signal.signal(signal.SIGTERM, stop)
(folder / "ready").write_text("")
while True:
    time.sleep(1)
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def judged(out: Path, manifest: Path) -> None:
    """The command's report: the program judged AC, the manifest given both as argument and in the environment."""
    result = json.loads(out.read_text())
    assert result == {"verdict": "AC", "argument": str(manifest), "environment": str(manifest)}, result


def stopped(manifest: Path) -> None:
    """The fleet of ``manifest`` is down: its state says so and nothing it named runs (processes, groups, ports)."""
    final = read_manifest(manifest)
    assert final.state == "stopped" and {part.status for part in final.parts} == {"stopped"}, final.state
    assert all(part.url for part in final.parts)  # each part did run
    nothing_left(final)


@pytest.mark.slow
def test_run_brings_the_fleet_up_runs_the_learner_under_accelerate_and_brings_it_down(tmp_path):
    spec, script = write(tmp_path, "fleet.yaml", LOCAL_FLEET), write(tmp_path, "judge.py", JUDGE)
    out = tmp_path / "out.json"
    launch = [ACCELERATE, "launch", "--cpu", "--num_processes", "1", str(script), "{manifest}", str(out)]
    done = fleet("run", spec, "--", *launch, timeout_s=300)
    assert done.returncode == 0, done.stdout + done.stderr
    judged(out, manifest_path(spec).resolve())
    assert "nothing of it is left running" in done.stdout and "exited with status 0" in done.stderr
    stopped(manifest_path(spec))


@pytest.mark.slow
def test_run_exits_with_the_commands_status_and_stops_what_it_left(tmp_path):
    """A command that fails (status 3) and leaves a process of its own running: the status is passed on, the stray
    stopped (after the grace --stray-grace gives it), the fleet down."""
    spec = write(tmp_path, "fleet.yaml", LOCAL_FLEET)
    stray = tmp_path / "stray.pid"
    command = ["--stray-grace", "1", "--", "sh", "-c", f"sleep 600 & echo $! > {stray}; exit 3"]
    done = fleet("run", spec, *command, timeout_s=300)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "outlived the command by 1 s: SIGTERM" in done.stderr and not pid_alive(int(stray.read_text()))
    stopped(manifest_path(spec))


def signalled_when_ready(command: list[str], folder: Path, signum: int) -> tuple[int, str]:
    """Run ``agentgspo fleet COMMAND...``; once the WAITS command it runs is ready, send it ``signum``: (its exit
    status, its output).

    The command starts with SIGINT at its default, as from a terminal: a suite started in the background by a
    non-interactive shell (``bash .ci/run &``) inherits SIGINT ignored, and Python then keeps it ignored, so the
    Ctrl-C would never arrive (the test hung 600 s that way)."""
    run = subprocess.Popen(
        [sys.executable, "-m", "agentgspo.cli", "fleet", *command],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 300
        while not (folder / "ready").exists():
            assert run.poll() is None, run.stdout.read()
            assert time.monotonic() < deadline, "the command did not start"
            time.sleep(0.05)
        run.send_signal(signum)
        output, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:  # a failed assertion above: stop it as a user would
            run.send_signal(signum)
            run.communicate(timeout=300)
    return run.returncode, output


#: ``fleet submit`` against a Ray job client whose log stream does not act on a cancel (as a websocket receive under
#: load did): it writes READY once the job "runs", records the stop, and prints what ``fleet_submit`` returned.
DEAF_STREAM = """
import asyncio, pathlib, signal, sys

from agentgspo.fleet import job

# Ctrl-C as a shell delivers it, whatever the test process left to its children (one loaded suite run hung here).
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

folder = pathlib.Path(sys.argv[1])


class Client:
    stopped = False

    def submit_job(self, entrypoint, runtime_env):
        return "raysubmit_deaf"

    async def tail_job_logs(self, job_id):
        yield "the job runs\\n"
        (folder / "ready").write_text("")
        while not self.stopped:
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                pass  # what a stream that does not act on a cancel does

    def stop_job(self, job_id):
        (folder / "stopped").write_text(job_id)
        self.stopped = True

    def get_job_status(self, job_id):
        return type("Status", (), {"value": "STOPPED" if self.stopped else "RUNNING"})()

    def get_job_logs(self, job_id):
        return "the job runs\\nit was stopped\\n"


job._job_client = lambda address: Client()
print("returned", job.fleet_submit(sys.argv[2], ["true"], address="http://127.0.0.1:1"), flush=True)
"""


def test_ctrl_c_of_submit_is_heard_while_the_log_stream_ignores_a_cancel(tmp_path):
    """Ctrl-C reaches ``fleet submit`` however the log stream takes a cancel: the job is stopped, the rest of its log
    printed once, 130 returned (under ``asyncio.run`` in the main thread the SIGINT only cancelled the stream)."""
    script, spec = write(tmp_path, "deaf.py", DEAF_STREAM), write(tmp_path, "fleet.yaml", LOCAL_FLEET)
    run = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path), str(spec)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "ready").exists():
            assert run.poll() is None and time.monotonic() < deadline, "the stand-in job did not start"
            time.sleep(0.02)
        run.send_signal(signal.SIGINT)
        output, _ = run.communicate(timeout=60)
    finally:
        run.kill()
    assert (tmp_path / "stopped").read_text() == "raysubmit_deaf"
    assert output.count("the job runs") == 1 and output.count("it was stopped") == 1, output
    assert output.rstrip().endswith("returned 130"), output


@pytest.mark.slow
def test_sigterm_to_run_is_passed_to_the_command_and_the_fleet_still_comes_down(tmp_path):
    spec, script = write(tmp_path, "fleet.yaml", LOCAL_FLEET), write(tmp_path, "waits.py", WAITS)
    status, output = signalled_when_ready(
        ["run", str(spec), "--", sys.executable, str(script), str(tmp_path)], tmp_path, signal.SIGTERM
    )
    assert status == 128 + signal.SIGTERM, output
    assert (tmp_path / "got").read_text() == "SIGTERM\n" and "SIGTERM passed to the command" in output  # once
    stopped(manifest_path(spec))


def test_run_and_submit_refuse_what_cannot_work(tmp_path):
    spec = write(tmp_path, "fleet.yaml", LOCAL_FLEET)
    for command in ([], ["--"]):
        done = fleet("run", spec, *command, timeout_s=120)
        assert done.returncode == 2 and "needs the command to run after `--`" in done.stderr, done.stderr
    done = fleet("up", spec, "--", "true", timeout_s=120)
    assert done.returncode == 2 and "takes no command" in done.stderr
    done = fleet("run", spec, "--stray-grace", "-1", "--", "true", timeout_s=120)
    assert done.returncode == 2 and "--stray-grace -1: must be a number of seconds >= 0" in done.stderr, done.stderr
    assert not manifest_path(spec).exists()  # nothing was started
    if importlib.util.find_spec("ray") is not None:
        address = f"http://127.0.0.1:{free_port('127.0.0.1')}"
        done = fleet("submit", spec, "--address", address, "--", "true", timeout_s=120)
        assert done.returncode == 1 and address in done.stderr and "ray start --head" in done.stderr, done.stderr
        wrong = write(tmp_path, "wrong.yaml", "sandboxes: [{nmae: judge}]\n")
        done = fleet("submit", wrong, "--address", address, "--", "true", timeout_s=120)
        assert done.returncode == 2 and "did you mean 'name'" in done.stderr, done.stderr  # refused before Ray


def test_submit_passes_its_run_options_to_the_jobs_fleet_run(tmp_path):
    spec = write(tmp_path, "fleet.yaml", LOCAL_FLEET)
    entrypoint = job_entrypoint(spec, ["echo", "a b"], tmp_path, "m.json", timeout_s=90, stray_grace_s=2.5)
    assert entrypoint == "agentgspo fleet run fleet.yaml --manifest m.json --timeout 90 --stray-grace 2.5 -- echo 'a b'"
    assert "--stray-grace" not in job_entrypoint(spec, ["true"])  # the job's fleet run keeps its default


def fleet_actors(dashboard: str) -> list:
    """The Ray actors of the test fleets' namespace, whatever their state."""
    from ray.util.state import list_actors

    return list_actors(address=dashboard, filters=[("ray_namespace", "=", "agentgspo-fleet-job-test")])


@needs_ray
@pytest.mark.slow
def test_submit_runs_the_fleet_and_the_learner_as_one_ray_job(tmp_path, ray_cluster):
    from ray.job_submission import JobSubmissionClient

    address, dashboard = ray_cluster
    folder = tmp_path / "job"  # uploaded by Ray as the job's working dir: the fleet file and the script
    folder.mkdir()
    spec, script = write(folder, "fleet.yaml", RAY_FLEET % address), write(folder, "judge.py", JUDGE)
    out, manifest = tmp_path / "out.json", tmp_path / "fleet.manifest.json"
    launch = ["accelerate", "launch", "--cpu", "--num_processes", "1", script.name, "{manifest}", str(out)]
    extra = ["--address", dashboard, "--working-dir", str(folder), "--manifest", str(manifest)]
    done = fleet("submit", spec, *extra, "--", *launch, timeout_s=500)
    assert done.returncode == 0, done.stdout + done.stderr
    job_id = re.search(r"submitted Ray job (\S+) to", done.stdout).group(1)
    assert JobSubmissionClient(dashboard).get_job_status(job_id).value == "SUCCEEDED"
    assert f"Ray job {job_id}: SUCCEEDED" in done.stdout
    assert "nothing of it is left running" in done.stdout  # fleet down's word, in the job's log
    judged(out, manifest)
    stopped(manifest)
    actors = fleet_actors(dashboard)
    assert actors and not [actor for actor in actors if actor.state == "ALIVE"], actors


@needs_ray
@pytest.mark.slow
def test_ctrl_c_of_submit_stops_the_job_its_command_signalled_once_and_the_fleet_down(tmp_path, ray_cluster):
    """Ray's job stop sends SIGTERM to every process of the job: `fleet run` does not pass it on again (the learner
    would take a second one as "stop now, without saving"), waits for the command, brings the fleet down."""
    address, dashboard = ray_cluster
    spec, script = write(tmp_path, "fleet.yaml", RAY_FLEET % address), write(tmp_path, "waits.py", WAITS)
    command = ["submit", str(spec), "--address", dashboard, "--", sys.executable, str(script), str(tmp_path)]
    status, output = signalled_when_ready(command, tmp_path, signal.SIGINT)
    assert status == 130, output
    assert re.search(r"Ray job \S+: STOPPED", output) and "not passed on again" in output, output
    assert (tmp_path / "got").read_text() == "SIGTERM\n", output  # once
    assert "the command exited with status 143; the fleet is down" in output
    stopped(manifest_path(spec))
    assert not [actor for actor in fleet_actors(dashboard) if actor.state == "ALIVE"]
