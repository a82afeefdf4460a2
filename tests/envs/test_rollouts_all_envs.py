"""A rollout with the tiny policy runs in every registered env and writes valid records (``agentgspo rollout``)."""

from __future__ import annotations

import json

import pytest

import agentgspo  # noqa: F401 -- registers the env ids
from agentgspo.cli import main
from agentgspo.registry import registered_ids
from agentgspo.trajectory import read_jsonl


@pytest.mark.parametrize("env_id", registered_ids())
def test_tiny_policy_rollout_writes_valid_records(env_id, tmp_path, capsys):
    # The CLI's own entry point, in process: the same code path as `agentgspo rollout ...` without paying the
    # interpreter and torch start-up once per env.
    status = main(["rollout", "--env", env_id, "--policy", "tiny", "--episodes", "2", "--group-size", "2",
                   "--max-new-tokens", "16", "--out", str(tmp_path)])
    assert status == 0
    out = capsys.readouterr().out
    summary = json.loads(out[out.index("{"):])
    assert summary["episodes"] == 4 and "env_error" not in summary["stop_reasons"], summary
    trajectories = read_jsonl(tmp_path / "trajectories.jsonl")  # validates every record
    assert len(trajectories) == 4
    for trajectory in trajectories:
        assert trajectory.env_id == env_id and len(trajectory.turn_spans) >= 1
        assert trajectory.stop_reason != "env_error", trajectory.metadata
        assert len(trajectory.token_ids) == len(trajectory.loss_mask) == len(trajectory.sampler_logprobs)
