"""Weight updates with turns in flight against a server that lacks vLLM's ``/pause`` route (an older vLLM, or one
started without ``VLLM_SERVER_DEV_MODE=1``): a fake server on 127.0.0.1, no vLLM needed. The real engine and
server cases are in tests/policy/test_vllm_engine.py and tests/policy/test_policy_server.py."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from servers import serve  # tests/servers.py

from agentgspo.core.sampling import SampleRequest, SamplingParams
from agentgspo.policy.server import ServerPolicy, ServerUnavailable


@contextlib.contextmanager
def stand_in(*posts: str, label: bool = False):
    """A stand-in for vLLM's server with ``/health`` and the POST routes ``posts`` (and, ``label``, vLLM's
    ``/update_weight_version`` and ``/weight_info``); yields its URL, the paths it was posted and its label."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, PlainTextResponse
    from starlette.routing import Route

    posted: list[str] = []
    held = {"weight_version": None}

    async def ok(request):
        posted.append(request.url.path)
        if request.url.path == "/update_weight_version":
            held["weight_version"] = (await request.json())["new_version"]
        return JSONResponse({"success": True})

    routes = [Route("/health", lambda request: PlainTextResponse("ok"))]
    routes += [Route(path, ok, methods=["POST"]) for path in (*posts, *(["/update_weight_version"] if label else []))]
    routes += [Route("/weight_info", lambda request: JSONResponse(held))] if label else []
    with serve(Starlette(routes=routes)) as url:
        yield url, posted, held


@pytest.fixture
def server_without_pause():
    """An app with the reload and reset routes but no ``/pause``; yields its URL and the paths it was posted."""
    with stand_in("/collective_rpc", "/reset_prefix_cache") as (url, posted, _):
        yield url, posted


def test_a_server_without_pause_is_updated_unpaused_when_idle_and_refused_mid_turn(
    server_without_pause, tmp_path, monkeypatch, caplog
):
    url, posted = server_without_pause
    monkeypatch.setattr("agentgspo.policy.server.save_weights", lambda model, folder: Path(folder))
    policy = ServerPolicy([url], SimpleNamespace(end_of_turn_id=0))
    with caplog.at_level(logging.WARNING, logger="agentgspo.policy.server"):
        assert policy.update_weights(None, tmp_path) == 1  # nothing in flight: the old way, with a warning
    # No streaming: the server does not accept the gloo engine, or (no vLLM beside the learner) it is not asked.
    assert "weight updates: through folders (" in caplog.text
    assert f"{url} has no /pause route" in caplog.text
    assert posted == ["/collective_rpc", "/reset_prefix_cache"] and policy.servers[0].version == 1

    policy.servers[0].in_flight = 1  # a turn of this client on it: reloading unpaused would change it mid-turn
    with pytest.raises(RuntimeError, match=f"{url}: no /pause route .* 1 turns in flight on it"):
        policy.update_weights(None, tmp_path)
    assert posted == ["/collective_rpc", "/reset_prefix_cache"]  # not reloaded
    assert policy.servers[0].retired and policy.servers[0].version == 1  # stale weights: no turn goes to it
    policy.servers[0].in_flight = 0
    with pytest.raises(ServerUnavailable, match=f"every server failed a weight update: {url}"):
        asyncio.run(policy.sample(SampleRequest([1, 2], [], SamplingParams())))


def test_without_vllm_beside_the_learner_auto_updates_through_folders_and_gloo_is_refused(
    server_without_pause, tmp_path, monkeypatch, caplog
):
    # The server backend's client needs no vLLM (its servers run it): with none importable here, "auto" updates
    # through folders, and an explicit "gloo" is refused naming both fixes (it raised ModuleNotFoundError).
    import sys

    url, posted = server_without_pause
    monkeypatch.setattr("agentgspo.policy.server.save_weights", lambda model, folder: Path(folder))
    monkeypatch.delitem(sys.modules, "agentgspo.policy.weight_transfer", raising=False)
    for name in [name for name in sys.modules if name == "vllm" or name.startswith("vllm.")]:
        monkeypatch.setitem(sys.modules, name, None)  # `import vllm...` raises ImportError, as when it is absent
    monkeypatch.setitem(sys.modules, "vllm", None)
    with caplog.at_level(logging.WARNING, logger="agentgspo.policy.server"):
        assert ServerPolicy([url], SimpleNamespace(end_of_turn_id=0)).update_weights(None, tmp_path) == 1
    assert "weight updates: through folders (vLLM does not import here" in caplog.text
    assert posted == ["/collective_rpc", "/reset_prefix_cache"]
    gloo = ServerPolicy([url], SimpleNamespace(end_of_turn_id=0), weight_transfer="gloo")
    with pytest.raises(RuntimeError, match="install vllm beside the learner, or pass weight_transfer='folder'"):
        gloo.update_weights(None, tmp_path)


def test_each_updated_server_is_labelled_with_the_run_and_the_version_before_its_resume(tmp_path, monkeypatch):
    # vLLM's label routes (POST /update_weight_version, GET /weight_info) beside the pause and reload ones: the label
    # a server reports names this learner run, so another run's replica at the same number is told apart.
    monkeypatch.setattr("agentgspo.policy.server.save_weights", lambda model, folder: Path(folder))
    with stand_in("/pause", "/resume", "/collective_rpc", "/reset_prefix_cache", label=True) as (url, posted, _):
        policy = ServerPolicy([url], SimpleNamespace(end_of_turn_id=0), weight_transfer="folder", run_id="run-7")
        assert policy.update_weights(None, tmp_path) == 1
        assert httpx.get(f"{url}/weight_info").json() == {"weight_version": "run-7:1"}
        other = ServerPolicy([url], SimpleNamespace(end_of_turn_id=0), weight_transfer="folder")
        assert other.run_id != "run-7" and len(other.run_id) == 12  # a new run: a random id of its own
        assert other.update_weights(None, tmp_path) == 1
        assert httpx.get(f"{url}/weight_info").json() == {"weight_version": f"{other.run_id}:1"}
    cycle = ["/pause", "/collective_rpc", "/reset_prefix_cache", "/update_weight_version", "/resume"]
    assert posted == cycle * 2
