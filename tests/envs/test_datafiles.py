"""The envs' shared data-file helpers: the loaded-once cache, row loading and its errors, tool output text."""

from __future__ import annotations

import json
import threading
import time

import pytest

from agentgspo.envs.datafiles import LoadedOnce, jsonl_objects, load_rows, loaded_row_sets, read_data_file, task_index
from agentgspo.envs.tool_output import format_tool_output


def test_concurrent_gets_load_each_key_once():
    cache: LoadedOnce[str, object] = LoadedOnce()
    loads = {"a": 0, "b": 0}
    start = threading.Barrier(16)
    results: list[tuple[str, object]] = []

    def load(key: str) -> object:
        loads[key] += 1
        time.sleep(0.02)  # a slow load: the other threads arrive while it runs
        return object()

    def worker(key: str) -> None:
        start.wait()
        results.append((key, cache.get(key, lambda: load(key))))

    threads = [threading.Thread(target=worker, args=("ab"[i % 2],)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert loads == {"a": 1, "b": 1}
    assert len({id(value) for key, value in results if key == "a"}) == 1
    assert len({id(value) for key, value in results if key == "b"}) == 1
    assert sorted(key for key, _ in cache.items()) == ["a", "b"] and len(cache.values()) == 2


def test_a_failed_load_is_not_cached():
    cache: LoadedOnce[str, int] = LoadedOnce()

    def broken() -> int:
        raise ValueError("bad row")

    with pytest.raises(ValueError, match="bad row"):
        cache.get("key", broken)
    assert cache.values() == []
    assert cache.get("key", lambda: 7) == 7 and cache.get("key", broken) == 7


def test_a_missing_file_names_the_path_and_loads_once_it_exists(tmp_path):
    path = tmp_path / "later.jsonl"
    with pytest.raises(FileNotFoundError, match=r"later\.jsonl.*data_files="):
        load_rows(path, ("question", "answer"))
    path.write_text(json.dumps({"question": "q?", "answer": "a", "extra": 1}) + "\n")
    rows = load_rows(path, ("question", "answer"))
    assert rows == [{"question": "q?", "answer": "a"}] and load_rows(str(path), ["question", "answer"]) is rows
    assert (("question", "answer"), rows) in loaded_row_sets()


def test_bad_rows_name_the_row(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"q": "x"}) + "\n\n" + json.dumps({"q": 42}) + "\n")
    with pytest.raises(ValueError, match=r"bad\.jsonl: row 2: field 'q' must be a non-empty string"):
        load_rows(path, ("q",))


def test_jsonl_lines_keep_their_numbers_and_bad_lines_are_named(tmp_path):
    path = tmp_path / "rows.jsonl"
    assert list(jsonl_objects('{"a": 1}\n\n[2]\n', path)) == [(1, {"a": 1}), (3, [2])]
    path.write_text('{"a": 1}\n{broken\n')
    with pytest.raises(ValueError, match=r"rows\.jsonl: line 2 is not valid JSON"):
        read_data_file(path)


def test_tool_output_is_truncated_noted_or_hinted():
    assert format_tool_output("abcdef", 3) == "abc\n[output truncated to 3 characters]"
    assert format_tool_output("out", 10, "killed") == "out\n[killed]"
    assert format_tool_output("", 10, "killed") == "[killed]"
    assert format_tool_output(" \n", 10) == "[no output; print() the values you want to see]"


def test_task_index_takes_numpy_integers_and_refuses_bools():
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(0)
    assert [task_index(None, {"index": i}, 5, rng) for i in np.arange(5)] == [0, 1, 2, 3, 4]
    assert type(task_index(None, {"index": np.int64(2)}, 5, rng)) is int
    with pytest.raises(ValueError, match=r"options\['index'\]: expected an int in \[0, 5\), got True"):
        task_index(None, {"index": True}, 5, rng)


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("empty.csv", "", r"empty\.csv: the CSV file is empty"),
        ("broken.json", "{not json", r"broken\.json: could not read it as json"),
    ],
)
def test_unreadable_data_files_are_errors_naming_the_file(tmp_path, name, content, match):
    pytest.importorskip("datasets")
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ValueError, match=match):
        read_data_file(path)
