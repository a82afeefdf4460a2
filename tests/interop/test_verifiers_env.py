"""verifiers/Env-v0: a verifiers environment (our fixture vf_tool_quiz, written in verifiers' public API: MCP tools,
an Env that plays the user between two rounds, a rubric reward in {0, 0.5, 1}) played by agentgspo's runner.

Real pieces throughout: verifiers' Env, its interception server, its null harness program (prepared by uv) and its
MCP tool server in subprocesses; agentgspo's CLI and runner. The module holds one env of the quiz's config for its
whole run, so the CLI's envs share its host (one verifiers serving(), one tool server) as a training run's do.
"""

from __future__ import annotations

import json
import re
import threading

import pytest

pytest.importorskip("verifiers.v1", reason="verifiers/Env-v0 needs the verifiers extra")

from token_exact import assert_token_exact  # noqa: E402  tests/token_exact.py

from agentgspo.cli import main  # noqa: E402
from agentgspo.environments.env_checker import play  # noqa: E402
from agentgspo.environments.interop import verifiers_host  # noqa: E402
from agentgspo.environments.registry import make  # noqa: E402
from agentgspo.core.sampling import SamplingParams
from agentgspo.policy.base import ScriptedPolicy  # noqa: E402
from agentgspo.rollouts.rollout import RolloutConfig, RolloutRunner  # noqa: E402
from agentgspo.core.trajectory import read_jsonl  # noqa: E402
from .verifiers_support import FIXTURES  # noqa: E402

# The whole module is slow: it starts vLLM, Ray, DeepSpeed or a training run (docs/contributing.md).
pytestmark = pytest.mark.slow

QUIZ = {
    "taskset": "vf_tool_quiz",
    "path": str(FIXTURES),
    "oracle": "vf_tool_quiz.policies:oracle",
    "wrong": "vf_tool_quiz.policies:wrong",
}


@pytest.fixture(scope="module")
def quiz():
    """The quiz env, reset once so its tools are known; held open while the module runs."""
    env = make("verifiers/Env-v0", **QUIZ)
    yield env
    env.close()
    assert not verifiers_host.live_threads(), "a verifiers host thread outlived its last env"


@pytest.fixture(scope="module")
def wrong_episode(quiz):
    """An episode of the quiz's wrong policy (answers 0, no tools), played directly: (reward, terminated, history)."""
    return play(quiz, quiz.unwrapped.wrong, seed=1)


@pytest.fixture(scope="module")
def tools(quiz, wrong_episode):
    return quiz.unwrapped.tool_schemas


def rollout(tmp_path, capsys, *args: str) -> tuple[dict, list]:
    status = main(
        ["rollout", "--env", "verifiers/Env-v0", "--env-kwargs", json.dumps(QUIZ), "--out", str(tmp_path), *args]
    )
    assert status == 0
    out = capsys.readouterr().out
    return json.loads(out[out.index("{") :]), read_jsonl(tmp_path / "trajectories.jsonl")


def test_the_quiz_offers_its_mcp_tools_as_openai_function_schemas(tools):
    assert [t["function"]["name"] for t in tools] == ["quiz_add", "quiz_multiply"]
    assert tools[0]["type"] == "function" and tools[0]["function"]["parameters"]["required"] == ["a", "b"]


def test_oracle_rollout_through_the_cli_scores_one_and_is_token_exact(tmp_path, capsys, tools, renderer):
    summary, trajectories = rollout(
        tmp_path, capsys, "--policy", "oracle", "--episodes", "1", "--group-size", "1", "--max-turns", "6"
    )
    assert summary["reward_mean"] == 1.0 and summary["stop_reasons"] == {"completed": 1}, summary
    for trajectory in trajectories:
        roles = [m["role"] for m in trajectory.messages]
        assert roles == ["system", "user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"]
        assert trajectory.turn_rewards == [0.0, 0.0, 0.0, 1.0] and trajectory.matches_full_render
        assert_token_exact(trajectory, renderer, tools)


def test_tiny_policy_rollout_through_the_cli_is_token_exact(tmp_path, capsys, tools, renderer):
    summary, trajectories = rollout(
        tmp_path, capsys, "--policy", "tiny", "--episodes", "1", "--group-size", "2", "--max-turns", "2",
        "--max-new-tokens", "24",
    )  # fmt: skip
    assert summary["episodes"] == 2 and "env_error" not in summary["stop_reasons"], trajectories[0].metadata
    for trajectory in trajectories:
        assert trajectory.num_turns >= 1 and trajectory.reward < 1.0
        assert_token_exact(trajectory, renderer, tools)


def test_a_wrong_policy_scores_less_than_the_oracle(wrong_episode):
    reward, terminated, history = wrong_episode
    assert (reward, terminated) == (0.0, True)
    assert [m["role"] for m in history] == ["system", "user", "assistant", "user", "assistant"]


