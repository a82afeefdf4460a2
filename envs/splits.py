"""Held-out splits of the dataset envs, and what the training loop makes of them.

Every dataset env (Math-v0, Search-v0, Code-v0, CodeForces-v0) poses ``seed % n`` of its rows, so seeds alone
cannot hold an evaluation out: eval seed 3 and training seed 1_000_003 may pose the same problem. Each takes
``split=``:

- ``"all"`` (the default: ``agentgspo eval``, ``rollout`` and users see every row, as before);
- ``"train"``: every row but the held-out ones; the training loop asks for it (``TrainConfig.train_env_kwargs``);
- ``"test"``: only the held-out rows; the final evaluation plays them (``TrainConfig.final_eval_env_kwargs``).

What the training loop makes of an env's split (``held_out_by``, the refusals) is
:mod:`agentgspo.environments.held_out`: the library reads the envs' declarations, never this folder.

The rule (:func:`held_out_indices`): a row is held out when the SHA-256 of its key (the env names it: the problem
text, the question, the problem id), read as a number in [0, 1), is below :data:`TEST_FRACTION`. A row's side
depends on its key alone, so adding or removing other rows never moves it, and duplicated problems (same key)
land on the same side. Each side keeps at least one row: when no key falls below the fraction (tiny datasets),
the row with the smallest hash is held out; when every key does, the one with the largest trains. An env may take
an explicit list instead (CodeForces-v0's ``held_out`` ids). A dataset of one row has no split (an error).

Procedural envs (Calculator-v0 makes its arithmetic from the seed) have no finite task list: there, evaluation
seeds from a range disjoint from the training seeds are held out. An env class says which it is with
``held_out_by`` (read by :mod:`agentgspo.environments.held_out`): ``"split"``, ``"seeds"``, or ``None``.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from agentgspo.envs.datafiles import LoadedOnce

__all__ = [
    "SPLITS",
    "TEST_FRACTION",
    "held_out_fraction",
    "held_out_indices",
    "split_indices",
]

SPLITS = ("all", "train", "test")
TEST_FRACTION = 0.2  # about one row in five is held out
_chosen: LoadedOnce[tuple, tuple[Sequence[Any], list[int]]] = LoadedOnce()


def held_out_fraction(key: str) -> float:
    """SHA-256 of ``key`` as a number in [0, 1): the same on every machine and Python (unlike ``hash``)."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") / 2**64


def held_out_indices(keys: Sequence[str], held_out: Sequence[str] | None = None, *, what: str = "rows") -> set[int]:
    """Indices of the held-out rows among rows with these ``keys``: those whose key is in ``held_out`` when given,
    else the hash rule of the module docstring. Errors (``ValueError``) for fewer than two rows, an unknown
    ``held_out`` key (naming close ones) or a ``held_out`` list that holds every row out."""
    if len(keys) < 2:
        raise ValueError(f"split: {what} has {len(keys)} row(s); a held-out split needs two or more (use split='all')")
    if held_out is not None:
        return _listed(keys, held_out, what)
    fractions = [held_out_fraction(key) for key in keys]
    chosen = {i for i, f in enumerate(fractions) if f < TEST_FRACTION}
    if not chosen:
        chosen = {min(range(len(keys)), key=fractions.__getitem__)}
    if len(chosen) == len(keys):
        chosen.discard(max(range(len(keys)), key=fractions.__getitem__))
    return chosen


def _listed(keys: Sequence[str], held_out: Sequence[str], what: str) -> set[int]:
    """Indices of the rows whose key is in ``held_out`` (see :func:`held_out_indices`)."""
    if isinstance(held_out, str):
        raise ValueError(f"held_out: expected a list of ids, got the string {held_out!r}; write [{held_out!r}]")
    known = set(keys)
    for key in held_out:
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=3)
            hint = f"; close ones: {', '.join(close)}" if close else f"; ids are e.g. {', '.join(list(keys)[:5])}"
            raise ValueError(f"held_out: no {key!r} in {what}{hint}")
    chosen = {i for i, key in enumerate(keys) if key in set(held_out)}
    if len(chosen) == len(keys):
        raise ValueError(f"held_out: holds out all {len(keys)} of {what}, leaving nothing to train on; list fewer")
    return chosen


def split_indices(
    rows: Sequence[Any],
    split: str,
    key: Callable[[Any], str],
    *,
    key_name: str,
    held_out: Sequence[str] | None = None,
    what: str = "rows",
) -> list[int]:
    """Indices, in order, of the ``rows`` of ``split`` (``"all"``, ``"train"`` or ``"test"``, see the module
    docstring); ``key(row)`` is a row's key, ``key_name`` names it (what ``key`` reads, e.g. ``"problem"``).
    Cached per rows list, split and key (the envs' lists are loaded once per process), so an env made per episode
    does not hash its dataset again."""
    if split not in SPLITS:
        raise ValueError(f"split: expected one of {', '.join(SPLITS)}, got {split!r}")
    if split == "all" and held_out is None:
        return list(range(len(rows)))
    cache_key = (id(rows), split, key_name, None if held_out is None else tuple(held_out))
    owner, indices = _chosen.get(cache_key, lambda: (rows, _indices_of(rows, split, key, held_out, what)))
    if owner is not rows:  # another list with a recycled id (never the envs' cached lists): compute afresh
        return _indices_of(rows, split, key, held_out, what)
    return list(indices)


def _indices_of(
    rows: Sequence[Any], split: str, key: Callable[[Any], str], held_out: Sequence[str] | None, what: str
) -> list[int]:
    """The uncached :func:`split_indices` (``"all"`` with ``held_out`` only checks the ids)."""
    keys = [key(row) for row in rows]
    if split == "all":
        _listed(keys, held_out, what)  # a wrong id is an error whatever the split
        return list(range(len(rows)))
    test = held_out_indices(keys, held_out, what=what)
    return [i for i in range(len(rows)) if (i in test) == (split == "test")]
