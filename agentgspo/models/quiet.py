"""Library output that says nothing to a user, turned off for one call only (never a global filter).

transformers draws a progress bar for every load ("Loading weights") and save ("Writing model shards"): for the
tiny policy it is 35 tensors in a millisecond, noise at the top of every command.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def no_transformers_progress_bars() -> Iterator[None]:
    """Within the block, transformers draws no progress bars; the previous setting is restored on exit."""
    from transformers.utils import logging

    was_enabled = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            logging.enable_progress_bar()
