"""Our envs evaluated by verifiers' own entry point: `vf-eval agentgspo-verifiers --env.taskset.env-id ID`, its
model an env's oracle behind a real OpenAI-compatible server on 127.0.0.1 (tests/interop/verifiers_support.py).

Both evaluations run at once (two vf-eval processes), as each spends most of its time starting up. The harness's
``play_episode`` also runs in-process, against the same kind of server, for the endings it must not score.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verifiers.v1", reason="the verifiers export needs the verifiers extra")

import agentgspo  # noqa: E402
from agentgspo.environments.env import ChatEnv  # noqa: E402
from agentgspo.environments.interop.verifiers_export import AgentgspoData, play_episode  # noqa: E402
from agentgspo.environments.registry import make  # noqa: E402
from agentgspo.core.trajectory import ENDINGS  # noqa: E402

from .verifiers_support import OracleServer  # noqa: E402

VF_EVAL = Path(sys.executable).parent / "vf-eval"
TASKS = {"agentgspo/Calculator-v0": 4, "agentgspo/CodeForces-v0": 2}  # CodeForces: each episode judges in bwrap


@pytest.fixture(scope="module")
def evaluations(tmp_path_factory):
    """{env_id: (the episodes vf-eval wrote, the requests the oracle server answered, the env's tools)}."""
    runs = {}
    for env_id, tasks in TASKS.items():
        env = make(env_id)
        oracle, tools = env.unwrapped.oracle, env.unwrapped.tool_schemas
        env.close()
        server = OracleServer(oracle)
        out = tmp_path_factory.mktemp(env_id.split("/")[1])
        command = [
            str(VF_EVAL), "agentgspo-verifiers", "--env.taskset.env-id", env_id, "-n", str(tasks),
            "--model", "oracle", "--client.base-url", server.url, "--client.api-key-var", "AGENTGSPO_NO_KEY",
            "--no-push", "--no-rich", "-o", str(out),
        ]  # fmt: skip
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ)
        runs[env_id] = (process, server, out, tools)
    results = {}
    for env_id, (process, server, out, tools) in runs.items():
        try:
            _, stderr = process.communicate(timeout=300)
        finally:
            server.close()
        assert process.returncode == 0, stderr[-4000:]
        (traces,) = out.glob("*/traces.jsonl")
        results[env_id] = ([json.loads(line) for line in traces.read_text().splitlines()], server.requests, tools)
    return results


@pytest.mark.slow
@pytest.mark.parametrize("env_id", list(TASKS))
def test_vf_eval_scores_the_oracle_one_on_every_task(evaluations, env_id):
    episodes, _, _ = evaluations[env_id]
    assert len(episodes) == TASKS[env_id] and all(e["ok"] and not e["errors"] for e in episodes)
    traces = [trace for episode in episodes for trace in episode["traces"]]
    assert [t["rewards"]["env_reward"]["score"] for t in traces] == [1.0] * TASKS[env_id]
    assert all(t["metrics"]["completed"] == 1.0 for t in traces)
    assert sorted(e["task"]["data"]["seed"] for e in episodes) == list(range(TASKS[env_id]))


@pytest.mark.parametrize("env_id", list(TASKS))
def test_tools_reach_the_model_as_openai_tools_and_come_back_as_tool_calls(evaluations, env_id):
    _, requests, tools = evaluations[env_id]
    assert requests and all(request["tools"] == tools for request in requests)
    for request in requests:
        calls = {c["id"]: c["function"]["name"] for m in request["messages"] for c in m.get("tool_calls") or []}
        answers = [m for m in request["messages"] if m["role"] == "tool"]
        assert [calls.get(m["tool_call_id"]) for m in answers] == [m["name"] for m in answers]
    assert any(m["role"] == "tool" for request in requests for m in request["messages"])


class EndingEnv(ChatEnv):
    """Ends the episode at the first answer with the stop reason it was made with, and pays 1.0 for it."""

    def __init__(self, ending: str = "completed"):
        super().__init__()
        self.ending = ending

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return [{"role": "user", "content": "Say something."}], {}

    def respond(self, action):
        return [], 1.0, True, False, {"stop_reason": self.ending, "verdict": "JE"}


agentgspo.register("vfexport/Ending-v0", entry_point=EndingEnv)


@pytest.fixture(scope="module")
def answering_server():
    """A real OpenAI-compatible server whose model answers "done" (one for the module: a server takes ~0.5 s to
    shut down)."""
    with OracleServer(lambda messages: "done") as server:
        yield server


@pytest.mark.parametrize("stop_reason", list(ENDINGS))
def test_only_endings_the_table_trains_and_counts_are_scored(stop_reason, answering_server):
    """Every row of ENDINGS, as the env's own ending, through the harness's episode loop and a real OpenAI server:
    an ending our runner does not train or count (judge_error, env_timeout, ...) is not the model's doing, so the
    harness raises (verifiers then records the rollout as failed, unscored) rather than pay the env's 1.0."""
    import openai

    data = AgentgspoData(
        name="vfexport/Ending-v0#3", prompt=[], env_id="vfexport/Ending-v0", env_kwargs={"ending": stop_reason}, seed=3
    )

    async def play(url: str) -> dict:
        async with openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0) as client:
            return await play_episode(client, "oracle", data, None)

    requests = len(answering_server.requests)
    if ENDINGS[stop_reason].trained and ENDINGS[stop_reason].counted:
        assert asyncio.run(play(answering_server.url)) == {"reward": 1.0, "stop_reason": stop_reason, "turns": 1}
    else:
        expected = rf"vfexport/Ending-v0 \(seed 3\) .* stop_reason '{stop_reason}', .*neither trains nor counts"
        with pytest.raises(RuntimeError, match=expected + r"(?s:.*)retries.*'verdict': 'JE'"):
            asyncio.run(play(answering_server.url))
    assert len(answering_server.requests) == requests + 1  # the episode was played: one model turn
