"""Data files of the bundled envs: where the built-in ones live, reading a file into rows, caching what was read.

Every dataset-backed env (Math-v0, Search-v0, Code-v0, CodeForces-v0) reads its files once per process and shares
the result between all its instances and threads: :class:`LoadedOnce` is that cache. :func:`load_rows` is the
loader for flat files of string fields (math problems, search questions and documents); envs with richer rows build
their own objects from :func:`read_data_file` and cache them in a :class:`LoadedOnce` of their own.
"""

from __future__ import annotations

import json
import numbers
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

DATA_FILE_SUFFIXES = {".json": "json", ".parquet": "parquet", ".csv": "csv"}  # read through `datasets`


# ----------------------------------------------------------------------------------------------- paths


def builtin_path(name: str) -> Path:
    """Path of a data file shipped in ``agentgspo.envs.data``."""
    return Path(str(resources.files("agentgspo.envs.data").joinpath(name)))


def resolved_path(path: str | Path) -> Path:
    """``path`` with ``~`` expanded, absolute and without links: the key a file is cached under."""
    return Path(path).expanduser().resolve()


def existing_file(path: Path, what: str, fix: str) -> Path:
    """``path`` when it is a file; else ``FileNotFoundError``: ``"{what} '{path}' does not exist; {fix}"``."""
    if not path.is_file():
        raise FileNotFoundError(f"{what} {str(path)!r} does not exist; {fix}")
    return path


# ----------------------------------------------------------------------------------------------- reading


