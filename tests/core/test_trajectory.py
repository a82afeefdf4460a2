"""The trajectory record: masks made where tokens are made, validated JSONL on disk."""

from __future__ import annotations

import json

import pytest

from agentgspo.core.sampling import SampledTurn
from agentgspo.core.trajectory import (
    ENDINGS,
    EXCLUDED_STOPS,
    STOP_REASONS,
    TRAINED_STOPS,
    UNCOUNTED_STOPS,
    Trajectory,
    TrajectoryRecord,
    read_jsonl,
    write_jsonl,
)


def make_trajectory(sample_id: int = 0) -> Trajectory:
    t = Trajectory(env_id="agentgspo/Calculator-v0", seed=7, group_id=1, sample_id=sample_id)
    t.append_forced([5, 6, 7])
    t.append_sampled([8, 9], [-0.5, -0.25])
    t.append_forced([10])
    t.append_sampled([11], [-1.5])
    t.messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"},
        {"role": "tool", "name": "calculate", "content": "1"},
        {"role": "assistant", "content": "b"},
    ]
    t.reward = 1.0
    t.stop_reason = "completed"
    t.matches_full_render = True
    t.metadata = {"tool_errors": {"unknown_tool": 1}}
    return t


def test_append_makes_masks_logprobs_and_spans():
    t = make_trajectory()
    assert t.token_ids == [5, 6, 7, 8, 9, 10, 11]
    assert t.loss_mask == [0, 0, 0, 1, 1, 0, 1]
    assert t.sampler_logprobs == [0.0, 0.0, 0.0, -0.5, -0.25, 0.0, -1.5]
    assert t.turn_spans == [(3, 5), (6, 7)]
    assert (t.num_turns, t.num_sampled_tokens) == (2, 3)


def test_append_sampled_needs_one_logprob_per_id():
    with pytest.raises(ValueError, match="expected one log-prob per id, got 1 for 2 ids"):
        Trajectory().append_sampled([1, 2], [-0.1])


def test_mask_turn_zeroes_only_that_turn():
    t = make_trajectory()
    t.mask_turn(0)
    assert t.loss_mask == [0, 0, 0, 0, 0, 0, 1]
    assert t.sampler_logprobs[3:5] == [-0.5, -0.25]  # log-probs stay: only the mask says "do not train"


def test_jsonl_round_trip(tmp_path):
    path = tmp_path / "trajectories.jsonl"
    originals = [make_trajectory(0), make_trajectory(1)]
    assert write_jsonl(originals, path) == 2
    assert write_jsonl([make_trajectory(2)], path, append=True) == 1
    loaded = read_jsonl(path)
    assert loaded == [*originals, make_trajectory(2)]
    assert isinstance(loaded[0].turn_spans[0], tuple)
    record = json.loads(path.read_text().splitlines()[0])
    for name in (
        "token_ids",
        "loss_mask",
        "sampler_logprobs",
        "reward",
        "stop_reason",
        "num_turns",
        "turn_spans",
        "matches_full_render",
    ):
        assert name in record
    assert record["num_turns"] == 2


