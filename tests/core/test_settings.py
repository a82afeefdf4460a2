"""The settings vocabulary: each setting declared once, recipes changing defaults only (as data), flags and YAML read
alike, each value within what its setting declares."""

from __future__ import annotations

import dataclasses
import importlib

import pytest

from agentgspo.learning.learner import LearnerConfig, ObjectiveSettings
from agentgspo.core.settings import add_settings, check_settings, load_config, resume_command, setting
from agentgspo.training.train import Recipe, TrainConfig

RECIPES = ("quickstart", "gspo_math", "gspo_code", "gspo_codeforces", "gspo_search")


def recipe_configs() -> dict[str, type]:
    """Each recipe's config class (its module's one :class:`Recipe`'s)."""
    configs = {}
    for name in RECIPES:
        module = importlib.import_module(f"agentgspo.recipes.{name}")
        (recipe,) = [value for value in vars(module).values() if isinstance(value, Recipe)]
        configs[name] = recipe.config_class
    return configs


def declarations(config_class: type) -> dict[str, type]:
    """Setting name -> the class in ``config_class``'s MRO that declares it with its own help text."""
    found = {}
    for klass in reversed(config_class.__mro__):
        for spec in getattr(klass, "__dataclass_fields__", {}).values():
            if spec.name in vars(klass).get("__annotations__", {}) and spec.name not in found:
                found[spec.name] = klass
            elif spec.name in vars(klass).get("__annotations__", {}):
                declared = found[spec.name].__dataclass_fields__[spec.name]
                # A redeclaration would be a second help text and type for one flag.
                assert spec.metadata is declared.metadata, (
                    f"{klass.__qualname__}.{spec.name} declares the setting again (declared in "
                    f"{found[spec.name].__qualname__}); change its default in the recipe's defaults instead"
                )
    return found


def test_the_learner_settings_are_the_training_config_s_own_not_copies():
    train_fields = {spec.name: spec for spec in dataclasses.fields(TrainConfig)}
    for spec in dataclasses.fields(LearnerConfig):
        assert train_fields[spec.name] is spec, spec.name  # inherited: one declaration, one default
    config = TrainConfig(objective="grpo", kl_coef=0.1, backend="hf")
    learner = LearnerConfig.from_settings(config)
    assert (learner.eps_low, learner.eps_high, learner.kl_coef) == (0.2, 0.27, 0.1)


@pytest.mark.parametrize("name", RECIPES)
def test_no_recipe_declares_a_setting_twice(name):
    config_class = recipe_configs()[name]
    declared = declarations(config_class)
    assert set(declared) == {spec.name for spec in dataclasses.fields(config_class)}
    for name, klass in declared.items():  # the core's settings are declared by the core only
        if name in {spec.name for spec in dataclasses.fields(TrainConfig)}:
            assert klass in (TrainConfig, LearnerConfig, ObjectiveSettings), (name, klass)


def test_a_redeclared_setting_is_caught():
    @dataclasses.dataclass
    class Copied(TrainConfig):
        lr: float = dataclasses.field(default=1e-3, metadata={"help": "a second help text for the same setting"})

    with pytest.raises(AssertionError, match="declares the setting again"):
        declarations(Copied)


def test_a_recipe_s_defaults_are_data_over_the_class_s_and_unknown_names_are_refused():
    """A recipe changes defaults, not declarations: the same class, its flags' help showing the recipe's default,
    the resume command naming only what differs from the recipe's defaults; a misspelt default fails at import."""
    import argparse

    fast = Recipe(command="python fast.py", defaults={"lr": 1e-3, "backend": "hf", "env_kwargs": {"a": 1}})
    config = fast.config()
    assert type(config) is TrainConfig and (config.lr, config.backend) == (1e-3, "hf") and TrainConfig().lr == 1e-6
    assert fast.config(lr=2e-3).lr == 2e-3 and fast.load(["--lr", "0.002"]).lr == 2e-3
    config.env_kwargs["a"] = 2  # a run's changes stay its own: the recipe's defaults are copied
    assert fast.config().env_kwargs == {"a": 1}
    parser = argparse.ArgumentParser()
    add_settings(parser, TrainConfig, fast.defaults)
    (lr,) = [action for action in parser._actions if action.dest == "lr"]
    assert lr.help.endswith("(default: 0.001)"), lr.help
    assert resume_command(fast.config(out="runs/f", seed=3), fast.command, fast.defaults) == (
        "python fast.py --out runs/f --seed 3"
    )
    with pytest.raises(ValueError, match="TrainConfig has no setting 'learning_rate'"):
        Recipe(command="python fast.py", defaults={"learning_rate": 1e-3})
    with pytest.raises(ValueError, match="no setting 'stpes' .did you mean 'steps'"):
        Recipe(command="python fast.py", smoke={"stpes": 1})


