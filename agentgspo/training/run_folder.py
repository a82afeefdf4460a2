"""A training run's folder: one run's settings, its resumption, its end.

- :func:`check_run_folder`: a folder already holding a run with other settings is refused, naming the differing
  settings and the two ways on (resume it as saved, or a new folder); a finished run is reported as finished.
- :class:`StopSignals`: SIGINT/SIGTERM ask the run to stop at the next step boundary, where it checkpoints; a
  second signal stops at once.
- :class:`RunInterrupted`: raised once the checkpoint is written; its ``exit_status`` is 128 + the signal number
  (130 for SIGINT, 143 for SIGTERM), as a shell reports a process killed by that signal.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agentgspo.core.errors import AgentGSPOError

__all__ = [
    "RunFolderMismatch",
    "RunInterrupted",
    "saved_config",
    "differing_settings",
    "check_run_folder",
    "StopSignals",
]

CONFIG_FILE = "config.json"


class RunFolderMismatch(ValueError, AgentGSPOError):
    """The run folder holds a run whose settings differ from this command's."""


class RunInterrupted(AgentGSPOError):
    """The run stopped on a signal after saving a checkpoint; ``str()`` says how to resume."""

    def __init__(self, signum: int, message: str):
        super().__init__(message)
        self.signum = signum
        self.exit_status = 128 + signum


def saved_config(out: str | Path) -> dict[str, Any] | None:
    """The settings saved in ``out/config.json``, or ``None`` when the folder holds no run."""
    path = Path(out) / CONFIG_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{path} is not valid JSON ({exc}); it is not a run folder written by agentgspo: pass another --out"
        ) from None


def differing_settings(
    saved: dict[str, Any], current: dict[str, Any], ignore: Iterable[str] = (), defaults: dict[str, Any] | None = None
) -> dict:
    """``{name: (saved value, current value)}`` for every setting present in either that differs, except
    ``ignore``. A setting the saved run predates counts as its default from ``defaults`` (it ran as that)."""
    skipped = set(ignore)
    missing = object()
    differ = {}
    for name in sorted(set(saved) | set(current)):
        if name in skipped:
            continue
        before, now = saved.get(name, (defaults or {}).get(name, missing)), current.get(name, missing)
        if before != now:
            differ[name] = (None if before is missing else before, None if now is missing else now)
    return differ


def check_run_folder(
    out: str | Path,
    current: dict[str, Any],
    *,
    command: str,
    flag_of: dict[str, str],
    ignore: Iterable[str] = (),
    defaults: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """Refuse a run folder holding a run with other settings; ``None`` for a new folder or the same run.

    Args:
        out: the run folder.
        current: this command's settings (as the run saves them in ``config.json``).
        command: the command line that runs this recipe, without flags (e.g. ``agentgspo quickstart``).
        flag_of: setting name -> its command-line flag (for the message).
        ignore: settings that do not change what is computed (e.g. the folder, a time cap).
        defaults: each setting's default, standing for a setting the saved run predates.

    Returns the saved settings when they match. Raises :class:`RunFolderMismatch` listing each differing setting
    with both values and the two choices.
    """
    saved = saved_config(out)
    if saved is None:
        return None
    differ = differing_settings(saved, current, ignore, defaults)
    if not differ:
        return saved
    lines = [
        f"  {flag_of.get(name, name)}: {before!r} in the folder, {now!r} in this command"
        for name, (before, now) in differ.items()
    ]
    as_saved = " ".join(
        [
            command,
            f"--out {out}",
            *(
                f"{flag_of[name]} {_shell_value(before)}"
                for name, (before, _) in differ.items()
                if name in flag_of and before is not None
            ),
        ]
    )
    raise RunFolderMismatch(
        f"{out} already holds a run with other settings:\n"
        + "\n".join(lines)
        + f"\nEither resume it as saved: {as_saved}\nor start a new run: pass another --out (or delete {out})"
    )


def _shell_value(value: Any) -> str:
    import shlex

    return shlex.quote(value if isinstance(value, str) else json.dumps(value))


class StopSignals:
    """Within the block, SIGINT and SIGTERM set :attr:`signum` (the run stops at its next step boundary and
    checkpoints); a second one raises ``KeyboardInterrupt`` at once. Previous handlers are restored on exit.

    The same signal again within :attr:`SAME_REQUEST_S` of the first is the same request, not a second one: a
    Ctrl-C (or ``agentgspo fleet run``'s forwarding) reaches the whole process group, and under a multi-process
    ``accelerate launch`` torchrun's agent forwards it to its workers too, so each worker gets it twice at once.

    Only the main thread can install handlers; elsewhere the block does nothing (signals keep their handlers).
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)
    SAME_REQUEST_S = 1.0

    def __init__(self, announce: bool = True):
        self.signum: int | None = None
        self.announce = announce
        self._previous: dict[int, Any] = {}
        self._received_at = 0.0

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None:
            if signum == self.signum and time.monotonic() - self._received_at < self.SAME_REQUEST_S:
                return  # the same request, delivered twice (the group's signal and a launcher's forwarding)
            raise KeyboardInterrupt(f"{signal.Signals(signum).name} again: stopped without saving")
        self.signum, self._received_at = signum, time.monotonic()
        if self.announce:
            print(
                f"\n{signal.Signals(signum).name}: stopping after this step to save a checkpoint "
                "(send it again to stop at once, without saving)",
                file=sys.stderr,
                flush=True,
            )

    def __enter__(self) -> StopSignals:
        import threading

        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    @property
    def name(self) -> str:
        """The received signal's name (e.g. ``SIGINT``)."""
        return signal.Signals(self.signum).name if self.signum is not None else ""
