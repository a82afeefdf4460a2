"""The results store (append, truncated last line, settings pinned) and resuming an eval killed mid-run."""

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


def _complete_lines(path) -> list[bytes]:
    if not path.exists():
        return []
    return [line for line in path.read_bytes().split(b"\n")[:-1] if line.strip()]


@pytest.mark.slow
def test_an_eval_killed_mid_run_resumes_with_only_the_missing_attempts(tmp_path):
    out = tmp_path / "eval"
    command = [sys.executable, "-m", "agentgspo.cli", "eval", "--problems", "starter", "--agent", "reference",
               "--samples", "3", "--k", "1,3", "--concurrency", "1", "--out", str(out), "--no-progress"]
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
    summary = json.loads(rerun.stdout[rerun.stdout.index("{"):])
    assert summary["played"] == total - len(before)  # only the missing work was done
    after = _complete_lines(results)
    assert after[:len(before)] == before and len(after) == total
    keys = [(json.loads(line)["problem_id"], json.loads(line)["sample"]) for line in after]
    assert len(set(keys)) == total
    assert summary["pass@1"] == 1.0 and summary["pass@3"] == 1.0
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert json.loads(again.stdout[again.stdout.index("{"):])["played"] == 0


def test_more_samples_later_play_only_the_new_ones():
    from agentgspo.eval.runner import pending_attempts

    done = {("A", 0), ("A", 1), ("B", 0)}
    assert pending_attempts(["A", "B"], [0, 1], 3, done) == [(0, 2), (1, 1), (1, 2)]