def test_each_value_is_checked_against_its_declared_choices_and_bounds():
    """A dataclass builds from any keyword (Python, YAML, a resumed config.json): a value outside its setting's
    declared choices or below its bound is refused naming both; the flag lists the choices."""

    @dataclasses.dataclass
    class Settings:
        mode: str = setting("a", "one of a few", choices=("a", "b"))
        steps: int = setting(1, "at least one", at_least=1)
        cap: float | None = setting(None, "empty or >= 0", at_least=0)

        def __post_init__(self) -> None:
            check_settings(self)

    assert Settings(mode="b", steps=3, cap=None).mode == "b"
    with pytest.raises(ValueError, match="mode: expected one of a, b, got 'c'"):
        Settings(mode="c")
    with pytest.raises(ValueError, match="steps: expected >= 1, got 0"):
        Settings(steps=0)
    with pytest.raises(ValueError, match="cap: expected >= 0, got -1"):
        Settings(cap=-1.0)
    with pytest.raises(SystemExit):
        load_config(Settings, ["--mode", "c"])
    with pytest.raises(ValueError, match="group_size: expected >= 1, got 0"):
        TrainConfig(backend="hf", group_size=0)
    with pytest.raises(ValueError, match="sharding: expected one of none, fsdp2, got 'fsdp'"):
        TrainConfig(backend="hf", sharding="fsdp")


def test_flags_and_yaml_read_every_kind_of_setting_alike(tmp_path):
    flags = load_config(
        TrainConfig,
        [
            "--backend",
            "hf",
            "--exclude-stop-reasons",
            '["env_error"]',
            "--sync-each-micro-batch",
            "none",
            "--compile",
            "true",
            "--max-grad-norm",
            "",
        ],
    )
    assert flags.exclude_stop_reasons == ("env_error",) and flags.sync_each_micro_batch is None
    assert flags.compile is True and flags.max_grad_norm is None
    yaml_file = tmp_path / "run.yaml"
    yaml_file.write_text(
        "backend: hf\nexclude_stop_reasons: [env_error]\nsync_each_micro_batch: null\n"
        "compile: true\nmax_grad_norm: null\n"
    )
    assert load_config(TrainConfig, ["--config", str(yaml_file)]) == flags
    with pytest.raises(SystemExit):  # a Literal setting lists its choices
        load_config(TrainConfig, ["--backend", "hf", "--logp-old", "bogus"])
    yaml_file.write_text("backend: hf\nlogp_old: bogus\n")
    with pytest.raises(ValueError, match="logp_old: expected one of auto, recompute, sampler, got 'bogus'"):
        load_config(TrainConfig, ["--config", str(yaml_file)])
    # the objective is a validated string (a built-in, or package.module:name): both ways name the registered ones
    for argv in (["--backend", "hf", "--objective", "ppo"], ["--config", str(yaml_file)]):
        yaml_file.write_text("backend: hf\nobjective: ppo\n")
        with pytest.raises(ValueError, match=r"objective: unknown 'ppo'; expected one of \['grpo', 'gspo', "):
            load_config(TrainConfig, argv)


def test_a_bare_boolean_flag_means_true_and_a_value_still_reads():
    """``--allow-uncorrected-staleness`` alone is true, like every boolean setting; ``--x true|false`` as before."""
    bare = load_config(TrainConfig, ["--backend", "hf", "--compile", "--allow-uncorrected-staleness"])
    assert bare.compile is True and bare.allow_uncorrected_staleness is True
    assert load_config(TrainConfig, ["--backend", "hf", "--compile", "false"]).compile is False
    assert load_config(TrainConfig, ["--backend", "hf", "--sync-each-micro-batch"]).sync_each_micro_batch is True
    with pytest.raises(SystemExit):
        load_config(TrainConfig, ["--backend", "hf", "--compile", "maybe"])


def test_the_resume_command_leaves_out_testing_aids_and_keeps_what_differs():
    config = TrainConfig(out="runs/x", backend="hf", lr=1e-3, kill_after_step=3, wait_for_interrupt_at="gspo:2")
    command = resume_command(config, "python recipes/x.py")
    assert command == "python recipes/x.py --out runs/x --backend hf --lr 0.001"
    again = load_config(TrainConfig, command.split()[2:])
    assert (again.backend, again.lr, again.kill_after_step) == ("hf", 1e-3, 0)


def test_the_paper_s_clip_bands_are_written_once():
    """The clip values of paper §5.1 appear as numbers in one module (objective/terms.py); every default, the
    learner's and each recipe's, refers to them."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    places = []
    for folder in ("agentgspo", "recipes", "envs", "benchmarks"):
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and node.value in (3e-4, 4e-4, 0.27) and type(node.value) is float:
                    places.append(f"{path.relative_to(root)}:{node.lineno}")
    assert {place.split(":")[0] for place in places} == {"agentgspo/objective/terms.py"}, places
    assert len(places) == 3, places  # GSPO_EPS's two numbers and GRPO_EPS's upper one
