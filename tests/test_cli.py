"""The `agentgspo` command: check-env, rollout (tiny and oracle policies), bad input as exit status 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentgspo.cli import main
from agentgspo.core.trajectory import read_jsonl


def test_check_env_calculator_exits_zero(capsys):
    assert main(["check-env", "agentgspo/Calculator-v0"]) == 0
    assert "ok   agentgspo/Calculator-v0" in capsys.readouterr().out


def test_console_script_is_installed_and_runs_check_env():
    script = Path(sys.executable).with_name("agentgspo")
    result = subprocess.run(
        [str(script), "check-env", "agentgspo/Calculator-v0"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "ok   agentgspo/Calculator-v0" in result.stdout


@pytest.mark.parametrize("command", [["check-env"], ["rollout", "--out", "unused", "--env"]])
def test_unknown_env_id_exits_two_with_close_matches(command, capsys, tmp_path):
    assert main([*command, "agentgspo/Calculater-v0"]) == 2
    err = capsys.readouterr().err
    assert "unknown env id 'agentgspo/Calculater-v0'" in err and "Did you mean: agentgspo/Calculator-v0" in err


def test_unknown_command_suggests_close_ones(capsys):
    assert main(["chek-env"]) == 2
    assert "Did you mean: check-env" in capsys.readouterr().err


def rollout(tmp_path, policy, capsys, *extra):
    out = tmp_path / policy
    status = main(
        [
            "rollout",
            "--env",
            "agentgspo/Calculator-v0",
            "--policy",
            policy,
            "--episodes",
            "2",
            "--group-size",
            "2",
            "--out",
            str(out),
            *extra,
        ]
    )
    capsys.readouterr()
    assert status == 0
    return read_jsonl(out / "trajectories.jsonl")  # validates every record


def test_rollout_with_the_tiny_policy_writes_valid_records(tmp_path, capsys, renderer):
    trajectories = rollout(tmp_path, "tiny", capsys, "--max-new-tokens", "16")
    assert len(trajectories) == 4
    assert [(t.seed, t.sample_id) for t in trajectories] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for t in trajectories:
        assert t.env_id == "agentgspo/Calculator-v0"
        assert t.num_turns >= 1 and t.stop_reason in ("completed", "max_tokens", "max_turns", "parse_error")
        assert len(t.token_ids) == len(t.loss_mask) == len(t.sampler_logprobs)
        for start, end in t.turn_spans:
            assert 1 <= end - start <= 16 and t.loss_mask[start:end] == [1] * (end - start)
            assert all(lp <= 0.0 for lp in t.sampler_logprobs[start:end])
        assert t.num_sampled_tokens == sum(end - start for start, end in t.turn_spans)
        assert isinstance(t.reward, float) and t.matches_full_render is True
        assert [m["role"] for m in t.messages].count("assistant") == t.num_turns


def test_rollout_with_the_oracle_scores_one(tmp_path, capsys):
    trajectories = rollout(tmp_path, "oracle", capsys)  # default --max-new-tokens: the tool call is ~25 ids
    assert len(trajectories) == 4
    assert all(t.reward == 1.0 and t.stop_reason == "completed" and t.num_turns == 2 for t in trajectories)


def test_top_level_help_lists_the_commands(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("check-env", "check-template", "rollout"))
    assert main([]) == 2


@pytest.mark.parametrize("argv", [["--help"], ["judge", "--help"]])
def test_cli_help_does_not_import_torch(argv):
    code = (
        "import sys\nfrom agentgspo.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert result.returncode == 0, result.stderr


def test_errors_go_to_stderr_so_stdout_stays_clean(tmp_path, capsys):
    """`check-template --json` and `rollout` print errors on stderr: stdout is for results (JSON) only."""
    import agentgspo

    assert main(["check-template", str(tmp_path / "missing"), "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "missing" in err and "save_pretrained" in err

    class NoOracleEnv(agentgspo.ChatEnv):
        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return [{"role": "user", "content": "hi"}], {}

        def respond(self, action):
            return [], 0.0, True, False, {}

    agentgspo.register("test/NoOracle-v0", entry_point=NoOracleEnv)
    assert main(["rollout", "--env", "test/NoOracle-v0", "--policy", "oracle", "--out", str(tmp_path / "o")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "has no oracle policy" in err


def test_rollout_checks_the_output_folder_before_playing(tmp_path, capsys):
    """An --out that cannot be created fails at once, not after the whole rollout was played and thrown away."""
    import agentgspo

    resets = []

    class CountingEnv(agentgspo.ChatEnv):
        oracle = staticmethod(lambda messages: "done")

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            resets.append(seed)
            return [{"role": "user", "content": "hi"}], {}

        def respond(self, action):
            return [], 1.0, True, False, {}

    agentgspo.register("test/Counting-v0", entry_point=CountingEnv)
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "runs"
    assert main(["rollout", "--env", "test/Counting-v0", "--policy", "oracle", "--out", str(out)]) == 2
    assert str(out) in capsys.readouterr().err and resets == []


@pytest.mark.parametrize("requeue_limit, stop_reason", [("1", "completed"), ("0", "infra_error")])
def test_rollout_replays_episodes_lost_to_infrastructure_up_to_its_requeue_limit(tmp_path, requeue_limit, stop_reason):
    import agentgspo
    from agentgspo.environments.env import EnvInfrastructureError

    attempts: dict = {}

    class LosesItsHostOnce(agentgspo.ChatEnv):
        oracle = staticmethod(lambda messages: "done")

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            attempts[seed] = attempts.get(seed, 0) + 1
            if attempts[seed] == 1:
                raise EnvInfrastructureError(f"the host of seed {seed} went away")
            return [{"role": "user", "content": "hi"}], {}

        def respond(self, action):
            return [], 1.0, True, False, {}

    env_id = f"test/LosesItsHostOnce{requeue_limit}-v0"  # an id per case: registering is idempotent
    agentgspo.register(env_id, entry_point=LosesItsHostOnce)
    out = tmp_path / "rollout"
    command = ["rollout", "--env", env_id, "--policy", "oracle", "--episodes", "2"]
    assert main([*command, "--group-size", "1", "--requeue-limit", requeue_limit, "--out", str(out)]) == 0
    records = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert [r["stop_reason"] for r in records] == [stop_reason] * 2
    assert [len(r["metadata"].get("requeued", [])) for r in records] == [int(requeue_limit)] * 2


@pytest.mark.parametrize("command", [["search-server"], ["sandbox-server", "--token", "t"]])
@pytest.mark.parametrize("port", ["-5", "70000"])
def test_a_port_out_of_range_is_a_usage_error_not_a_traceback(command, port, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--port", port])
    assert exit_info.value.code == 2 and "--port" in capsys.readouterr().err


def test_policy_folder_that_is_not_a_model_names_the_folder_and_what_a_model_folder_holds(tmp_path, capsys):
    empty = tmp_path / "notes"
    empty.mkdir()
    assert (
        main(["rollout", "--env", "agentgspo/Calculator-v0", "--policy", str(empty), "--out", str(tmp_path / "o")]) == 2
    )
    err = capsys.readouterr().err
    assert f"policy folder '{empty}' holds no model" in err and "config.json" in err and "tokenizer.json" in err
    assert "sentencepiece" not in err and "tiktoken" not in err


def test_a_run_folder_as_policy_points_to_its_final_folder(tmp_path, capsys, tiny_path):
    import shutil

    shutil.copytree(tiny_path, tmp_path / "run" / "final")
    assert (
        main(
            [
                "rollout",
                "--env",
                "agentgspo/Calculator-v0",
                "--policy",
                str(tmp_path / "run"),
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    assert f"its trained policy is '{tmp_path / 'run' / 'final'}'" in capsys.readouterr().err


def test_unknown_policy_name_lists_the_choices_with_a_close_match(tmp_path, capsys):
    assert main(["rollout", "--env", "agentgspo/Calculator-v0", "--policy", "orcale", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "Did you mean 'oracle'?" in err and "'tiny'" in err and "'oracle'" in err and "model folder" in err


def test_a_wrong_env_kwargs_key_is_one_line_naming_the_key_and_the_accepted_ones(tmp_path, capsys):
    assert (
        main(
            [
                "rollout",
                "--env",
                "agentgspo/Calculator-v0",
                "--policy",
                "oracle",
                "--out",
                str(tmp_path),
                "--env-kwargs",
                '{"system_promt": null}',
            ]
        )
        == 2
    )
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert "'system_promt'" in err and "Did you mean 'system_prompt'?" in err and "It accepts:" in err


def test_an_oracle_rollout_loads_no_model(tmp_path, capsys, monkeypatch):
    from transformers import AutoModelForCausalLM

    def refuse(*args, **kwargs):
        raise AssertionError("--policy oracle loaded a model")

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", refuse)
    assert rollout(tmp_path, "oracle", capsys)[0].reward == 1.0


def test_episodes_out_of_room_are_reported_naming_the_flag(tmp_path, capsys):
    status = main(
        [
            "rollout",
            "--env",
            "agentgspo/Calculator-v0",
            "--policy",
            "tiny",
            "--episodes",
            "2",
            "--group-size",
            "2",
            "--max-new-tokens",
            "3",
            "--out",
            str(tmp_path),
        ]
    )
    out, err = capsys.readouterr()
    assert status == 0
    summary = json.loads(out)
    assert summary["stop_reasons"]["max_tokens"] >= 1
    assert any("--max-new-tokens" in line for line in summary["warnings"]) and "raise --max-new-tokens" in err


def test_rollout_plays_a_trained_policy_with_what_it_was_trained_with(tmp_path, capsys, tiny_path):
    """A policy folder's agentgspo.json (env, env kwargs, limits) is used unless a flag says otherwise."""
    import shutil

    from agentgspo.policy.policy_settings import PolicySettings, write_policy_settings

    policy = tmp_path / "final"
    shutil.copytree(tiny_path, policy)
    write_policy_settings(
        policy,
        PolicySettings(
            env_id="agentgspo/Calculator-v0",
            env_kwargs={"system_prompt": None},
            max_turns=2,
            max_new_tokens=5,
            max_context=200,
            temperature=0.5,
        ),
    )
    assert (
        main(["rollout", "--policy", str(policy), "--episodes", "2", "--group-size", "1", "--out", str(tmp_path / "a")])
        == 0
    )  # no --env: the one it was trained on
    summary = json.loads(capsys.readouterr().out)
    assert summary["settings"] == {
        "env_kwargs": {"system_prompt": None},
        "max_turns": 2,
        "max_new_tokens": 5,
        "max_context": 200,
        "temperature": 0.5,
        "top_p": 1.0,
        "top_k": 0,
    }
    for t in read_jsonl(tmp_path / "a" / "trajectories.jsonl"):  # how it was sampled, recorded per trajectory
        assert t.sampling == {"temperature": 0.5, "top_p": 1.0, "top_k": 0, "logprobs": "full"}
    for t in read_jsonl(tmp_path / "a" / "trajectories.jsonl"):
        assert t.messages[0]["role"] == "user" and all(end - start <= 5 for start, end in t.turn_spans)
    assert (
        main(["rollout", "--policy", str(policy), "--episodes", "1", "--group-size", "1", "--max-new-tokens", "9"]) == 0
    )  # no --out: rollout/ beside the policy folder
    summary = json.loads(capsys.readouterr().out)
    assert summary["settings"]["max_new_tokens"] == 9  # a flag wins
    assert summary["path"] == str(tmp_path / "rollout" / "trajectories.jsonl")


