"""The run folder's guards: settings compared with the saved run's, signals turned into a stop request."""

from __future__ import annotations

import json
import os
import signal

import pytest

from agentgspo.training.run_folder import RunFolderMismatch, StopSignals, check_run_folder

FLAGS = {"seed": "--seed", "lr": "--lr", "out": "--out", "max_minutes": "--max-minutes", "backend": "--backend"}


def _saved(tmp_path, **settings):
    (tmp_path / "config.json").write_text(json.dumps(settings))


def test_a_new_folder_and_the_same_settings_pass(tmp_path):
    assert check_run_folder(tmp_path / "new", {"seed": 0}, command="agentgspo x", flag_of=FLAGS) is None
    _saved(tmp_path, seed=0, lr=1e-4, max_minutes=9.0)
    assert (
        check_run_folder(
            tmp_path,
            {"seed": 0, "lr": 1e-4, "max_minutes": 20.0},
            command="agentgspo x",
            flag_of=FLAGS,
            ignore=["max_minutes"],
        )
        is not None
    )


def test_other_settings_are_refused_naming_each_and_both_ways_on(tmp_path):
    _saved(tmp_path, seed=0, lr=1e-4)
    with pytest.raises(RunFolderMismatch) as caught:
        check_run_folder(tmp_path, {"seed": 1, "lr": 3e-4}, command="agentgspo x", flag_of=FLAGS)
    message = str(caught.value)
    assert "--seed: 0 in the folder, 1 in this command" in message and "--lr: 0.0001 in the folder" in message
    assert f"resume it as saved: agentgspo x --out {tmp_path} --lr 0.0001 --seed 0" in message
    assert "pass another --out" in message


def test_a_setting_the_saved_run_predates_counts_as_its_default(tmp_path):
    _saved(tmp_path, seed=0)
    defaults = {"seed": 0, "backend": "hf"}
    assert check_run_folder(tmp_path, {"seed": 0, "backend": "hf"}, command="x", flag_of=FLAGS, defaults=defaults)
    with pytest.raises(RunFolderMismatch, match="--backend: 'hf' in the folder, 'vllm' in this command"):
        check_run_folder(tmp_path, {"seed": 0, "backend": "vllm"}, command="x", flag_of=FLAGS, defaults=defaults)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_first_signal_asks_to_stop_the_second_stops_at_once(signum):
    before = signal.getsignal(signum)
    with StopSignals(announce=False) as signals:
        os.kill(os.getpid(), signum)  # delivered to this (main) thread before kill returns to Python code
        assert signals.signum == signum and signals.name == signal.Signals(signum).name
        signals._received_at -= StopSignals.SAME_REQUEST_S  # a second request, not the same one delivered twice
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signum)
    assert signal.getsignal(signum) is before


def test_a_signal_delivered_twice_at_once_is_one_request_another_signal_is_a_second():
    """A Ctrl-C reaches the process group and torchrun's agent forwards it again to each worker: the worker must
    still save its checkpoint; a different signal in that moment is a second request."""
    with StopSignals(announce=False) as signals:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # the launcher's copy of the same request
        assert signals.signum == signal.SIGTERM
        with pytest.raises(KeyboardInterrupt, match="SIGINT again"):
            os.kill(os.getpid(), signal.SIGINT)


def test_a_run_folder_written_before_the_modules_moved_is_the_same_run(tmp_path, capsys):
    """tests/fixtures/run_folder_0.2.0: a finished quickstart's config.json and summary.json, written by the tree
    before agentgspo.core and agentgspo.models (issue 36). The same command today takes it as its own run (no
    mismatch: the settings name no module path), so it reports it finished instead of refusing it."""
    import shutil
    from pathlib import Path

    from agentgspo.recipes.quickstart import main, reached_the_target

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "run_folder_0.2.0"
    shutil.copytree(fixture, tmp_path / "run")
    flags = ["--logp-old", "recompute", "--steps", "12", "--max-minutes", "100000", "--seed", "0"]
    summary = json.loads((fixture / "summary.json").read_text())
    assert main([*flags, "--out", str(tmp_path / "run")]) == (0 if reached_the_target(summary) else 1)
    assert "holds a finished run: nothing to do" in capsys.readouterr().out

    assert main([*flags[:-1], "1", "--out", str(tmp_path / "run")]) != 0  # another run's folder is still refused
    refused = capsys.readouterr()
    assert "already holds a run with other settings" in refused.out + refused.err and "--seed: 0" in refused.err
