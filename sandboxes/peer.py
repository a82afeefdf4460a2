"""Watching an interactor (the peer of an interactive test) from the backend that runs the solution.

When the peer exits, the backend may have to act on the solution while it still runs: hang up its stdout where
the peer's own pipe does not reach the solution (Docker relays it), and stop it at once when the exit status is a
rejection (``stop_when(status)``), so that a rejected interaction does not wait for the solution's limits. While
it runs, the backend is told each time the peer has been blocked for ``DEADLOCK_S`` (``on_idle``): the runner then
ends a deadlock (both sides waiting for each other) at once instead of at the wall guard.
"""

from __future__ import annotations

import subprocess
import threading
import time
from typing import Callable

from .runner import ACTIVITY_SAMPLE_S, DEADLOCK_S, IdleClock


class PeerWatch:
    """A thread waiting for ``peer``; on its exit calls ``on_exit(stop)`` once, ``stop`` = ``stop_when(status)``.
    With ``on_idle``, a second thread samples the peer's process tree every ``ACTIVITY_SAMPLE_S`` and calls
    ``on_idle()`` once it has been blocked (no thread runnable, no CPU used) for ``DEADLOCK_S``, and again every
    ``DEADLOCK_S`` while it stays so.

    ``finish()`` (when the test is over) makes a later exit or idleness do nothing; ``stop_requested`` says whether
    a stop was sent while the test ran."""

    def __init__(
        self,
        peer: subprocess.Popen,
        stop_when: Callable[[int], bool] | None,
        on_exit: Callable[[bool], None],
        on_idle: Callable[[], None] | None = None,
    ) -> None:
        self.peer, self.stop_when, self.on_exit, self.on_idle = peer, stop_when, on_exit, on_idle
        self.stop_requested = False
        self._lock = threading.Lock()
        self._finished = False
        self._over = threading.Event()  # the peer exited or the test is over
        self._thread = threading.Thread(target=self._watch, daemon=True, name="agentgspo-peer-watch")
        self._thread.start()
        if on_idle is not None:
            threading.Thread(target=self._watch_idle, daemon=True, name="agentgspo-peer-idle").start()

    def _watch_idle(self) -> None:
        clock, told = IdleClock(self.peer.pid), None
        while not self._over.wait(ACTIVITY_SAMPLE_S):
            now = time.monotonic()
            if clock.sample(now) < DEADLOCK_S or (told is not None and now - told < DEADLOCK_S):
                continue
            told = now
            with self._lock:
                if self._finished:
                    return
                try:
                    self.on_idle()
                except OSError:
                    return  # the box ended meanwhile

    def _watch(self) -> None:
        status = self.peer.wait()
        self._over.set()
        stop = bool(self.stop_when and self.stop_when(status))
        with self._lock:
            if self._finished:
                return
            self.stop_requested = stop
            try:
                self.on_exit(stop)
            except OSError:
                pass  # the box ended meanwhile

    def finish(self) -> bool:
        """The test is over: ignore the peer from now on. Returns whether a stop was requested."""
        self._over.set()
        with self._lock:
            self._finished = True
            return self.stop_requested


def mark_stop_requested(events: list[dict], stop_requested: bool) -> list[dict]:
    """Record on the test's event whether the judge asked the runner to stop the solution (the runner's own
    ``stopped`` flag counts only then: the solution shares the runner's uid and could send it the signal)."""
    for event in events:
        if event.get("event") == "test":
            event["stop_requested"] = stop_requested
    return events
