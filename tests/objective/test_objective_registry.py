"""Objectives as plug-ins (agentgspo.objective.registry): one decorated module trains, a plain function is a
sequence objective, ``package.module:name`` imports from the working directory, entry points register, and every
mistake is an error naming the objective and the fix."""

from __future__ import annotations

import importlib
import math
import dataclasses
import sys
from dataclasses import dataclass

import pytest
import torch

from agentgspo.learning.learner import LearnerConfig, loss_for
from agentgspo.objective import OBJECTIVES, decoupled, load_objective, objective
from agentgspo.objective.registry import Objective, ObjectiveError, hyperparameters
from agentgspo.objective.terms import TOKEN, Inputs, Terms, clipped_surrogate, token_advantages

from learner_support import _learner, _trajectories  # tests/learner_support.py: the tiny policy's learner, batches
from objective_support import USER_OBJECTIVES  # tests/objective_support.py: a user's objective module
from tiny_models import build_tiny  # tests/tiny_models.py


@pytest.fixture
def user_module(tmp_path, monkeypatch, request):
    """A module file ``my_objectives_<test>.py`` in a fresh working directory (not yet on sys.path); its decorated
    objective is named after the test, so tests do not collide in the registry."""
    name = f"user_{request.node.name}".replace("[", "_").replace("]", "_").replace("-", "_")
    module = f"my_objectives_{name}"
    (tmp_path / f"{module}.py").write_text(USER_OBJECTIVES.format(name=name))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])  # restored after
    yield module, name
    for key in [key for key in OBJECTIVES if name in key or module in key]:
        del OBJECTIVES[key]


def _batch(seed=0):
    gen = torch.Generator().manual_seed(seed)
    old = -torch.rand(3, 5, generator=gen, dtype=torch.float64)
    logp = (old + 0.3 * torch.randn(3, 5, generator=gen, dtype=torch.float64)).requires_grad_()
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]])
    return logp, old, torch.tensor([1.0, -0.5, 0.0], dtype=torch.float64), mask


def test_a_decorated_module_from_the_working_directory_is_an_objective_that_trains(user_module):
    module, name = user_module
    found = load_objective(f"{module}:token_clip")
    assert isinstance(found, Objective) and found.unit is TOKEN and found.origin == f"{module}:token_clip"
    assert OBJECTIVES[name] is not None and OBJECTIVES[f"{module}:token_clip"] is found
    # Its value is GRPO's with the same band: the shared aggregation does the rest.
    logp, old, adv, mask = _batch()
    loss, diagnostics = found(logp, old, adv, mask)
    grpo, _ = OBJECTIVES["grpo"](logp, old, adv, mask)
    assert torch.equal(loss, grpo) and {"clip_frac_token", "ratio_max", "num_tokens"} <= set(diagnostics)
    # The learner takes it by name, with the band from the objective's defaults, and logs what it declares.
    config = LearnerConfig(objective=f"{module}:token_clip", memory_estimate=False)
    assert (config.eps_low, config.eps_high) == (0.2, 0.27)
    learner = _learner(build_tiny("dense_qwen3"), objective=f"{module}:token_clip", memory_estimate=False)
    metrics = learner.step(_trajectories([1, 0, 1, 0, 1, 0, 1, 0]))
    assert math.isfinite(metrics["loss"]) and "clip_frac_token" in metrics and "ratio_max" in metrics
    # The asynchronous correction composes onto it, weighing per token (its unit).
    corrected = loss_for(LearnerConfig(objective=f"{module}:token_clip", behaviour_correction="tis"))
    assert corrected.objective is found and corrected.weight_unit is TOKEN


def test_a_plain_function_is_a_sequence_objective_with_no_diagnostics(user_module):
    module, _ = user_module
    plain = load_objective(f"{module}:plain")
    logp, old, adv, mask = _batch()
    loss, diagnostics = plain(logp, old, adv, mask, num_sequences=2)
    assert diagnostics == {} and plain.diagnostics == ()
    (grad,) = torch.autograd.grad(loss, logp)
    assert torch.equal(grad[0, :3], torch.full((3,), -1.0 / 3 / 2, dtype=torch.float64)) and grad[2].eq(0).all()
    learner = _learner(build_tiny("dense_qwen3"), objective=f"{module}:plain", memory_estimate=False)
    metrics = learner.step(_trajectories([1, 0, 1, 0, 1, 0, 1, 0]))
    assert math.isfinite(metrics["loss"]) and not any(key.startswith(("clip_frac", "ratio_")) for key in metrics)
    with pytest.raises(ObjectiveError, match="has no per-unit terms for the behaviour correction"):
        decoupled(plain)
    with pytest.raises(ValueError, match="behaviour_correction='tis': objective .*plain.* has no per-unit terms"):
        LearnerConfig(objective=f"{module}:plain", behaviour_correction="tis")
    with pytest.raises(
        ValueError,
        match=r"eps_low: objective .*plain' does not take it \(eps_low is a hyperparameter of grpo, gspo, gspo_token",
    ):
        LearnerConfig(objective=f"{module}:plain", eps_low=0.1)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("no_such_module:x", r"cannot import 'no_such_module' .*run from the folder that holds it"),
        ("{module}:missing", r"has no objective or function named 'missing'"),
        ("{module}:Band", r"a plain function objective takes .*num_sequences"),
        ("{module}:no_count", r"a plain function objective takes .*num_sequences"),
        ("sapo", r"unknown 'sapo'; expected one of \['grpo', 'gspo', 'gspo_token', 'gspo_turn'"),
    ],
)
def test_an_objective_that_cannot_be_loaded_is_named_with_the_fix(user_module, spec, message):
    module, _ = user_module
    with pytest.raises(ObjectiveError, match=message):
        load_objective(spec.format(module=module))