def test_rollout_without_env_or_trained_policy_asks_for_env(tmp_path, capsys):
    assert main(["rollout", "--policy", "tiny", "--out", str(tmp_path)]) == 2
    assert "--env is required" in capsys.readouterr().err


def test_a_second_interrupt_is_one_line_and_exit_130(monkeypatch, capsys):
    from agentgspo.commands import check_env

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(check_env, "run", interrupted)
    assert main(["check-env", "agentgspo/Calculator-v0"]) == 130
    assert capsys.readouterr().err.strip() == "agentgspo check-env: interrupted"


def test_every_flag_of_every_command_has_a_help_text():
    import argparse
    import importlib

    from agentgspo.cli import COMMANDS

    for name, (module, _) in COMMANDS.items():
        parser = argparse.ArgumentParser()
        importlib.import_module(module).add_arguments(parser)
        missing = [a.dest for a in parser._actions if a.dest != "help" and not a.help]
        assert not missing, f"agentgspo {name}: flags without help: {missing}"


def test_the_commands_that_parse_their_own_command_line_are_the_ones_named():
    """``OWN_PARSERS`` is the contract: a module with a ``parse`` the CLI does not call would parse nothing."""
    import importlib

    from agentgspo.cli import COMMANDS, OWN_PARSERS

    parsing = {name for name, (module, _) in COMMANDS.items() if hasattr(importlib.import_module(module), "parse")}
    assert parsing == OWN_PARSERS


def test_search_server_prints_where_it_listens_and_serves_there():
    """With --port 0 the line names the port the OS picked, and that URL answers."""
    import httpx

    pytest.importorskip("uvicorn", reason="the search server needs the server extra")
    pytest.importorskip("bm25s", reason="the search server needs the search extra")
    server = subprocess.Popen(
        [sys.executable, "-m", "agentgspo.cli", "search-server", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = server.stdout.readline()  # blocks until the server says where it listens
        assert line.startswith("listening on http://127.0.0.1:"), line + server.stderr.read()
        url = line.split()[2]
        assert not url.endswith(":0")
        # The socket listens before the line is printed: the request waits in its backlog until uvicorn accepts.
        response = httpx.post(f"{url}/search", json={"query": "Zindzul", "k": 1}, timeout=120)
        assert response.status_code == 200 and len(response.json()["results"]) == 1
    finally:
        server.terminate()
        server.wait(timeout=60)