def test_a_runner_cut_scores_the_partial_trajectory(quiz, renderer):
    """Cut after round one (max_turns=2): verifiers scores the stopped run, round one right = 0.5."""
    config = RolloutConfig(group_size=1, max_turns=2, max_context=2048, sampling=SamplingParams(max_new_tokens=64))
    runner = RolloutRunner(
        lambda: make("verifiers/Env-v0", **QUIZ), ScriptedPolicy(quiz.unwrapped.oracle, renderer), renderer, config
    )
    (trajectory,) = runner.run_sync([2])
    assert (trajectory.stop_reason, trajectory.reward, trajectory.turn_rewards) == ("max_turns", 0.5, [0.0, 0.5])


def test_a_broken_env_is_an_env_error_naming_the_cause(quiz, renderer):
    broken = {"fail": True, "taskset": {"tools": {"url": "http://127.0.0.1:9/mcp"}}}  # its tool server unstarted
    config = RolloutConfig(group_size=1, max_turns=6, max_context=2048)
    runner = RolloutRunner(
        lambda: make("verifiers/Env-v0", **{**QUIZ, "config": broken}),
        ScriptedPolicy(quiz.unwrapped.oracle, renderer),
        renderer,
        config,
    )
    (trajectory,) = runner.run_sync([0])
    assert trajectory.stop_reason == "env_error"
    assert "ended before its first model call" in trajectory.metadata["error"]
    assert "the quiz is broken" in trajectory.metadata["error"]


def test_a_failed_run_is_an_error_and_a_scored_one_pays_its_weighted_rewards():
    """score_episode on verifiers' own records: a run whose scoring raised (recorded as verifiers records it) is an
    error, never 0; a scored run pays the sum of its weighted rewards."""
    import verifiers.v1 as vf
    from verifiers.v1.errors import TaskError

    def run(seat):
        trace = vf.Trace(
            task=vf.TraceTask(type="QuizTask", data=vf.TaskData(idx=4)),
            agent=vf.AgentInfo(config=vf.AgentConfig(), name=seat),
        )
        trace.ok = True
        return trace

    failed = run("player")
    failed.record_error(TaskError("task QuizTask scoring: ZeroDivisionError: division by zero"))
    with pytest.raises(verifiers_host.VerifiersEpisodeError, match="task 4 failed: TaskError: .*ZeroDivisionError"):
        verifiers_host.score_episode(vf.Episode(task=failed.task, traces=[failed]), "player", 4)
    scored, other = run("player"), run("judge")
    scored.record_reward("rounds_right", 0.5, 1.0)
    scored.record_reward("style", 1.0, 0.5)
    other.record_reward("ignored", 1.0)
    reward, info = verifiers_host.score_episode(vf.Episode(task=scored.task, traces=[scored, other]), "player", 4)
    assert reward == 1.0 and info["verifiers"]["rewards"] == {"rounds_right": 0.5, "style": 1.0}
    with pytest.raises(verifiers_host.VerifiersEpisodeError, match="no run of seat 'player'"):
        verifiers_host.score_episode(vf.Episode(task=other.task, traces=[other]), "player", 4)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"taskset": "no_such_taskset"}, "taskset 'no_such_taskset' not found"),
        ({**QUIZ, "seat": "playr"}, "no seat 'playr'. Did you mean 'player'?"),
        ({**QUIZ, "config": {"id": "user-sim"}}, "name the one the policy plays"),
        ({**QUIZ, "config": {"id": "user-sim"}, "seat": "assistant"}, "seat 'user' has no model of its own"),
        ({**QUIZ, "oracle": "vf_tool_quiz.policies:nothing"}, "oracle: cannot import 'vf_tool_quiz.policies:nothing'"),
        ({**QUIZ, "config": {"taskset": {"num_taks": 3}}}, "num_taks"),
        ({"taskset": "vf_legacy_env", "path": str(FIXTURES)}, "'vf_legacy_env' is written for verifiers' legacy API"),
    ],
)
def test_a_bad_configuration_fails_at_construction_with_the_fix(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make("verifiers/Env-v0", **kwargs)


def test_a_hung_env_call_is_cut_by_the_env_call_timeout_and_close_leaks_no_thread(quiz, renderer):
    """The quiz told to hang never makes its first model call, so reset() never returns: the runner's
    env_call_timeout ends the episode (env_timeout) and the env's close() stops its host (a config of its own),
    joining the loop thread, even while the host was still starting."""
    before = set(verifiers_host.live_threads())
    config = RolloutConfig(group_size=1, max_turns=6, max_context=2048, env_call_timeout_s=2.0)
    closed = threading.Event()

    # Its own config, so its own host; its tool server given as a URL is not started (the quiz hangs first).
    hanging = {"hang": True, "taskset": {"tools": {"url": "http://127.0.0.1:9/mcp"}}}

    def make_env():
        env = make("verifiers/Env-v0", **{**QUIZ, "config": hanging})
        close = env.close
        env.close = lambda: (close(), closed.set())
        return env

    runner = RolloutRunner(make_env, ScriptedPolicy(quiz.unwrapped.oracle, renderer), renderer, config)
    (trajectory,) = runner.run_sync([3])
    assert (trajectory.stop_reason, trajectory.token_ids) == ("env_timeout", []), trajectory.metadata
    assert closed.wait(timeout=180), "the runner never closed the env"
    assert not [t for t in verifiers_host.live_threads() if t not in before]
