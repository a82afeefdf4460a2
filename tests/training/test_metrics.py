"""Run logging: config at start, one JSONL line per step, resume drops lines past the checkpoint, plots."""

import json
import math

import pytest

from agentgspo.training.metrics import MetricsLogger, moving_average, plot_training, read_metrics


def test_logger_writes_config_lines_and_tensorboard(tmp_path):
    logger = MetricsLogger(tmp_path, {"lr": 1e-3, "objective": "gspo"})
    for step in (1, 2, 3):
        logger.log(step, {"reward_mean": step / 10, "loss": float("nan"), "note": "x"})
    logger.close()
    assert json.loads((tmp_path / "config.json").read_text()) == {"lr": 1e-3, "objective": "gspo"}
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3] and rows[2]["reward_mean"] == 0.3 and math.isnan(rows[0]["loss"])
    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))


def test_resume_drops_steps_logged_after_the_checkpoint(tmp_path):
    logger = MetricsLogger(tmp_path, {})
    for step in range(1, 6):
        logger.log(step, {"reward_mean": 0.0})
    logger.close()  # the run died after step 5; its last checkpoint was step 3
    resumed = MetricsLogger(tmp_path, {}, resume_step=3, backends=())
    resumed.log(4, {"reward_mean": 1.0})
    assert [(r["step"], r["reward_mean"]) for r in read_metrics(tmp_path / "metrics.jsonl")] == [
        (1, 0.0),
        (2, 0.0),
        (3, 0.0),
        (4, 1.0),
    ]


def test_disabled_logger_writes_nothing(tmp_path):
    logger = MetricsLogger(tmp_path / "rank1", {"lr": 1}, enabled=False)
    logger.log(1, {"reward_mean": 1.0})
    logger.close()
    assert not (tmp_path / "rank1").exists()


def test_moving_average_skips_missing_values():
    assert moving_average([1.0, 3.0, 5.0, 7.0], 2) == [1.0, 2.0, 4.0, 6.0]
    nan = float("nan")
    smoothed = moving_average([nan, 1.0, nan, 3.0, 5.0], 2)  # one step without the metric must not poison the rest
    assert math.isnan(smoothed[0]) and smoothed[1:] == [1.0, 1.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="window"):
        moving_average([1.0], 0)


def test_plot_training_writes_a_png(tmp_path):
    metrics = [{"step": s, "reward_mean": s / 20, "success": s / 20} for s in range(1, 21)]
    warm = [{"step": 50 * i, "success": 0.1 * i} for i in range(5)]
    plot_training(metrics, tmp_path / "reward.png", warm_start=warm, demonstrator_success=0.4)
    assert (tmp_path / "reward.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
