"""Checkpoints for exact resume: model, optimizer, scheduler, RNG streams, learner state, data position, step.

``accelerate``'s ``save_state`` writes the prepared objects and every rank's RNG states; we add the recipe's own
state as JSON. A checkpoint is written to a temporary folder and renamed when complete, so a run killed mid-save
(SIGKILL included) resumes from the previous complete one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

_PREFIX = "step-"
_STATE = "run_state.json"


def save_checkpoint(accelerator: Any, out_dir: str | Path, step: int, run_state: dict[str, Any], *,
                    keep: int = 2) -> Path:
    """Write checkpoint ``step`` under ``out_dir/checkpoints`` atomically; keep the newest ``keep``."""
    root = Path(out_dir) / "checkpoints"
    final = root / f"{_PREFIX}{step:08d}"
    staging = root / f".tmp-{_PREFIX}{step:08d}"
    if accelerator.is_main_process:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(staging), safe_serialization=True)
    if accelerator.is_main_process:
        (staging / _STATE).write_text(json.dumps({"step": step, **run_state}))
        shutil.rmtree(final, ignore_errors=True)
        staging.rename(final)
        for old in sorted(root.glob(f"{_PREFIX}*"))[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return final


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    """The newest complete checkpoint under ``out_dir/checkpoints``, or ``None``."""
    root = Path(out_dir) / "checkpoints"
    complete = [p for p in sorted(root.glob(f"{_PREFIX}*")) if (p / _STATE).exists()]
    return complete[-1] if complete else None


def load_checkpoint(accelerator: Any, path: str | Path) -> dict[str, Any]:
    """Restore everything ``save_checkpoint`` wrote; returns the run state (``step`` and the recipe's fields)."""
    path = Path(path)
    if not (path / _STATE).exists():
        raise FileNotFoundError(f"{path} is not a complete checkpoint (no {_STATE}); pick another or start over")
    accelerator.load_state(str(path))
    return json.loads((path / _STATE).read_text())