def test_invalid_line_is_an_error_naming_the_line_number(tmp_path):
    path = tmp_path / "trajectories.jsonl"
    write_jsonl([make_trajectory(0), make_trajectory(1)], path)
    lines = path.read_text().splitlines()
    broken = json.loads(lines[1])
    broken["loss_mask"] = broken["loss_mask"][:-1]
    path.write_text(lines[0] + "\n\n" + json.dumps(broken) + "\n")  # a blank line 2 is skipped, not an error
    with pytest.raises(ValueError, match=r"(?s)trajectories\.jsonl:3: not a valid trajectory record.*equal lengths"):
        read_jsonl(path)
    path.write_text(lines[0] + "\n{not json\n")
    with pytest.raises(ValueError, match=r"trajectories\.jsonl:2: not a valid trajectory record"):
        read_jsonl(path)


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("loss_mask", [0, 0, 0, 1, 2, 0, 1], "loss_mask"),
        ("turn_spans", [(3, 5), (6, 9)], "turn span (6, 9) is outside the 7 token ids"),
        ("stop_reason", "crashed", "stop_reason"),
        ("extra_field", 1, "extra_field"),
    ],
)
def test_record_validation_rejects_inconsistent_records(field, value, expected):
    data = make_trajectory().to_record().model_dump()
    data[field] = value
    with pytest.raises(ValueError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        TrajectoryRecord.model_validate(data)


def test_stop_reasons_are_the_documented_ones():
    assert set(STOP_REASONS) == {
        "completed",
        "max_turns",
        "max_tokens",
        "context_overflow",
        "parse_error",
        "env_budget",
        "end_of_text",
        "env_error",
        "env_timeout",
        "judge_error",
        "sampler_error",
        "infra_error",
        "deadline",
    }


def test_the_endings_table_is_the_one_rule():
    assert set(TRAINED_STOPS) == {
        "completed",
        "max_turns",
        "max_tokens",
        "context_overflow",
        "parse_error",
        "env_budget",
        "end_of_text",
    }
    assert set(UNCOUNTED_STOPS) == set(EXCLUDED_STOPS)  # what is not trained is not counted in pass@k either
    assert {r for r, e in ENDINGS.items() if e.requeue} == {
        "env_timeout",
        "judge_error",
        "sampler_error",
        "infra_error",
        "deadline",
    }


def test_non_finite_values_survive_the_jsonl_round_trip(tmp_path):
    # A backend may report -inf for a token it could not score; what write_jsonl writes, read_jsonl must read.
    t = make_trajectory()
    t.sampler_logprobs[3] = float("-inf")
    t.metadata["note"] = float("nan")
    path = tmp_path / "trajectories.jsonl"
    write_jsonl([t], path)
    (loaded,) = read_jsonl(path)
    assert loaded.sampler_logprobs[3] == float("-inf") and loaded.sampler_logprobs[4] == -0.25
    assert loaded.metadata["note"] != loaded.metadata["note"]  # NaN


def test_each_turn_records_the_policy_version_that_sampled_it(tmp_path):
    t = Trajectory()
    t.append_forced([1])
    t.append_sampled([2], [-0.1], policy_version=4)
    t.append_sampled([3], [-0.2], policy_version=5)
    assert t.turn_versions == [4, 5]
    write_jsonl([t], tmp_path / "t.jsonl")
    assert read_jsonl(tmp_path / "t.jsonl")[0].turn_versions == [4, 5]


def test_records_written_before_versions_existed_still_read(tmp_path):
    data = json.loads(make_trajectory().to_record().model_dump_json())
    del data["turn_versions"]
    (tmp_path / "old.jsonl").write_text(json.dumps(data) + "\n")
    assert read_jsonl(tmp_path / "old.jsonl")[0].turn_versions == [0, 0]
    data["turn_versions"] = [1]
    with pytest.raises(ValueError, match=r"turn_versions: expected one per turn span \(2\), got 1"):
        TrajectoryRecord.model_validate(data)


def test_a_turn_that_straddles_a_weight_update_records_both_versions(tmp_path):
    t = Trajectory()
    t.append_forced([1])
    t.append_sampled([2, 3], [-0.1, -0.2], policy_version=4, policy_version_end=5)  # updated mid-turn
    t.append_sampled([4], [-0.3], policy_version=5)
    assert (t.turn_versions, t.turn_version_ends) == ([4, 5], [5, 5])
    write_jsonl([t], tmp_path / "t.jsonl")
    loaded = read_jsonl(tmp_path / "t.jsonl")[0]
    assert (loaded.turn_versions, loaded.turn_version_ends) == ([4, 5], [5, 5])
    data = json.loads(t.to_record().model_dump_json())
    del data["turn_version_ends"]  # a record written before spans existed: each turn ends where it started
    assert TrajectoryRecord.model_validate(data).turn_version_ends == [4, 5]
    data["turn_version_ends"] = [3, 5]
    with pytest.raises(ValueError, match="cannot end on an older version"):
        TrajectoryRecord.model_validate(data)


def test_per_token_versions_of_a_turn_spanning_an_update_survive_the_jsonl_round_trip(tmp_path):
    """A turn the in-process vLLM engine finished after a weight update (versions 4 then 5 from its third id) keeps
    where the version changed, so each sampled id's staleness can be rebuilt from the record alone; a turn within
    one version needs no boundaries, and prompt and env ids have no version (None)."""
    straddling = SampledTurn([2, 3, 4, 5], [-0.1] * 4, "stop", 4, policy_version_end=5)
    straddling.version_boundaries = [(0, 4), (2, 5)]  # what vllm.to_turn reports for this turn
    plain = SampledTurn([7], [-0.3], "stop", 5)
    t = Trajectory()
    t.append_forced([1])
    for turn in (straddling, plain):
        t.append_sampled(
            turn.token_ids, turn.logprobs, turn.policy_version, turn.policy_version_end, turn.version_boundaries
        )
        t.append_forced([6])
    write_jsonl([t], tmp_path / "t.jsonl")
    loaded = read_jsonl(tmp_path / "t.jsonl")[0]
    assert loaded.turn_version_boundaries == [[(0, 4), (2, 5)], None]
    assert loaded.turn_token_versions() == [straddling.token_versions(), plain.token_versions()]
    assert loaded.token_versions() == [None, 4, 4, 5, 5, None, 5, None]


def test_records_without_version_boundaries_still_read_and_say_what_is_unknown(tmp_path):
    """A record written before boundaries were kept reads with None per turn: a turn within one version still has
    its per-token versions, a turn that spans two (a server's, or an old record's) has None for each of its ids."""
    t = Trajectory()
    t.append_forced([1])
    t.append_sampled([2, 3], [-0.1, -0.2], policy_version=4, policy_version_end=5)  # where it changed: unknown
    t.append_sampled([4], [-0.3], policy_version=5)
    data = json.loads(t.to_record().model_dump_json())
    del data["turn_version_boundaries"]
    (tmp_path / "old.jsonl").write_text(json.dumps(data) + "\n")
    loaded = read_jsonl(tmp_path / "old.jsonl")[0]
    assert loaded.turn_version_boundaries == [None, None]
    assert loaded.turn_token_versions() == [None, [5]]
    assert loaded.token_versions() == [None, None, None, 5]


@pytest.mark.parametrize(
    "boundaries, expected",
    [
        ([[(1, 4), (2, 5)], None], "must start at token 0 with the turn's first version 4"),
        ([[(0, 4), (2, 6)], None], "must end on the turn's last version 5"),
        ([[(0, 4), (0, 5)], None], "token indices must increase inside the turn's 2 ids"),
        ([None], r"expected one per turn span \(2\), got 1"),
    ],
)
def test_version_boundaries_that_contradict_the_turn_are_refused(boundaries, expected):
    t = Trajectory()
    t.append_sampled([2, 3], [-0.1, -0.2], policy_version=4, policy_version_end=5)
    t.append_sampled([4], [-0.3], policy_version=5)
    data = json.loads(t.to_record().model_dump_json())
    data["turn_version_boundaries"] = boundaries
    with pytest.raises(ValueError, match=expected):
        TrajectoryRecord.model_validate(data)
