"""The env recipes (recipes/gspo_math.py, gspo_code.py, gspo_codeforces.py, gspo_search.py): each one's --smoke
size trains the tiny policy on CPU and writes a run folder like the quickstart's; settings come from defaults <
--smoke < --config YAML < flags; a finished folder is reported, one holding other settings refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentgspo.cli import main
from agentgspo.core.settings import load_config
from agentgspo.training.train import TrainConfig
from agentgspo.core.trajectory import read_jsonl

from objective_support import USER_OBJECTIVES  # tests/objective_support.py: a user's objective module
from recipe_support import recipe_module  # tests/recipe_support.py

# The whole module is slow: it starts vLLM, Ray, DeepSpeed or a training run (docs/contributing.md).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ("math", "code", "codeforces", "search")


def run_recipe(name, *args, timeout=900, cwd=ROOT):
    return subprocess.run(
        [sys.executable, str(ROOT / "recipes" / f"gspo_{name}.py"), *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


OBJECTIVE = "my_objectives:token_clip"


@pytest.mark.parametrize("name", RECIPES)
def test_every_recipe_smoke_size_trains_the_tiny_policy_and_writes_the_run_folder(name, tmp_path):
    out = tmp_path / name
    result = run_recipe(name, "--smoke", "--out", out)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2]
    assert all({"reward_mean", "success", "loss", "clip_frac_seq", "samples"} <= set(row) for row in rows)
    assert all(row["samples"] == 4 for row in rows)  # 2 prompts x 2 samples, as_sampled
    config = json.loads((out / "config.json").read_text())
    env_id = {"math": "Math-v0", "code": "Code-v0", "codeforces": "CodeForces-v0", "search": "Search-v0"}[name]
    assert config["env_id"] == f"agentgspo/{env_id}" and config["policy"] == "tiny"
    settings = json.loads((out / "final" / "agentgspo.json").read_text())
    assert settings["env_id"] == f"agentgspo/{env_id}" and settings["max_new_tokens"] == 32
    assert (out / "final" / "config.json").is_file() and (out / "final" / "model.safetensors").is_file()
    assert json.loads((out / "summary.json").read_text())["reward_mean"] == [row["reward_mean"] for row in rows]
    # Each step's episodes are saved (--smoke: every step) and `agentgspo view` renders them.
    saved = sorted(p.name for p in (out / "trajectories").iterdir())
    assert saved == ["step_000001_rank0.jsonl", "step_000002_rank0.jsonl"]
    assert len(read_jsonl(out / "trajectories" / saved[1])) == 4
    assert (
        main(
            [
                "view",
                str(out / "trajectories" / saved[1]),
                "--tokenizer",
                str(out / "final"),
                "--out",
                str(tmp_path / "view.html"),
            ]
        )
        == 0
    )
    assert "4 trajectories" in (tmp_path / "view.html").read_text()
    if name == "codeforces":  # its held-out problem, never trained on, is evaluated after each step
        assert all(0.0 <= row["eval/pass@1"] <= 1.0 for row in rows)
        for step in (1, 2):
            attempts = [
                json.loads(line)
                for line in (out / "eval" / f"step_{step:06d}" / "results.jsonl").read_text().splitlines()
            ]
            assert [a["problem_id"] for a in attempts] == ["9000C"]
            assert "pass@1" in json.loads((out / "eval" / f"step_{step:06d}" / "summary.json").read_text())
        assert config["held_out"] == ["9000C"]


def test_a_finished_run_is_reported_and_a_folder_with_other_settings_refused(tmp_path):
    out = tmp_path / "math"
    assert run_recipe("math", "--smoke", "--out", out, "--steps", 1).returncode == 0
    again = run_recipe("math", "--smoke", "--out", out, "--steps", 1)
    assert again.returncode == 0 and "holds a finished run" in again.stdout
    other = run_recipe("math", "--smoke", "--out", out, "--steps", 1, "--lr", 0.5)
    assert other.returncode == 2 and "--lr" in other.stderr


def test_a_users_objective_from_its_module_trains_a_recipe_and_resume_imports_it_again(tmp_path):
    """``--objective module:name`` imports a module from the working directory (an objective is one module): the
    smoke trains with it, config.json records it with the clip band its defaults give (the band follows the
    objective unless given), and a resume that cannot import it fails naming the module, before any step."""
    (tmp_path / "my_objectives.py").write_text(USER_OBJECTIVES.format(name="token_clip"))
    out = tmp_path / "user"
    result = run_recipe("math", "--smoke", "--out", out, "--steps", 1, "--objective", OBJECTIVE, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    config = json.loads((out / "config.json").read_text())
    assert (config["objective"], config["eps_low"], config["eps_high"]) == (OBJECTIVE, 0.2, 0.27)
    (metrics,) = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert metrics["clip_frac_token"] >= 0 and metrics["loss"] == metrics["loss"]  # its declared diagnostics, finite
    elsewhere = run_recipe("math", "--smoke", "--out", out, "--steps", 2, "--objective", OBJECTIVE)  # cwd: the repo
    assert elsewhere.returncode != 0 and "cannot import 'my_objectives'" in elsewhere.stderr, elsewhere.stderr[-2000:]
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 1  # nothing trained without its objective
    math = recipe_module("math").MATH
    assert (math.load([]).eps_low, math.load([]).eps_high) == (3e-4, 4e-4)
    given = math.load(["--objective", "grpo", "--eps-low", "0.1"])
    assert (given.eps_low, given.eps_high) == (0.1, 0.27)
    yaml_file = tmp_path / "band.yaml"
    yaml_file.write_text("objective: gspo_token\neps_high: null\n")
    from_yaml = math.load(["--config", str(yaml_file)])
    assert (from_yaml.eps_low, from_yaml.eps_high) == (3e-4, 4e-4)


def test_settings_come_from_defaults_then_smoke_then_yaml_then_flags(tmp_path):
    math = recipe_module("math").MATH
    real = math.load([])
    assert real.policy == "Qwen/Qwen3-30B-A3B" and real.env_id == "agentgspo/Math-v0" and real.backend == "vllm"
    config_file = tmp_path / "run.yaml"
    config_file.write_text("steps: 7\nlr: 1e-3\nenv_kwargs: {sandbox: none}\ngroup-size: 4\n")
    config = math.load(["--smoke", "--config", str(config_file), "--lr", "0.002"])
    assert config.policy == "tiny" and config.max_new_tokens == 32  # --smoke over the defaults
    assert config.steps == 7 and config.group_size == 4 and config.env_kwargs == {"sandbox": "none"}  # YAML
    assert config.lr == 0.002  # a flag over the YAML
    assert math.load(["--config", str(config_file)]).lr == 1e-3  # YAML 1.1 reads 1e-3 as text


def test_bad_settings_are_refused_naming_the_setting(tmp_path):
    config_file = tmp_path / "run.yaml"
    config_file.write_text("stpes: 7\n")
    with pytest.raises(ValueError, match="unknown setting 'stpes' .did you mean 'steps'"):
        load_config(TrainConfig, ["--config", str(config_file)])
    config_file.write_text("steps: many\n")
    with pytest.raises(ValueError, match="steps: expected int, got 'many'"):
        load_config(TrainConfig, ["--config", str(config_file)])
    with pytest.raises(SystemExit):
        load_config(TrainConfig, ["--history", "split"])  # argparse: "invalid choice: 'split'"
    config_file.write_text("history: split\n")
    with pytest.raises(ValueError, match="history: expected one of as_sampled, split_turns, got 'split'"):
        load_config(TrainConfig, ["--config", str(config_file)])
    with pytest.raises(SystemExit):
        load_config(TrainConfig, ["--env-kwargs", "[1]"])  # argparse: "expected a JSON object"
    codeforces = recipe_module("codeforces").CODEFORCES
    assert codeforces.load(["--held-out", '["9000A"]']).held_out == ["9000A"]
    with pytest.raises(SystemExit):
        codeforces.load(["--held-out", "9000A"])  # argparse: "expected a JSON list"
    with pytest.raises(ValueError, match="would evaluate on training problems"):
        codeforces.load(["--held-out", "[]"])
    from agentgspo.environments.registry import make

    config = codeforces.load(["--env-kwargs", "{}", "--held-out", '["9000A", "9000D"]'])
    env = make(config.env_id, **config.train_env_kwargs())  # what the policy trains on: never a held-out problem
    posed = {env.reset(seed=seed)[1]["problem"] for seed in range(20)}
    held_out = {t.problem.name for t in env.unwrapped.problem_set.tasks if t.metadata["id"] in ("9000A", "9000D")}
    assert len(posed) == 3 and not posed & held_out
    result = run_recipe("search", "--smoke", "--out", tmp_path / "x", "--policy", "Qwen/Not-Cached-Anywhere")
    assert result.returncode == 2 and "huggingface-cli download Qwen/Not-Cached-Anywhere" in result.stderr


def test_no_recipe_file_shadows_a_module_it_could_import():
    """`python recipes/NAME.py` puts recipes/ first on sys.path: a recipe named like a standard-library module
    (math.py, code.py) or an installed package would be imported in its place, by the recipe or by any library."""
    import importlib.metadata

    packages = {name.replace("-", "_").lower() for name in importlib.metadata.packages_distributions()}
    for recipe in (ROOT / "recipes").glob("*.py"):
        assert recipe.stem not in sys.stdlib_module_names and recipe.stem.lower() not in packages, recipe.name
        assert "sys.path" not in recipe.read_text(), f"{recipe.name} edits sys.path: rename what it works around"


@pytest.mark.parametrize("name", RECIPES)
def test_every_recipe_runs_as_a_script(name):
    result = run_recipe(name, "--help", timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "--smoke" in result.stdout and "--history" in result.stdout


def test_a_recipe_runs_sharded_with_fsdp2_on_two_cpu_ranks_with_split_turns(tmp_path):
    """Two gloo ranks under `accelerate launch`: the policy sharded by FSDP2 (shard_policy), the sampler an unsharded
    copy refreshed with the gathered weights, sharded checkpoints, full weights in final/; split_turns samples."""
    out = tmp_path / "fsdp"
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--main_process_port",  # 0: a free port, never one another test's launch holds
        "0",
        str(ROOT / "recipes" / "gspo_search.py"),
        "--smoke",
        "--sharding",
        "fsdp2",
        "--history",
        "split_turns",
        "--out",
        str(out),
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2] and all(row["samples"] >= 4 for row in rows)
    assert (out / "checkpoints" / "step-00000002" / "fsdp2_sharded").is_dir()
    from safetensors.torch import load_file

    from agentgspo.models.tiny import tiny_policy_path

    final, initial = load_file(out / "final" / "model.safetensors"), load_file(tiny_policy_path() / "model.safetensors")
    assert set(final) == set(initial) and all(final[k].shape == initial[k].shape for k in final)
