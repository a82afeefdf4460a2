"""Checkpoints: a warm start resumed from its checkpoint ends where an uninterrupted one does, and tied weights are
saved once without the library's 'Removed shared tensor' warning."""

from __future__ import annotations

import logging

import torch
from accelerate import Accelerator
from transformers import AutoModelForCausalLM

from agentgspo.training.checkpoint import (
    latest_checkpoint,
    load_checkpoint,
    load_warm_checkpoint,
    read_run_state,
    save_checkpoint,
    save_warm_checkpoint,
)
from agentgspo.training.sft import WarmStartProgress, play_demonstrations, warm_start


def _model(tiny_path):
    return AutoModelForCausalLM.from_pretrained(tiny_path, dtype=torch.float32)


def _demos(renderer):
    from agentgspo.envs.calculator import CalculatorEnv

    return play_demonstrations(
        CalculatorEnv, renderer, range(16), wrong_frac=0.5, seed=0, env_id="agentgspo/Calculator-v0"
    )


def test_a_warm_start_resumed_from_its_checkpoint_matches_an_uninterrupted_one(tmp_path, tiny_path, renderer):
    demos, pad = _demos(renderer), renderer.tokenizer.pad_token_id
    options = dict(pad_token_id=pad, steps=4, batch_size=4, lr=3e-3, seed=0)
    straight = _model(tiny_path)
    warm_start(straight, demos, **options)

    accelerator = Accelerator(cpu=True)
    first, progress = _model(tiny_path), WarmStartProgress()

    def stop_after_two(step, loss):
        if step == 2:
            save_warm_checkpoint(accelerator, tmp_path, step, first, progress.state_dict(), {"note": "x"})
        return step == 2

    warm_start(first, demos, callback=stop_after_two, progress=progress, **options)
    path = latest_checkpoint(tmp_path)
    assert path.name == "warm-00000002" and read_run_state(path) == {"step": 2, "phase": "warm_start", "note": "x"}
    resumed, progress = _model(tiny_path), WarmStartProgress()
    trainer_state, _ = load_warm_checkpoint(path, resumed)
    progress.load_state_dict(trainer_state)
    losses = warm_start(resumed, demos, progress=progress, **options)
    assert len(losses) == 2 and progress.step == 4  # steps 3 and 4 only
    moved = max((a - b).abs().max().item() for a, b in zip(straight.parameters(), _model(tiny_path).parameters()))
    assert moved > 1e-4, "the warm start did not train, so this test would prove nothing"
    # Same data order, optimizer moments and LR schedule: identical arithmetic, float32 round-off allowed.
    for (name, a), b in zip(straight.named_parameters(), resumed.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6, msg=name)


def test_tied_weights_are_saved_once_silently_and_stay_tied_on_load(tmp_path, tiny_path, caplog):
    model = _model(tiny_path)
    assert model.lm_head.weight is model.model.embed_tokens.weight  # the tiny policy ties them
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(model, optimizer)
    with caplog.at_level(logging.WARNING):
        path = save_checkpoint(accelerator, tmp_path, 1, {})
    assert "Removed shared tensor" not in caplog.text
    with torch.no_grad():
        model.lm_head.weight.add_(1.0)
    load_checkpoint(accelerator, path)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    torch.testing.assert_close(model.lm_head.weight, _model(tiny_path).lm_head.weight, rtol=0, atol=0)