def jsonl_objects(text: str, path: Path) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for each non-blank line of JSONL ``text`` read from ``path`` (numbers are 1-based).

    Raises ``ValueError`` naming the path and the line when a line is not valid JSON.
    """
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: line {number} is not valid JSON ({exc.msg}); fix or delete it") from None


def read_data_file(path: Path) -> list[Any]:
    """The rows of a .jsonl (read with ``json``), .json, .parquet or .csv file (read with ``datasets``; CSV fields
    stay strings).

    Raises ``ValueError`` for an unknown suffix or a bad JSONL line, ``ImportError`` (with the install command) when
    a non-JSONL file needs ``datasets`` and it is missing.
    """
    if path.suffix == ".jsonl":  # stdlib: no `datasets` import (~1 s) for the common case
        return [row for _, row in jsonl_objects(path.read_text(encoding="utf-8"), path)]
    try:
        import datasets
    except ImportError as exc:
        raise ImportError(f"reading {path.suffix} files needs `datasets`: pip install 'agentgspo[data]'") from exc
    kind = DATA_FILE_SUFFIXES.get(path.suffix)
    if kind is None:
        raise ValueError(f"{path}: expected a .jsonl, .json, .parquet or .csv file, got {path.suffix or 'no suffix'!r}")
    features = None
    if kind == "csv":  # CSV has no types: keep every field as its text (pandas would make "42" an int64)
        import csv

        with path.open(newline="", encoding="utf-8") as file:
            header = next(csv.reader(file), [])
        if not header:
            raise ValueError(f"{path}: the CSV file is empty; expected a header line naming the fields, then rows")
        features = datasets.Features({name: datasets.Value("string") for name in header})
    try:
        return list(datasets.load_dataset(kind, data_files=str(path), split="train", features=features))
    except datasets.exceptions.DatasetGenerationError as exc:  # the parser's own error is a few causes deep
        cause = exc.__cause__ or exc
        raise ValueError(f"{path}: could not read it as {kind}: {type(cause).__name__}: {cause}") from exc


# ----------------------------------------------------------------------------------------------- caching


class LoadedOnce(Generic[K, V]):
    """Values loaded at most once per process per key, shared by all threads.

    :meth:`get` runs the loader under the cache's lock, so concurrent callers of one key wait for the first load
    and all get the same object. A loader that raises stores nothing: the error reaches the caller and the next
    :meth:`get` tries again. The loader must not call :meth:`get` of the same cache (the lock is not reentrant).
    """

    def __init__(self) -> None:
        self._values: dict[K, V] = {}
        self._lock = threading.Lock()

    def get(self, key: K, load: Callable[[], V]) -> V:
        """The value stored under ``key``, loading and storing it with ``load()`` when there is none yet."""
        with self._lock:
            if key not in self._values:
                self._values[key] = load()
            return self._values[key]

    def items(self) -> list[tuple[K, V]]:
        """A snapshot of the ``(key, value)`` pairs loaded so far (for oracles that look up a task's answer)."""
        with self._lock:
            return list(self._values.items())

    def values(self) -> list[V]:
        """A snapshot of the values loaded so far."""
        return [value for _, value in self.items()]


_row_sets: LoadedOnce[tuple[str, tuple[str, ...]], list[dict[str, str]]] = LoadedOnce()


def _string_fields(row: Any, fields: Sequence[str], where: str) -> dict[str, str]:
    """The ``fields`` of one row, each a non-empty string; ``ValueError`` naming ``where`` and the fix."""
    if not isinstance(row, dict):
        raise ValueError(f"{where}: expected an object with fields {list(fields)}, got {type(row).__name__}")
    for name in fields:
        if name not in row:
            close = [k for k in row if k.lower() in name.lower() or name.lower() in k.lower()]
            hint = (
                f" (it has {sorted(row)}; pass {name}_field={close[0]!r}?)"
                if close
                else f" (it has {sorted(row)}; rename the field or pass the *_field option)"
            )
            raise ValueError(f"{where}: missing field {name!r}{hint}")
        if not isinstance(row[name], str) or not row[name].strip():
            raise ValueError(
                f"{where}: field {name!r} must be a non-empty string, got "
                f'{row[name]!r}; quote numbers in the file ("answer": "42")'
            )
    return {name: row[name] for name in fields}


def _read_string_rows(path: Path, fields: tuple[str, ...]) -> list[dict[str, str]]:
    """Every row of the file at ``path`` reduced to its string ``fields`` (see :func:`load_rows`)."""
    existing_file(path, "dataset file", "pass the path of a local .jsonl/.json/.parquet/.csv file (data_files=...)")
    rows = [
        _string_fields(row, fields, f"{path}: row {number}") for number, row in enumerate(read_data_file(path), start=1)
    ]
    if not rows:
        raise ValueError(f"{path}: no rows; expected one object per line with fields {list(fields)}")
    return rows


def load_rows(path: str | Path, fields: Sequence[str]) -> list[dict[str, str]]:
    """Rows of a local dataset file with the str ``fields`` of each row; read once per process (thread-safe).

    Raises ``FileNotFoundError`` naming the path, or ``ValueError`` naming the first bad row (1-based, as in the
    file's lines for JSONL) and the fix: a row that is not an object, lacks a field, or has a non-str/empty one.
    """
    path = resolved_path(path)
    fields = tuple(fields)
    return _row_sets.get((str(path), fields), lambda: _read_string_rows(path, fields))


def loaded_row_sets() -> list[tuple[tuple[str, ...], list[dict[str, str]]]]:
    """``(fields, rows)`` of every file :func:`load_rows` has read in this process, in loading order."""
    return [(fields, rows) for (_, fields), rows in _row_sets.items()]


# ----------------------------------------------------------------------------------------------- tasks


def task_index(seed: int | None, options: dict[str, Any] | None, n: int, np_random: Any) -> int:
    """Row to pose: ``options["index"]``, else ``seed % n`` (seeds enumerate the dataset), else a random row."""
    index = (options or {}).get("index")
    if index is None:
        return seed % n if seed is not None else int(np_random.integers(n))
    if not isinstance(index, numbers.Integral) or isinstance(index, bool) or not 0 <= index < n:  # numpy ints too
        raise ValueError(f"options['index']: expected an int in [0, {n}), got {index!r}")
    return int(index)
