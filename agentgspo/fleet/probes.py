"""Health that means something: each probe asks a part to do a small piece of its real work, over HTTP.

- A sampler replica (vLLM's OpenAI server) generates one token from a few prompt ids (``/v1/completions``,
  ``max_tokens=1``): ``/health`` answers while an engine or a GPU is hung, a generation does not. Tokens the engine
  generated for clients since the last probe are the same evidence (``vllm:generation_tokens_total`` in
  ``/metrics`` went up), so a busy replica is not sent a probe that would queue behind its work and time out, and
  an idle CPU replica is not woken needlessly (each request keeps vLLM's CPU worker spinning for a second: measured,
  a probe every second kept its core 94% busy, every 5 s 20%). A server the learner has paused for a weight update
  (``GET /is_paused``) cannot generate until it resumes; the probe then passes with detail ``"paused"`` instead of
  timing out and getting it restarted mid-update.
- A sandbox server judges a tiny program through ``POST /judge`` (with the fleet's token) and must say AC: its
  sandbox backend, not only its web server, works.
- An env server answers ``GET /health``, then (``probe_reset``, on by default) opens an OpenEnv session on ``/ws``
  and resets an env in it; a server at capacity (``CAPACITY_REACHED``) is alive and passes.

Each probe returns a :class:`ProbeResult` and never raises: what failed is its ``detail``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from dataclasses import dataclass

import httpx

__all__ = ["ProbeResult", "generated_tokens", "probe_sampler", "probe_sandbox", "probe_env_server", "PROBE_PROMPT_IDS"]

#: prompt ids of the sampler probe: in any vocabulary; the one token sampled after them is not looked at.
PROBE_PROMPT_IDS = [1, 2, 3]
#: the sandbox probe: a program that must be judged AC on one test.
PROBE_PROGRAM = "print(int(input()) + 1)\n"


@dataclass
class ProbeResult:
    """One probe: passed or not, how long it took, and what failed (or a note such as ``"paused"``)."""

    ok: bool
    latency_s: float
    detail: str | None = None
    progress: float | None = None  # samplers: the engine's generated-token counter, for the next probe


def _failure(start: float, what: str, exc: BaseException | None = None) -> ProbeResult:
    reason = f"{what}: {type(exc).__name__}: {exc}".rstrip(": ") if exc is not None else what
    return ProbeResult(False, time.monotonic() - start, reason[:500])


async def _is_paused(client: httpx.AsyncClient, url: str, timeout_s: float) -> bool:
    try:
        reply = await client.get(f"{url}/is_paused", timeout=timeout_s)
        return reply.status_code == 200 and bool(reply.json().get("is_paused"))
    except (httpx.HTTPError, ValueError):
        return False


async def generated_tokens(client: httpx.AsyncClient, url: str, timeout_s: float) -> float | None:
    """vLLM's ``vllm:generation_tokens_total`` (summed over its labels) from ``/metrics``, or None."""
    try:
        reply = await client.get(f"{url}/metrics", timeout=timeout_s)
    except httpx.HTTPError:
        return None
    if reply.status_code != 200:
        return None
    values = [
        float(line.rsplit(None, 1)[1])
        for line in reply.text.splitlines()
        if line.startswith("vllm:generation_tokens_total")
    ]
    return sum(values) if values else None