def test_hyperparameters_are_the_dataclass_fields_and_a_name_is_registered_once():
    logp, old, adv, mask = _batch()
    with pytest.raises(ObjectiveError, match=r"objective 'gspo' has no hyperparameter eps; it takes \['eps_low', "):
        OBJECTIVES["gspo"](logp, old, adv, mask, eps=0.1)
    with pytest.raises(ObjectiveError, match="objective 'gspo_turn' has the turn as its unit: pass turn_ids"):
        OBJECTIVES["gspo_turn"](logp, old, adv, mask)

    @dataclass(frozen=True)
    class Nothing:
        pass

    with pytest.raises(ObjectiveError, match="objective 'gspo' is already registered .*give .* another name"):

        @objective("gspo", unit=TOKEN, hyper=Nothing())
        def gspo(inputs: Inputs, advantages: torch.Tensor, hyper: Nothing) -> Terms:
            return Terms(TOKEN, *clipped_surrogate(inputs.logp, token_advantages(advantages, inputs), 0, 0), inputs)

    assert OBJECTIVES["gspo"].unit.name == "sequence"  # the built-in is still the one registered
    with pytest.raises(ObjectiveError, match="hyper must be a dataclass instance"):
        objective("other", unit=TOKEN, hyper=Nothing)


def test_an_installed_package_registers_through_the_entry_point_group(user_module, tmp_path, monkeypatch):
    module, name = user_module
    info = tmp_path / "site" / "my_objectives-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-objectives\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[agentgspo.objectives]\nmy_clip = {module}:token_clip\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    found = load_objective("my_clip")
    assert found.unit is TOKEN and OBJECTIVES["my_clip"] is found
    assert LearnerConfig(objective="my_clip").eps_high == 0.27
    del OBJECTIVES["my_clip"]


def test_the_former_function_names_import_with_a_warning_and_are_the_registered_objectives():
    sys.modules.pop("agentgspo.objective.loss", None)
    with pytest.warns(DeprecationWarning, match="agentgspo.objective.loss is split into one module per objective"):
        loss = importlib.import_module("agentgspo.objective.loss")
    assert loss.gspo_loss is OBJECTIVES["gspo"] and loss.grpo_loss is OBJECTIVES["grpo"]
    assert loss.decoupled_gspo_turn_loss.objective is OBJECTIVES["gspo_turn"]


def test_the_settings_are_the_union_of_the_registered_objectives_hyperparameters():
    """One setting per hyperparameter name across the registered objectives, empty by default (each objective's
    own), its help listing the defaults; a registered objective with a new hyperparameter gets its flag, and one
    name with two types is refused."""
    from agentgspo.learning import config

    assert [spec.name for spec in dataclasses.fields(config.ObjectiveSettings)] == ["objective", "eps_low", "eps_high"]

    @dataclass(frozen=True)
    class Temperatures:
        tau_pos: float = dataclasses.field(default=1.0, metadata={"help": "gate temperature for A > 0"})

    @objective("gated_for_test", unit=TOKEN, hyper=Temperatures())
    def gated(inputs: Inputs, advantages: torch.Tensor, hyper: Temperatures) -> Terms:
        adv = token_advantages(advantages, inputs)
        return Terms(TOKEN, *clipped_surrogate(inputs.logp - inputs.old_logp, adv, 0.2, 0.2), inputs)

    try:
        settings = {spec.name: spec for spec in dataclasses.fields(config._objective_settings())}
        assert list(settings) == ["objective", "eps_low", "eps_high", "tau_pos"] and settings["tau_pos"].default is None
        assert (
            settings["tau_pos"]
            .metadata["help"]
            .startswith("gate temperature for A > 0 (empty: the objective's, 1 for gated_for_test)")
        )

        @dataclass(frozen=True)
        class Clash:
            tau_pos: int = 1

        with pytest.raises(
            ObjectiveError,
            match="hyperparameter 'tau_pos' is <class 'float'> in objective 'gated_for_test' but <class 'int'>",
        ):
            hyperparameters([gated, Objective("clash", TOKEN, Clash())])
    finally:
        del OBJECTIVES["gated_for_test"]
