"""The MoE study recipe at its smoke size: one command runs every variant and writes the table, gap and figures."""

from __future__ import annotations

import pytest
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _recipe():
    """recipes/moe_study.py as a module (recipes/ is not a package path; its math.py would shadow the library)."""
    spec = importlib.util.spec_from_file_location("moe_study", ROOT / "recipes" / "moe_study.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_smoke_study_runs_every_variant_and_its_table_matches_the_metrics_files(tmp_path):
    out = tmp_path / "study"
    done = subprocess.run(
        [sys.executable, str(ROOT / "recipes" / "moe_study.py"), "--smoke", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    moe_study = _recipe()
    from agentgspo.training.metrics import read_metrics

    table = json.loads((out / "table.json").read_text())
    assert set(table["variants"]) == set(moe_study.VARIANTS)
    assert table["size"]["seeds"] == 1 and table["size"]["steps"] == 2
    for variant, row in table["variants"].items():
        rows = read_metrics(out / "runs" / f"{variant}-s0" / "metrics.jsonl")
        assert len(rows) == 2
        again = moe_study.summarize_run(rows)
        for key, value in again.items():
            assert (math.isnan(value) and math.isnan(row[key])) or row[key] == value, (variant, key)
        config = json.loads((out / "runs" / f"{variant}-s0" / "config.json").read_text())
        for key, value in moe_study.VARIANTS[variant].items():
            assert config[key] == value, (variant, key)
    gaps = json.loads((out / "gap.json").read_text())
    assert {"gap_live", "gap_replayed"} <= set(gaps[0])
    for name in ("reward", "clip", "volatility"):
        assert (out / f"{name}.png").stat().st_size > 0


def test_collapse_is_counted_when_success_ends_below_half_its_best():
    moe_study = _recipe()
    rising = [{"success": s} for s in (0.1, 0.4, 0.6, 0.7, 0.8, 0.8)]
    falling = [{"success": s} for s in (0.6, 0.8, 0.8, 0.3, 0.1, 0.0)]
    assert moe_study.summarize_run(rising)["collapsed"] == 0.0
    assert moe_study.summarize_run(falling)["collapsed"] == 1.0


def test_rollout_replay_with_a_vllm_sampler_is_refused_with_the_reason():
    import pytest

    from agentgspo.training.train import TrainConfig

    with pytest.raises(ValueError, match="routing_replay 'rollout' needs the sampler's expert choices"):
        TrainConfig(routing_replay="rollout", backend="vllm")


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def test_the_reports_tables_are_what_its_committed_metrics_files_give():
    # docs/moe_study.md reports studies whose outputs are committed under docs/moe_study/NAME/: each table is
    # recomputed from the runs' metrics files, and each of its rows appears in the report as the recipe prints it.
    moe_study = _recipe()
    from agentgspo.training.metrics import read_metrics

    report = (ROOT / "docs" / "moe_study.md").read_text()
    studies = sorted(path.parent for path in (ROOT / "docs" / "moe_study").glob("*/table.json"))
    assert studies, "no study outputs under docs/moe_study/"
    for study in studies:
        saved = json.loads((study / "table.json").read_text())
        runs = {
            variant: [
                read_metrics(study / "runs" / f"{variant}-s{seed}" / "metrics.jsonl")
                for seed in range(saved["size"]["seeds"])
            ]
            for variant in saved["variants"]
        }
        table = moe_study.make_table(runs)
        for variant, row in table.items():
            assert all(_same(value, saved["variants"][variant][key]) for key, value in row.items()), (study, variant)
        for line in moe_study.table_markdown(table)[2:]:
            assert line in report, (study.name, line)