async def probe_sampler(
    client: httpx.AsyncClient, url: str, timeout_s: float, progress: float | None = None, model: str = "policy"
) -> ProbeResult:
    """One generated token from vLLM's server at ``url``, unless its engine generated tokens since the probe that
    returned ``progress``; a paused server passes as paused. The whole probe takes at most ``timeout_s``."""
    start = time.monotonic()

    def left(cap: float = float("inf")) -> float:
        return max(0.05, min(cap, start + timeout_s - time.monotonic()))

    generated = await generated_tokens(client, url, left(2.0))
    if generated is not None and progress is not None and generated > progress:
        return ProbeResult(True, time.monotonic() - start, f"{generated - progress:.0f} tokens generated", generated)
    # a hung engine does not answer this either (it asks the engine): a short wait, the rest for the generation
    if await _is_paused(client, url, left(2.0)):
        return ProbeResult(True, time.monotonic() - start, "paused", generated)
    body = {"model": model, "prompt": PROBE_PROMPT_IDS, "max_tokens": 1, "temperature": 0.0}
    try:
        reply = await client.post(f"{url}/v1/completions", json=body, timeout=left())
    except httpx.TimeoutException as exc:
        # paused while it waited, maybe: the next probe sees the pause first (one failure is not yet unhealthy)
        return _failure(start, f"no token generated in {timeout_s} s", exc)
    except httpx.HTTPError as exc:
        return _failure(start, "generation request failed", exc)
    if reply.status_code != 200:
        return _failure(start, f"generation answered HTTP {reply.status_code}: {reply.text[:200]}")
    try:
        choices = reply.json().get("choices") or []
    except ValueError:
        choices = []
    if not choices:
        return _failure(start, f"generation reply without choices: {reply.text[:200]}")
    after = await generated_tokens(client, url, 2.0)  # counts the probe's own token
    return ProbeResult(True, time.monotonic() - start, None, after)


async def probe_sandbox(client: httpx.AsyncClient, url: str, token: str, timeout_s: float) -> ProbeResult:
    """A tiny program judged AC by the sandbox server at ``url`` (``POST /judge``) within ``timeout_s``."""
    start = time.monotonic()
    encode = lambda text: base64.b64encode(text.encode()).decode()  # noqa: E731
    body = {
        "source": PROBE_PROGRAM,
        "lang": "py",
        "tests": [{"name": "probe", "input_b64": encode("41\n"), "answer_b64": encode("42\n")}],
    }
    try:
        reply = await client.post(
            f"{url}/judge", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=timeout_s
        )
    except httpx.HTTPError as exc:
        return _failure(start, "judge request failed", exc)
    if reply.status_code != 200:
        return _failure(start, f"judge answered HTTP {reply.status_code}: {reply.text[:200]}")
    try:
        verdict = reply.json().get("verdict")
    except ValueError:
        verdict = None
    if verdict != "AC":
        return _failure(start, f"the probe program was judged {verdict!r}, expected 'AC': {reply.text[:300]}")
    return ProbeResult(True, time.monotonic() - start)


async def probe_env_server(client: httpx.AsyncClient, url: str, timeout_s: float, reset: bool = True) -> ProbeResult:
    """``GET /health`` of the env server at ``url``, then (``reset``) an env reset in a new WebSocket session; both
    within ``timeout_s``."""
    start = time.monotonic()
    try:
        reply = await client.get(f"{url}/health", timeout=timeout_s)
    except httpx.HTTPError as exc:
        return _failure(start, "/health request failed", exc)
    if reply.status_code != 200:
        return _failure(start, f"/health answered HTTP {reply.status_code}: {reply.text[:200]}")
    if not reset:
        return ProbeResult(True, time.monotonic() - start)
    try:
        detail = await asyncio.wait_for(_reset_once(url), max(0.05, start + timeout_s - time.monotonic()))
    except asyncio.TimeoutError:
        return _failure(start, f"no reset answer in {timeout_s} s")
    except Exception as exc:  # websockets' errors, OSError: the session could not be had
        return _failure(start, "WebSocket reset failed", exc)
    if detail.startswith("error"):
        return _failure(start, f"reset answered {detail}")
    return ProbeResult(True, time.monotonic() - start, None if detail == "observation" else detail)


async def _reset_once(url: str) -> str:
    """Open ``/ws``, reset (seed 0), close: ``"observation"``, ``"at capacity"`` or ``"error ..."``."""
    from websockets.asyncio.client import connect

    ws_url = "ws" + url.removeprefix("http").rstrip("/") + "/ws"
    async with connect(ws_url, max_size=64 * 2**20, open_timeout=None) as socket:
        await socket.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
        answer = json.loads(await socket.recv())
        if answer.get("type") == "error":
            data = answer.get("data", {})
            if data.get("code") == "CAPACITY_REACHED":
                return "at capacity"
            return f"error {data.get('code')}: {data.get('message')}"
        try:
            await socket.send(json.dumps({"type": "close", "data": {}}))
        except Exception:  # the server may close first; the probe already passed
            pass
        return "observation" if answer.get("type") == "observation" else f"error: unexpected answer {answer}"[:300]
