"""A trajectory's tokens split into what the loss trains and what it does not, as text runs for viewers.

Kinds, from the trajectory's own ``loss_mask`` and ``turn_spans`` (nothing re-derived):

- ``prompt``: ids before the first sampled turn (system prompt, statement, template glue): mask 0;
- ``trained``: ids of a sampled turn with mask 1 (the loss trains these);
- ``masked``: ids of a sampled turn with mask 0 (the env excluded the turn, e.g. a judge error);
- ``env``: ids after the first sampled turn that the policy did not sample (tool outputs, template glue): mask 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

KINDS = ("prompt", "trained", "masked", "env")


def token_kinds(token_ids: Sequence[int], loss_mask: Sequence[int], turn_spans: Sequence[Sequence[int]]) -> list[str]:
    """The kind of every id (see the module docstring)."""
    kinds = ["prompt"] * len(token_ids)
    first = min((start for start, _ in turn_spans), default=len(token_ids))
    for i in range(first, len(token_ids)):
        kinds[i] = "env"
    for start, end in turn_spans:
        for i in range(start, end):
            kinds[i] = "trained" if loss_mask[i] else "masked"
    for i, masked in enumerate(loss_mask):  # a 1 outside every span would be trained too: show it as such
        if masked and kinds[i] != "trained":
            kinds[i] = "trained"
    return kinds


def segments(record: dict[str, Any], decode) -> list[list[Any]]:
    """``[[kind, text, n_ids], ...]``: maximal runs of one kind, each decoded with ``decode(ids)``."""
    ids = record["token_ids"]
    kinds = token_kinds(ids, record["loss_mask"], record["turn_spans"])
    runs: list[list[Any]] = []
    start = 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or kinds[i] != kinds[start]:
            runs.append([kinds[start], decode(ids[start:i]), i - start])
            start = i
    return runs
