"""The results store (append, truncated last line, duplicate lines, settings pinned, one eval per folder at a time),
resuming an eval killed mid-run, and report.md's tables (cells escaped)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from agentgspo.eval.store import ResultsStore

IDENTITY = {"problems": "starter", "agent": "reference"}


def _row(problem: str, sample: int) -> dict:
    return {"problem_id": problem, "sample": sample, "accepted": True}


def test_appends_survive_reopening_and_a_cut_last_line_is_dropped(tmp_path):
    store = ResultsStore(tmp_path, IDENTITY)
    store.append(_row("A", 0))
    store.append(_row("A", 1))
    with open(store.path, "a") as f:
        f.write('{"problem_id": "B", "sam')  # a kill in the middle of a write
    reopened = ResultsStore(tmp_path, IDENTITY)
    assert reopened.done() == {("A", 0), ("A", 1)}
    reopened.append(_row("B", 0))
    assert [json.loads(line)["problem_id"] for line in store.path.read_text().splitlines()] == ["A", "A", "B"]


def test_a_whole_last_line_without_its_newline_is_kept_and_completed(tmp_path):
    store = ResultsStore(tmp_path, IDENTITY)
    store.path.write_text(json.dumps(_row("A", 0)))
    reopened = ResultsStore(tmp_path, IDENTITY)
    reopened.append(_row("A", 1))
    assert ResultsStore(tmp_path, IDENTITY).done() == {("A", 0), ("A", 1)}


def test_a_damaged_middle_line_is_an_error_naming_it(tmp_path):
    store = ResultsStore(tmp_path, IDENTITY)
    store.path.write_text('{"problem_id": "A", "sample": 0}\nnot json\n{"problem_id": "A", "sample": 1}\n')
    with pytest.raises(ValueError, match=r"results.jsonl:2 is not valid JSON"):
        ResultsStore(tmp_path, IDENTITY)


def test_other_settings_are_refused_once_results_exist(tmp_path):
    ResultsStore(tmp_path, IDENTITY).append(_row("A", 0))
    with pytest.raises(ValueError, match="agent differ"):
        ResultsStore(tmp_path, {**IDENTITY, "agent": "wrong"})
    ResultsStore(tmp_path, IDENTITY, {"samples": 5})  # samples and k may change: more samples resume


def _attempt(problem: str, sample: int, accepted: bool, title: str = "T", tags=("dp",)) -> dict:
    return {
        "problem_id": problem,
        "sample": sample,
        "accepted": accepted,
        "rating": 1200,
        "tags": list(tags),
        "title": title,
        "stop_reason": "completed",
        "verdict": "AC" if accepted else "WA",
        "verdicts": ["AC" if accepted else "WA"],
        "judge_errors": 0,
    }


def test_duplicate_attempt_lines_keep_the_first_and_are_counted_and_warned_about(tmp_path, capsys):
    from agentgspo.eval.summary import summarize

    store = ResultsStore(tmp_path, IDENTITY)
    rows = [
        _attempt("A", 0, True),
        _attempt("A", 1, False),
        _attempt("B", 0, False),
        _attempt("A", 0, True),
        _attempt("B", 0, True),
    ]
    store.path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # e.g. two runs into one --out
    capsys.readouterr()
    reopened = ResultsStore(tmp_path, IDENTITY)
    # A: 1 of 2 (not 2 of 3: the copy inflates n), B: 0 of 1 (the first line wins): pass@1 = (0.5 + 0) / 2
    assert summarize(reopened.results, [1])["pass@1"] == pytest.approx(0.25)
    assert [(r["problem_id"], r["sample"], r["accepted"]) for r in reopened.results] == [
        ("A", 0, True),
        ("A", 1, False),
        ("B", 0, False),
    ]
    assert reopened.dropped_duplicates == 2 and store.dropped_duplicates == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "2 duplicate" in err and str(reopened.path) in err
    assert len(reopened.path.read_text().splitlines()) == 5  # the file itself is left as it was


def test_results_without_their_eval_json_are_refused(tmp_path):
    ResultsStore(tmp_path, IDENTITY).append(_row("A", 0))
    (tmp_path / "eval.json").unlink()
    with pytest.raises(ValueError, match=r"results.jsonl.*eval.json.*another --out.*restore"):
        ResultsStore(tmp_path, {**IDENTITY, "agent": "wrong"})
    assert not (tmp_path / "eval.json").exists()  # nothing written over the evidence
    (tmp_path / "results.jsonl").write_text("")
    ResultsStore(tmp_path, IDENTITY)  # an empty results file: nothing to mix with


_HOLD = (
    "import sys; from agentgspo.eval.store import ResultsStore; s = ResultsStore(sys.argv[1], {'agent': 'x'}); "
    "print('ready', flush=True); sys.stdin.read()"
)


def test_a_second_eval_into_a_folder_in_use_fails_at_once(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready", holder.stderr.read()
        started = time.monotonic()
        with pytest.raises(ValueError, match=rf"in use by another eval \(pid {holder.pid}\).*another --out"):
            ResultsStore(tmp_path, {"agent": "x"})
        assert time.monotonic() - started < 5  # no waiting for the other eval
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    store = ResultsStore(tmp_path, {"agent": "x"})  # free once the other eval has ended
    assert ResultsStore(tmp_path, {"agent": "x"}).done() == set()  # this process may reopen its own folder
    store.close()
    other = subprocess.run(
        [sys.executable, "-c", _HOLD, str(tmp_path)], input="", capture_output=True, text=True, timeout=60
    )
    assert other.returncode == 0 and other.stdout.strip() == "ready", other.stderr[-2000:]


def test_report_md_tables_escape_pipes_and_newlines_in_cells():
    import re

    from agentgspo.eval.report import markdown
    from agentgspo.eval.summary import summarize

    rows = [_attempt("A", 0, True, title="Left | Right\nsecond line", tags=("a|b", "dp")), _attempt("B", 0, False)]
    text = markdown(summarize(rows, [1]), {"agent_label": "chat | model"})
    tables = [line for line in text.splitlines() if line.startswith("|")]
    widths = {len(re.findall(r"(?<!\\)\|", line)) for line in tables if "problem_id" in line or "Left" in line}
    assert widths == {8}, tables  # 7 columns: 8 unescaped bars on the header and on the tricky row alike
    assert "Left \\| Right second line" in text and "a\\|b" in text
    tag_rows = [line for line in tables if line.startswith("| a")]
    assert tag_rows == ["| a\\|b | 1 | 1 | 1.000 |"], tables


def test_report_md_shows_dropped_duplicate_lines():
    from agentgspo.eval.report import markdown
    from agentgspo.eval.summary import summarize

    summary = summarize([_attempt("A", 0, True)], [1])
    assert "duplicate" not in markdown(summary, {"agent_label": "x"})
    assert "- **duplicate result lines ignored**: 3" in markdown(
        {**summary, "dropped_duplicates": 3}, {"agent_label": "x"}
    )


def _complete_lines(path) -> list[bytes]:
    if not path.exists():
        return []
    return [line for line in path.read_bytes().split(b"\n")[:-1] if line.strip()]


@pytest.mark.slow
def test_an_eval_killed_mid_run_resumes_with_only_the_missing_attempts(tmp_path):
    out = tmp_path / "eval"
    command = [
        sys.executable,
        "-m",
        "agentgspo.cli",
        "eval",
        "--problems",
        "starter",
        "--agent",
        "reference",
        "--samples",
        "3",
        "--k",
        "1,3",
        "--concurrency",
        "1",
        "--out",
        str(out),
        "--no-progress",
    ]
    total = 5 * 3
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    results = out / "results.jsonl"
    try:
        while process.poll() is None and len(_complete_lines(results)) < 3:  # wait for 3 finished attempts
            time.sleep(0.05)
        assert process.poll() is None, process.stderr.read().decode()[-2000:]
        process.send_signal(signal.SIGKILL)
        process.wait()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    before = _complete_lines(results)
    assert 3 <= len(before) < total
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    summary = json.loads(rerun.stdout[rerun.stdout.index("{") :])
    assert summary["played"] == total - len(before)  # only the missing work was done
    after = _complete_lines(results)
    assert after[: len(before)] == before and len(after) == total
    keys = [(json.loads(line)["problem_id"], json.loads(line)["sample"]) for line in after]
    assert len(set(keys)) == total
    assert summary["pass@1"] == 1.0 and summary["pass@3"] == 1.0
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert json.loads(again.stdout[again.stdout.index("{") :])["played"] == 0


def test_more_samples_later_play_only_the_new_ones():
    from agentgspo.eval.runner import pending_attempts

    done = {("A", 0), ("A", 1), ("B", 0)}
    assert pending_attempts(["A", "B"], [0, 1], 3, done) == [(0, 2), (1, 1), (1, 2)]


def test_a_requeueable_attempt_is_not_done_and_its_replay_replaces_it(tmp_path, capsys):
    # Before: every stored line was final, so a sampler failure or hung env call stayed in the eval for good.
    store = ResultsStore(tmp_path, IDENTITY)
    store.append({**_attempt("A", 0, False), "stop_reason": "sampler_error"})
    store.append(_attempt("A", 1, True))
    reopened = ResultsStore(tmp_path, IDENTITY)
    assert reopened.done() == {("A", 1)} and reopened.requeued == 1
    reopened.append(_attempt("A", 0, True))  # the replay
    assert [(r["sample"], r["stop_reason"]) for r in reopened.results] == [(1, "completed"), (0, "completed")]
    capsys.readouterr()
    again = ResultsStore(tmp_path, IDENTITY)  # the file keeps both lines of (A, 0); the final one counts
    assert sorted((r["sample"], r["accepted"]) for r in again.results) == [(0, True), (1, True)]
    assert (again.requeued, again.dropped_duplicates) == (0, 0) and capsys.readouterr().err == ""


@pytest.mark.slow
def test_a_resumed_eval_replays_the_attempts_whose_sampler_failed(tmp_path):
    from agentgspo.eval.agents import ShippedSolutionAgent, load_renderer
    from agentgspo.eval.runner import evaluate, load_tasks
    from agentgspo.rollouts.rollout import RolloutConfig

    class Flaky(ShippedSolutionAgent):
        down = True  # the endpoint is down for the first run's second sample

        def for_sample(self, sample):
            self.sample_index = sample
            return self

        async def sample(self, request):
            if Flaky.down and self.sample_index == 1:
                raise ConnectionError("endpoint unavailable after retries")
            return await super().sample(request)

    env_kwargs = {"data_files": None}
    tasks, _, _ = load_tasks(env_kwargs)
    renderer = load_renderer("tiny")
    config = RolloutConfig(max_context=1 << 20)

    def run():
        agent = Flaky("reference", tasks, renderer)
        return evaluate(
            agent,
            renderer,
            ResultsStore(tmp_path, IDENTITY),
            tasks,
            env_kwargs,
            indices=[0],
            samples=2,
            ks=[1],
            config=config,
            concurrency=1,
            progress=False,
        )

    played, summary, _ = run()
    assert played == 2 and summary["excluded"] == {"sampler_error": 1} and summary["stop_frac"]["sampler_error"] == 0.5
    Flaky.down = False
    played, summary, results = run()  # the same command again
    assert played == 1 and summary["excluded"] == {} and summary["counted_attempts"] == 2
    assert summary["pass@1"] == 1.0 and sorted(r["sample"] for r in results) == [0, 1]


def test_reports_show_the_share_of_each_ending():
    from agentgspo.eval.report import markdown
    from agentgspo.eval.summary import summarize

    rows = [_attempt("A", 0, True), {**_attempt("A", 1, False), "stop_reason": "env_timeout"}]
    text = markdown(summarize(rows, [1]), {"agent_label": "x"})
    assert "- **endings (share of attempts)**: completed 50.0%, env_timeout (not counted) 50.0%" in text
