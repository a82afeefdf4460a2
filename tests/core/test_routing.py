"""The routing record on disk: a record whose data does not match its shape is refused where it is read."""

from __future__ import annotations

import base64
import json

import pytest

from agentgspo.core.routing import RoutingRecord
from agentgspo.core.trajectory import Trajectory, read_jsonl, write_jsonl


def _routed(record: dict) -> Trajectory:
    t = Trajectory(env_id="agentgspo/Calculator-v0", seed=0, group_id=0, sample_id=0)
    t.append_forced([5, 6])
    t.append_sampled([7], [-0.5])
    t.routed_experts = record
    return t


def _record(shape: list[int], payload: bytes, dtype: str = "uint8") -> dict:
    return {"shape": shape, "dtype": dtype, "data": base64.b64encode(payload).decode("ascii")}


def test_a_whole_record_round_trips_as_written(tmp_path):
    record = _record([3, 2, 1], bytes([0, 1, 2, 3, 255, 255]))
    write_jsonl([_routed(record)], tmp_path / "t.jsonl")
    (back,) = read_jsonl(tmp_path / "t.jsonl")
    assert back.routed_experts == record
    assert json.loads((tmp_path / "t.jsonl").read_text())["routed_experts"] == record


@pytest.mark.parametrize(
    "record, message",
    [
        (_record([3, 2, 1], bytes([0, 1, 2, 3])), "data holds 4 bytes, but shape (3, 2, 1) of uint8 needs 6"),
        (_record([3, 2, 1], bytes(6), dtype="int16"), "shape (3, 2, 1) of int16 needs 12"),
        ({"shape": [1, 1, 1], "dtype": "uint8", "data": "not base64!"}, "data is not base64"),
        (_record([1, 1, 1], bytes(1), dtype="int8"), "dtype"),
        (_record([1, 1], bytes(1)), "shape"),
        (_record([4, 1, 1], bytes(4)), "at most one row per token id"),  # 3 token ids
    ],
)
def test_a_record_that_does_not_match_its_shape_is_refused_naming_the_line(tmp_path, record, message):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(_routed(_record([3, 1, 1], bytes(3))).to_record().model_dump(mode="json")) + "\n")
    line = _routed(_record([3, 1, 1], bytes(3))).to_record().model_dump(mode="json") | {"routed_experts": record}
    with path.open("a") as f:
        f.write(json.dumps(line) + "\n")
    with pytest.raises(ValueError, match=r"t\.jsonl:2: not a valid trajectory record") as error:
        read_jsonl(path)
    assert message in str(error.value)


def test_the_record_type_is_strict_about_its_fields():
    with pytest.raises(ValueError, match="extra"):
        RoutingRecord(shape=(1, 1, 1), dtype="uint8", data="AA==", experts=8)
