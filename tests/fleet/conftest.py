"""The fleet tests' local Ray cluster: one for the package (test_job's Ray jobs and test_ray's fleet), started on
first use and stopped once the package's last test ran (a start costs 10-20 s here)."""

from __future__ import annotations

import importlib.util

import pytest
from fleet.fleet_support import ray_head


@pytest.fixture(scope="package")
def ray_cluster():
    """A one-node Ray cluster on 127.0.0.1 (2 CPUs, a 100 MiB object store) with its dashboard (the Job Submission
    API): (its address, the dashboard's URL)."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed: pip install 'agentgspo[ray]' (.ci/run installs it)")
    with ray_head() as (address, dashboard):
        yield address, dashboard
