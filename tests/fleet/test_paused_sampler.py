"""A sampler left paused by a learner that died mid-update: the supervisor's probe loop (``Supervisor.serve``, the
real one, over real HTTP on 127.0.0.1) restarts it once it has been paused longer than ``probes.max_paused_s``, and
not before: a pause the probes see end starts the count again. The sampler is a small HTTP app with vLLM's probe
routes (``GET /is_paused``, ``POST /v1/completions``; no vLLM start: seconds, not minutes), paused and resumed by the
test as a learner would; time is the supervisor's injectable clock, advanced by the test, never slept."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from servers import serve  # tests/servers.py

from agentgspo.fleet.local import Incarnation
from agentgspo.fleet.spec import FleetSpec, ProbeSettings, SamplerGroup
from agentgspo.fleet.supervisor import Supervisor

pytest.importorskip("uvicorn", reason="the stand-in sampler needs the server extra")


@pytest.fixture
def sampler():
    """A stand-in for vLLM's server as the probe sees it; yields (its URL, its state: ``paused``)."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, PlainTextResponse
    from starlette.routing import Route

    state = {"paused": False}

    async def completions(request):
        if state["paused"]:  # a paused vLLM server holds the request; the probe asks /is_paused first
            await asyncio.sleep(3600)
        return JSONResponse({"choices": [{"text": "x", "index": 0}]})

    app = Starlette(
        routes=[
            Route("/health", lambda request: PlainTextResponse("ok")),
            Route("/is_paused", lambda request: JSONResponse({"is_paused": state["paused"]})),
            Route("/v1/completions", completions, methods=["POST"]),
        ]
    )
    with serve(app) as url:
        yield url, state


async def next_probe(entry, count: int = 1) -> None:
    """Until the probe loop recorded ``count`` more probes of ``entry`` (each ProbeRecord is a new object)."""
    for _ in range(count):
        seen = entry.probe
        while entry.probe is seen:
            await asyncio.sleep(0.005)


def test_a_sampler_paused_past_the_bound_is_restarted_and_a_shorter_pause_is_not(sampler, tmp_path):
    url, state = sampler
    now = [0.0]
    probes = ProbeSettings(interval_s=0.02, timeout_s=5, max_paused_s=100)
    spec = FleetSpec(samplers=[SamplerGroup()], probes=probes)
    supervisor = Supervisor(spec, tmp_path / "f.yaml", tmp_path / "f.manifest.json", clock=lambda: now[0])
    part, entry = supervisor.parts[0], supervisor.manifest.parts[0]

    async def scenario() -> str:
        supervisor.client = httpx.AsyncClient(trust_env=False)
        exited = asyncio.get_running_loop().create_future()  # the process never exits: only the probes tell
        supervisor.adopt(entry, Incarnation(url=url, node="here", log="-", started_at=0.0, exited=exited))
        serving = asyncio.ensure_future(supervisor.serve(part, entry, supervisor.incarnations[part.id]))
        try:
            await next_probe(entry)
            assert entry.status == "healthy" and entry.probe.detail is None
            # A learner pauses it for an update and is slow: 90 s of 100 pass, it stays in service.
            state["paused"] = True
            await next_probe(entry, 2)  # after a change, twice: the first may have been under way before it
            now[0] = 90.0
            await next_probe(entry, 2)
            assert (entry.status, entry.probe.detail) == ("healthy", "paused") and not serving.done()
            # The update ends (resumed); the next one pauses it again at 120 s: the count starts again there.
            state["paused"] = False
            await next_probe(entry, 2)
            assert entry.probe.detail is None
            now[0] = 120.0
            state["paused"] = True
            await next_probe(entry, 2)
            now[0] = 215.0  # 95 s into this pause, 215 s since the first
            await next_probe(entry, 2)
            assert entry.status == "healthy" and not serving.done()
            # The learner dies mid-update: no /resume ever comes. Past the bound, the probe loop gives the part up.
            now[0] = 221.0
            return await asyncio.wait_for(serving, 30)  # the guard of the bug: without the bound it never returns
        finally:
            serving.cancel()
            await supervisor.client.aclose()

    reason = asyncio.run(scenario())
    assert "paused for 101 s, longer than probes.max_paused_s (100 s)" in reason
    assert "restarted, not resumed" in reason


def test_the_bound_is_a_fleet_file_setting_with_a_clear_error(tmp_path):
    from agentgspo.fleet.spec import FleetSpecError, load_spec

    assert ProbeSettings().max_paused_s == 1800.0
    path = tmp_path / "f.yaml"
    path.write_text("probes: {max_paused_s: 0}\nsandboxes: [{name: judge}]\n")
    with pytest.raises(FleetSpecError, match=r"probes\.max_paused_s: Input should be greater than 0 \(got 0\)"):
        load_spec(path)
