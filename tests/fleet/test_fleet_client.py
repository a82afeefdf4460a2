"""The learner's side of a fleet: ServerPolicy("fleet:MANIFEST") follows the manifest the supervisor writes (a real
manifest file, written here as the supervisor would): replicas that leave get no turn, a replica that comes back
takes none until an update sent it the current weights, and the update is acknowledged in the weights file."""

from __future__ import annotations

import time

import pytest

from agentgspo.fleet.manifest import Manifest, PartEntry, SupervisorEntry, read_weights, write_json_atomic
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
        "policy-0": {"restarts": 0, "version": 4},
        "policy-1": {"restarts": 1, "version": 4},
    }
    with pytest.raises(ValueError, match="fleet:MANIFEST"):
        ServerPolicy([f"fleet:{path}", "http://127.0.0.1:1"], renderer)
