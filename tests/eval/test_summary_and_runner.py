"""The summary's bookkeeping (judge and env errors excluded, never counted as failures) and the runner's
concurrency limit."""

from __future__ import annotations

import asyncio

import pytest

from agentgspo.eval.summary import summarize


def _result(
    problem: str,
    sample: int,
    accepted: bool,
    rating: int | None = 1200,
    stop: str = "completed",
    verdicts=("AC",),
    judge_errors: int = 0,
) -> dict:
    return {
        "problem_id": problem,
        "sample": sample,
        "accepted": accepted,
        "rating": rating,
        "tags": ["dp"],
        "title": problem,
        "stop_reason": stop,
        "verdict": "AC" if accepted else (verdicts[-1] if verdicts else "none"),
        "verdicts": list(verdicts),
        "judge_errors": judge_errors,
    }


def test_judge_and_env_errors_are_excluded_and_reported_not_counted_as_failures():
    results = [
        _result("A", 0, True),
        _result("A", 1, False, stop="judge_error", verdicts=(), judge_errors=3),
        _result("B", 0, False, verdicts=("WA",)),
        _result("B", 1, False, stop="env_error", verdicts=()),
        _result("C", 0, True, rating=None),
        _result("C", 1, False, rating=None, verdicts=("TLE",), judge_errors=1),
    ]
    summary = summarize(results, [1, 2])
    # A: 1 counted attempt (1 correct); B: 1 (0); C: 2 (1): pass@1 = (1 + 0 + 1/2) / 3; pass@2 needs n >= 2 everywhere.
    assert summary["pass@1"] == pytest.approx(0.5) and summary["pass@2"] is None
    assert summary["excluded"] == {"judge_error": 1, "env_error": 1} and summary["counted_attempts"] == 4
    assert summary["judge_error_rate"] == pytest.approx(2 / 6)  # attempts that met a judge error
    assert summary["verdicts"] == {"AC": 2, "WA": 1, "TLE": 1}
    assert summary["rating_fit"]["problems"] == 2  # unrated C and excluded attempts are left out of the fit
    assert summary["problems_without_counted_attempts"] == []
    # D's only attempt met a judge error: D leaves pass@k's mean, and the summary names it.
    with_d = summarize(results + [_result("D", 0, False, stop="judge_error", verdicts=(), judge_errors=3)], [1])
    assert with_d["pass@1"] == pytest.approx(0.5) and with_d["problems_without_counted_attempts"] == ["D"]
    assert [r["group"] for r in summary["by_rating"]] == ["1200", "unrated"]


def test_every_ending_the_table_does_not_count_is_out_of_pass_at_k_and_each_endings_share_is_reported():
    # Before: only judge_error and env_error were left out; a sampler failure or a hung env call counted as a
    # failed solution.
    results = [
        _result("A", 0, True),
        _result("A", 1, False, stop="sampler_error", verdicts=()),
        _result("B", 0, False, stop="env_timeout", verdicts=()),
        _result("B", 1, False, stop="max_turns", verdicts=("WA",)),
    ]
    summary = summarize(results, [1])
    assert summary["pass@1"] == pytest.approx(0.5)  # A 1/1, B 0/1
    assert summary["excluded"] == {"sampler_error": 1, "env_timeout": 1} and summary["counted_attempts"] == 2
    assert summary["stop_frac"] == {"completed": 0.25, "sampler_error": 0.25, "env_timeout": 0.25, "max_turns": 0.25}
    assert summary["rating_fit"]["problems"] == 2


def test_the_eval_env_has_what_the_runner_reads_and_the_shipped_agents_play_per_sample():
    """CodeForces-v0's env has every member of ``JudgedEnv`` (the runner reads them as declared, without probing);
    the shipped-solution agents are ``PerSampleAgent``s, any other agent plays every sample itself."""
    from agentgspo.environments.registry import make
    from agentgspo.eval.agents import ShippedSolutionAgent, load_renderer
    from agentgspo.eval.runner import ENV_ID, JudgedEnv, PerSampleAgent

    env = make(ENV_ID, data_files=None)
    try:
        missing = [name for name in JudgedEnv.__annotations__ if not hasattr(env.unwrapped, name)]
        assert not missing
        assert isinstance(env.unwrapped.problem_set.skipped_rows, list)
    finally:
        env.close()
    assert isinstance(ShippedSolutionAgent("wrong", [], load_renderer("tiny")), PerSampleAgent)
    assert not isinstance(object(), PerSampleAgent)


def test_attempts_run_at_most_concurrency_at_once(tmp_path):
    from agentgspo.eval.agents import ShippedSolutionAgent, load_renderer
    from agentgspo.eval.runner import evaluate, load_tasks
    from agentgspo.eval.store import ResultsStore
    from agentgspo.rollouts.rollout import RolloutConfig

    class Counting(ShippedSolutionAgent):
        in_flight = peak = 0

        def for_sample(self, sample):
            return self

        async def sample(self, request):
            Counting.in_flight += 1
            Counting.peak = max(Counting.peak, Counting.in_flight)
            try:
                await asyncio.sleep(0.05)  # hold the turn so that unlimited attempts would overlap here
                return await super().sample(request)
            finally:
                Counting.in_flight -= 1

    env_kwargs = {"data_files": None}
    tasks, _, _ = load_tasks(env_kwargs)
    agent = Counting("wrong", tasks, load_renderer("tiny"))
    played, summary, _ = evaluate(
        agent,
        agent.renderer,
        ResultsStore(tmp_path, {}),
        tasks,
        env_kwargs,
        indices=[0, 2, 3],
        samples=2,
        ks=[1],
        config=RolloutConfig(max_context=1 << 20),
        concurrency=2,
        progress=False,
    )
    assert played == 6 and summary["pass@1"] == 0.0
    assert Counting.peak == 2


def test_the_summary_counts_where_each_submissions_program_came_from():
    judged = _result("A", 0, True, verdicts=("WA", "AC"))
    judged["submissions"] = [{"verdict": "WA", "compile_cache": "miss"}, {"verdict": "AC", "compile_cache": "hit"}]
    python = _result("B", 0, False, verdicts=("WA",))
    python["submissions"] = [{"verdict": "WA", "compile_cache": "off"}]
    older = _result("C", 0, False, verdicts=("WA",))  # a results.jsonl line written before the field existed
    older["submissions"] = [{"verdict": "WA"}]
    assert summarize([judged, python, older], [1])["compile_cache"] == {"miss": 1, "hit": 1, "off": 1}
