"""Watching an interactor (the peer of an interactive test) from the backend that runs the solution.

When the peer exits, the backend may have to act on the solution while it still runs: hang up its stdout where
the peer's own pipe does not reach the solution (Docker relays it), and stop it at once when the exit status is a
rejection (``stop_when(status)``), so that a rejected interaction does not wait for the solution's limits.
"""

from __future__ import annotations

import subprocess
import threading
from typing import Callable


class PeerWatch:
    """A thread waiting for ``peer``; on its exit calls ``on_exit(stop)`` once, ``stop`` = ``stop_when(status)``.

    ``finish()`` (when the test is over) makes a later exit do nothing; ``stop_requested`` says whether a stop was
    sent while the test ran."""

    def __init__(self, peer: subprocess.Popen, stop_when: Callable[[int], bool] | None,
                 on_exit: Callable[[bool], None]) -> None:
        self.peer, self.stop_when, self.on_exit = peer, stop_when, on_exit
        self.stop_requested = False
        self._lock = threading.Lock()
        self._finished = False
        self._thread = threading.Thread(target=self._watch, daemon=True, name="agentgspo-peer-watch")
        self._thread.start()

    def _watch(self) -> None:
        status = self.peer.wait()
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
