"""The learner's side of a fleet: ServerPolicy("fleet:MANIFEST") follows the manifest the supervisor writes (a real
manifest file, written here as the supervisor would): replicas that leave get no turn, a replica that comes back
takes none until an update sent it the current weights, and the update is acknowledged in the weights file."""

from __future__ import annotations

import time

import pytest

from agentgspo.core.fleet_manifest import (
    Manifest,
    PartEntry,
    SupervisorEntry,
    read_manifest,
    read_weights,
    write_json_atomic,
)
from agentgspo.fleet.spec import FleetSpec, SamplerGroup
from agentgspo.fleet.supervisor import Supervisor
from agentgspo.policy.server import ServerPolicy


def write(path, parts, generation, weight_version=0):
    manifest = Manifest(
        fleet="test",
        spec=str(path.with_suffix(".yaml")),
        launcher="local",
        supervisor=SupervisorEntry(pid=1, host="here", started_at=time.time()),
        generation=generation,
        weights_file=str(path.with_name("weights.json")),
        weight_version=weight_version,
        parts=parts,
    )
    write_json_atomic(path, manifest.dump())


def sampler(index, status="healthy", restarts=0, weight_version=0, port=None):
    return PartEntry(
        id=f"policy-{index}",
        kind="sampler",
        group="policy",
        index=index,
        status=status,
        url=f"http://127.0.0.1:{port or 9100 + index}",
        restarts=restarts,
        weight_version=weight_version,
    )


def test_a_fleet_client_follows_the_manifest(tmp_path, renderer):
    path = tmp_path / "f.manifest.json"
    write(path, [sampler(0), sampler(1), PartEntry(id="judge-0", kind="sandbox", group="judge", index=0)], 1)
    policy = ServerPolicy([f"fleet:{path}"], renderer, weight_transfer="folder")
    assert [(s.part, s.admitted) for s in policy.servers] == [("policy-0", True), ("policy-1", True)]
    first = policy.servers[0]
    # policy-1 dies: out of the list; nothing changes for policy-0 (the same entry, turns in flight kept).
    write(path, [sampler(0), sampler(1, status="unhealthy")], 2)
    assert policy.sync_fleet(force=True)
    assert [s.part for s in policy.servers] == ["policy-0"] and policy.servers[0] is first
    # The learner moved to version 3; policy-1 comes back (restarts 1) holding the fleet file's model: no turn for
    # it before an update.
    policy.version = 3
    write(path, [sampler(0, weight_version=3), sampler(1, "needs_weights", restarts=1, port=9200)], 3, 3)
    policy.sync_fleet(force=True)
    back = policy.servers[1]
    assert (back.part, back.incarnation, back.url, back.admitted) == ("policy-1", 1, "http://127.0.0.1:9200", False)
    assert policy.servers[0] is first and first.admitted
    # What an update does once it reached a server (its _finish labels the version): admitted, acknowledged.
    for server in policy.servers:
        server.version = 4
    policy._acknowledge(4)
    assert back.admitted
    assert read_weights(tmp_path / "weights.json").replicas == {
        "policy-0": {"restarts": 0, "version": 4, "run": policy.run_id},
        "policy-1": {"restarts": 1, "version": 4, "run": policy.run_id},
    }
    with pytest.raises(ValueError, match="fleet:MANIFEST"):
        ServerPolicy([f"fleet:{path}", "http://127.0.0.1:1"], renderer)


def updated(policy: ServerPolicy, parts: set[str]) -> None:
    """What an update to the next version does once it reached the servers of ``parts`` (each one's _finish labels
    the version; the others missed it), then its acknowledgement."""
    version = policy.version + 1
    for server in policy.servers:
        if server.part in parts:
            server.version = version
    policy.version = version
    policy._acknowledge(version)


def test_a_replica_holding_a_killed_learners_weights_is_not_current_for_the_resumed_one(tmp_path, renderer):
    # The supervisor's own bookkeeping (refresh_weights reads the weights file the learners write) and two learner
    # clients, one after the other, on one fleet of two replicas.
    path = tmp_path / "f.manifest.json"
    supervisor = Supervisor(FleetSpec(samplers=[SamplerGroup(count=2)]), tmp_path / "f.yaml", path)
    for port, entry in enumerate(supervisor.manifest.parts, 9100):
        entry.url = f"http://127.0.0.1:{port}"
        supervisor.set_status(entry, "healthy")
    killed = ServerPolicy([f"fleet:{path}"], renderer, weight_transfer="folder")
    assert all(server.admitted for server in killed.servers)  # the fleet file's model: version 0 of anyone
    updated(killed, {"policy-0", "policy-1"})
    updated(killed, {"policy-0", "policy-1"})  # both replicas hold the killed run's version 2
    supervisor.refresh_weights()
    assert {(p.status, p.weight_version, p.weight_run) for p in read_manifest(path).parts} == {
        ("healthy", 2, killed.run_id)
    }
    killed_run = killed.run_id
    del killed  # SIGKILLed: its replicas keep its version-2 weights
    # The resumed learner is a new run. Before its first update it has no weights of its own (version 0) and takes
    # the replicas as they are (an evaluation client does the same); its first update goes to every one of them.
    resumed = ServerPolicy([f"fleet:{path}"], renderer, weight_transfer="folder")
    assert resumed.run_id != killed_run
    assert [(s.part, s.admitted) for s in resumed.servers] == [("policy-0", True), ("policy-1", True)]
    # Its updates reach policy-0 only (policy-1 failed one and was retired by it): after two, it is at version 2,
    # the number policy-1 holds of the killed run.
    updated(resumed, {"policy-0"})
    resumed.servers[1].retired = "weight update to version 2 failed: ..."
    updated(resumed, {"policy-0"})
    supervisor.refresh_weights()
    manifest = read_manifest(path)
    assert (manifest.weight_version, manifest.weight_run) == (2, resumed.run_id)
    assert manifest.part("policy-0").status == "healthy"
    stale = manifest.part("policy-1")
    assert (stale.status, stale.weight_version, stale.weight_run) == ("needs_weights", 2, killed_run)
    assert manifest.urls("sampler") == ["http://127.0.0.1:9100"]
    # The resumed client sees policy-1 again (a new entry: it had retired the old one): not admitted either.
    resumed._fleet_generation = None
    resumed.sync_fleet(force=True)
    assert [(s.part, s.admitted) for s in resumed.servers] == [("policy-0", True), ("policy-1", False)]
    # The killed run's acknowledgements are gone from the weights file; the resumed run's are there.
    assert read_weights(manifest.weights_file).replicas == {
        "policy-0": {"restarts": 0, "version": 2, "run": resumed.run_id}
    }
    with pytest.raises(ValueError, match="run_id 'a:b'.*letters, digits"):
        ServerPolicy([f"fleet:{path}"], renderer, run_id="a:b")
