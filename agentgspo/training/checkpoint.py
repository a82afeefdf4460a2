"""Checkpoints for exact resume: model, optimizer, scheduler, RNG streams, learner state, data position, step.

Two kinds live under ``RUN/checkpoints``:

- ``step-N``: a GSPO step. ``accelerate``'s ``save_state`` writes the prepared objects and every rank's RNG states;
  we add the recipe's own state as JSON.
- ``warm-N``: a supervised warm-start step, before the model is prepared for training: the weights
  (safetensors), the warm start's optimizer, schedule and data order, and the RNG streams.

Each is written to a temporary folder and renamed when complete, so a run killed mid-save (SIGKILL included)
resumes from the previous complete one. Tied weights (an LM head sharing the embedding matrix) are saved once.
"""

from __future__ import annotations

import json
import random
import shutil
import weakref
from pathlib import Path
from typing import Any

__all__ = [
    "save_checkpoint",
    "save_warm_checkpoint",
    "latest_checkpoint",
    "read_run_state",
    "load_checkpoint",
    "load_warm_checkpoint",
]

_PREFIX = "step-"
_WARM_PREFIX = "warm-"
_STATE = "run_state.json"
_WARM_WEIGHTS = "model.safetensors"
_WARM_TRAINER = "warm_start.pt"
# The accelerators whose save_state already drops tied duplicates (the hook is registered once per accelerator).
_TIES_HOOKED: weakref.WeakSet = weakref.WeakSet()


def _drop_tied_duplicates(models: list, weights: list[dict[str, Any]], output_dir: str) -> None:
    """``save_state`` pre-hook: keep one name per shared storage, so tied weights are saved once and no
    'Removed shared tensor' warning is printed; ``load_state`` (safetensors' ``load_model``) re-ties them."""
    import torch

    for state in weights:
        kept: set[tuple] = set()
        for name in sorted(state):
            tensor = state[name]
            if not isinstance(tensor, torch.Tensor):
                continue
            view = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape), tensor.stride())
            if view in kept:
                del state[name]  # the same tensor under a second name (tied)
            else:
                kept.add(view)


def _save_atomically(root: Path, name: str, write: Any, *, keep: int, prefix: str, main: bool, barrier: Any) -> Path:
    """Write ``root/name`` through ``root/.tmp-name`` (``write(staging)`` on every rank, files on the main one);
    keep the newest ``keep`` folders starting with ``prefix``."""
    final, staging = root / name, root / f".tmp-{name}"
    if main:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
    barrier()
    write(staging)
    if main:
        shutil.rmtree(final, ignore_errors=True)
        staging.rename(final)
        for old in sorted(root.glob(f"{prefix}*"))[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    barrier()
    return final


def save_checkpoint(
    accelerator: Any, out_dir: str | Path, step: int, run_state: dict[str, Any], *, keep: int = 2
) -> Path:
    """Write GSPO checkpoint ``step`` under ``out_dir/checkpoints`` atomically; keep the newest ``keep``."""
    if accelerator not in _TIES_HOOKED:
        accelerator.register_save_state_pre_hook(_drop_tied_duplicates)
        _TIES_HOOKED.add(accelerator)

    def write(staging: Path) -> None:
        accelerator.save_state(str(staging), safe_serialization=True)
        if accelerator.is_main_process:
            (staging / _STATE).write_text(json.dumps({"step": step, "phase": "gspo", **run_state}))

    return _save_atomically(
        Path(out_dir) / "checkpoints",
        f"{_PREFIX}{step:08d}",
        write,
        keep=keep,
        prefix=_PREFIX,
        main=accelerator.is_main_process,
        barrier=accelerator.wait_for_everyone,
    )


def save_warm_checkpoint(
    accelerator: Any,
    out_dir: str | Path,
    step: int,
    model: Any,
    trainer_state: dict[str, Any],
    run_state: dict[str, Any],
    *,
    keep: int = 2,
) -> Path:
    """Write warm-start checkpoint ``step``: ``model``'s weights, ``trainer_state`` (e.g.
    :meth:`agentgspo.training.sft.WarmStartProgress.state_dict`), the RNG streams and ``run_state`` (JSON).

    Every rank holds the same warm-started weights (each runs the same warm start), so the main rank writes.
    """
    import numpy as np
    import torch
    from safetensors.torch import save_model

    def write(staging: Path) -> None:
        if not accelerator.is_main_process:
            return
        save_model(model, str(staging / _WARM_WEIGHTS))  # one copy of tied tensors, nothing printed
        rng = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
        torch.save({"trainer": trainer_state, "rng": rng}, staging / _WARM_TRAINER)
        (staging / _STATE).write_text(json.dumps({"step": step, "phase": "warm_start", **run_state}))

    return _save_atomically(
        Path(out_dir) / "checkpoints",
        f"{_WARM_PREFIX}{step:08d}",
        write,
        keep=keep,
        prefix=_WARM_PREFIX,
        main=accelerator.is_main_process,
        barrier=accelerator.wait_for_everyone,
    )


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    """The newest complete checkpoint under ``out_dir/checkpoints``: a GSPO one if any, else a warm-start one, else
    ``None``."""
    root = Path(out_dir) / "checkpoints"
    for prefix in (_PREFIX, _WARM_PREFIX):
        complete = [p for p in sorted(root.glob(f"{prefix}*")) if (p / _STATE).exists()]
        if complete:
            return complete[-1]
    return None


def read_run_state(path: str | Path) -> dict[str, Any]:
    """The run state a checkpoint holds (``step``, ``phase``: "gspo" or "warm_start", and the recipe's fields)."""
    path = Path(path)
    if not (path / _STATE).exists():
        raise FileNotFoundError(f"{path} is not a complete checkpoint (no {_STATE}); pick another or start over")
    state = json.loads((path / _STATE).read_text())
    state.setdefault("phase", "gspo")
    return state


def load_checkpoint(accelerator: Any, path: str | Path) -> dict[str, Any]:
    """Restore everything ``save_checkpoint`` wrote; returns the run state (``step`` and the recipe's fields)."""
    state = read_run_state(path)
    accelerator.load_state(str(path))
    return state


def load_warm_checkpoint(path: str | Path, model: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Restore what ``save_warm_checkpoint`` wrote into ``model`` and the RNG streams; returns ``(trainer_state,
    run_state)``."""
    import numpy as np
    import torch
    from safetensors.torch import load_model

    path = Path(path)
    run_state = read_run_state(path)
    load_model(model, str(path / _WARM_WEIGHTS))
    # Our own file, written by save_warm_checkpoint (optimizer tensors, RNG states): trusted, hence weights_only=False.
    saved = torch.load(path / _WARM_TRAINER, weights_only=False)
    random.setstate(saved["rng"]["python"])
    np.random.set_state(saved["rng"]["numpy"])
    torch.set_rng_state(saved["rng"]["torch"])
    return saved["trainer"], run_state
