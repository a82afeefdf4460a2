"""Fixtures: the sandbox backends under test. Docker tests skip (with the reason printed) only if dockerd is down."""

from __future__ import annotations

import pytest

from agentgspo.sandboxes import SandboxUnavailable, get_sandbox


def _docker_or_skip():
    try:
        return get_sandbox("docker", pool_size=3)
    except SandboxUnavailable as exc:
        print(f"SKIP docker tests: {exc}")
        pytest.skip(f"Docker unavailable: {exc}")


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request):
    """Each isolation test runs on the local (bubblewrap) and the Docker backend."""
    if request.param == "docker":
        return _docker_or_skip()
    return get_sandbox("local")


@pytest.fixture
def docker_backend():
    return _docker_or_skip()
