"""Rollouts ahead of the learner: groups played in a background thread under a staleness bound.

A synchronous loop plays a batch, trains on it, then plays the next: the learner idles while the slowest episode of
the batch finishes, and the sampler idles while the learner trains. :class:`RolloutProducer` keeps playing groups
(the ``group_size`` episodes of one prompt) while the learner trains, at most ``max_staleness`` policy versions
ahead (one version = one weight update of the sampler).

- Admission (SkyRL's rule): groups taken by the learner, plus those running or finished and waiting, never exceed
  ``(max_staleness + versions since start + 1) x batch``. With ``max_staleness=0`` that is one batch per version: the
  synchronous loop, the same groups with the same seeds, played on the same weights.
- Which groups a step takes: ``order="data"`` the ``batch`` oldest data positions (waiting for them if they still
  run; the sampler keeps playing the next ones meanwhile), so the batches are those of the synchronous loop, each
  played at most ``max_staleness`` versions behind; ``order="completion"`` the first ``batch`` groups to finish (no
  waiting for a slow group), dropping a group whose oldest turn is more than ``max_staleness`` versions behind
  (its prompt goes back to the front of the queue and is played again, same seeds, on newer weights;
  ``dropped_groups``). Replays are bounded: a group dropped ``max_drops`` times is trained on its next finish
  however stale, with the decoupled correction that exists for it (``trained_beyond_staleness``). Unbounded, a group
  slower than about S + 1 learner steps would be dropped for the rest of the run, and training would drift towards
  the short (in agentic RL, the easier) episodes.
- A group's place in the data decides its prompts and sampling seeds (``plan(index)``), never the time it ran, so a
  run replays its data order whatever the timing.
- The invariant, under both orders and across a resume: every data position below ``next_index`` is trained exactly
  once, or recorded as filtered by a sampling rule (:meth:`RolloutProducer.filter`), or still pending; never two of
  these, never trained twice (:meth:`RolloutProducer.take` raises rather than train a position again).
- A checkpoint saves :meth:`state`: the next data position, the positions admitted but not yet trained (with how
  often each was dropped), and the trained and filtered positions (as ``[start, end)`` ranges). Resumed, the pending
  positions are played first, on the resumed weights; the groups running or finished but untrained when the run
  stopped are not kept (nothing is trained twice, no prompt is skipped).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agentgspo.rollouts.rollout import RolloutRunner
from agentgspo.core.trajectory import Trajectory

__all__ = ["Group", "RolloutProducer"]

ORDERS = ("data", "completion")
T = TypeVar("T")


@dataclass
class Group:
    """One prompt's ``group_size`` episodes, played by the producer."""

    index: int  # data position (this process's): what the prompts and seeds follow
    trajectories: list[Trajectory]
    admitted_version: int  # the sampler's version when the group started
    drops: int = 0  # times this data position was played and dropped as too stale before this play
    oldest_version: int = field(init=False)  # the oldest version that sampled any of its turns

    def __post_init__(self) -> None:
        versions = [v for t in self.trajectories for v in t.turn_versions]
        self.oldest_version = min(versions, default=self.admitted_version)
        for trajectory in self.trajectories:  # the record says how often its prompt was replayed
            trajectory.metadata["drops"] = self.drops


class RolloutProducer:
    """Plays groups in a background thread, at most ``max_staleness`` versions ahead of the learner.

    Args:
        runner: plays the episodes (its sampler is the one whose version counts).
        plan: data position -> ``(env seed, group id, sampling seed)`` of that group.
        batch: groups per learner step.
        max_staleness: S, in policy versions (0: the synchronous loop).
        order: ``"data"`` or ``"completion"`` (see the module docstring).
        version: the sampler's version now.
        next_index: the first data position not yet admitted.
        pending: data positions to play first (a resumed run's admitted but untrained ones).
        max_drops: times a group may be dropped as too stale (``order="completion"``) before its next finish is
            trained however stale (0: never dropped).
        drops: data position -> times dropped so far (a resumed run's).
        trained, filtered: ``[start, end)`` ranges of the data positions already trained, or filtered by a
            sampling rule (a resumed run's).
    """

    def __init__(
        self,
        runner: RolloutRunner,
        plan: Callable[[int], tuple[int, int, int]],
        *,
        batch: int,
        max_staleness: int,
        order: str = "data",
        version: int = 0,
        next_index: int = 0,
        pending: Sequence[int] = (),
        max_drops: int = 2,
        drops: dict[int, int] | dict[str, int] | None = None,
        trained: Sequence[Sequence[int]] = (),
        filtered: Sequence[Sequence[int]] = (),
    ):
        if max_staleness < 0:
            raise ValueError(f"max_staleness: expected >= 0 versions, got {max_staleness}")
        if max_drops < 0:
            raise ValueError(f"max_drops: expected >= 0 drops per group (0: never dropped), got {max_drops}")
        if order not in ORDERS:
            raise ValueError(f"order: expected one of {', '.join(ORDERS)}, got {order!r}")
        self.runner, self.plan, self.batch = runner, plan, batch
        self.max_staleness, self.order = max_staleness, order
        self._condition = threading.Condition()
        self._todo: collections.deque[int] = collections.deque(sorted(pending))
        self._next = next_index
        self._running: dict[int, concurrent.futures.Future] = {}
        self._finished: dict[int, Group] = {}
        self._failure: BaseException | None = None
        self.max_drops = max_drops
        self._drops = {int(index): int(count) for index, count in (drops or {}).items()}  # JSON keys are text
        self._trained, self._filtered = from_ranges(trained), from_ranges(filtered)
        self._taken = 0
        self._first_version = self._version = version
        self._busy_seconds, self._busy_since = 0.0, None  # time with at least one group in flight
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rollout-producer", daemon=True)
        self._playing = runner.playing()
        self._playing.__enter__()
        self._thread.start()
        self._closed = False
        self.set_version(version)

    # --- the learner's side ---------------------------------------------------------------------------------------

    def set_version(self, version: int) -> None:
        """The sampler now samples with ``version`` (after a weight update): admit the groups the bound allows."""
        with self._condition:
            self._version = version
            self._admit()

    def take(self) -> tuple[list[Group], dict[str, float]]:
        """The next step's ``batch`` groups (sorted by data position), waiting for them; with the wait's seconds,
        the groups dropped as too stale, those trained more than S versions behind (dropped ``max_drops`` times
        before), and the share of the time since the last take the sampler was busy."""
        started = time.perf_counter()
        dropped = 0
        with self._condition:
            while True:
                if self._failure is not None:
                    raise RuntimeError(f"the rollout producer failed: {self._failure!r}") from self._failure
                dropped += self._drop_stale()
                chosen = self._ready()
                if chosen is not None:
                    break
                self._condition.wait()
            again = sorted(index for index in chosen if index in self._trained or index in self._filtered)
            if again:  # a bug, never a silently doubled gradient
                raise RuntimeError(f"rollout producer: data positions {again} were trained or filtered already")
            groups = [self._finished.pop(index) for index in chosen]
            self._trained.update(chosen)
            for index in chosen:
                self._drops.pop(index, None)
            self._taken += len(groups)
            busy = self._busy_seconds + (time.perf_counter() - self._busy_since if self._busy_since else 0.0)
            self._busy_seconds = 0.0
            self._busy_since = time.perf_counter() if self._running else None
        waited = time.perf_counter() - started
        beyond = sum(self._version - group.oldest_version > self.max_staleness for group in groups)
        stats = {
            "rollout_wait_seconds": waited,
            "dropped_groups": float(dropped),
            "trained_beyond_staleness": float(beyond),
            "sampler_busy_seconds": busy,
        }
        return sorted(groups, key=lambda group: group.index), stats

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the producer's event loop, beside the groups in flight, and return its result: how
        anything else that samples the producer's backend (an evaluation during training) must call it, since a
        backend serves one event loop at a time."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def filter(self, indices: Sequence[int]) -> None:
        """Record data positions a sampling rule left out after :meth:`take` returned them (dynamic sampling's
        zero-variance groups): they count as filtered, not trained, in :meth:`state`."""
        with self._condition:
            unknown = sorted(set(indices) - self._trained)
            if unknown:
                raise ValueError(f"filter: data positions {unknown} were not taken; expected positions from take()")
            self._trained.difference_update(indices)
            self._filtered.update(indices)

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps: the next data position, the positions admitted but not trained (with their drop
        counts), and the ranges of the trained and the filtered positions."""
        with self._condition:
            pending = sorted({*self._todo, *self._running, *self._finished})
            return {
                "next_index": self._next,
                "pending": pending,
                "drops": {str(index): self._drops[index] for index in pending if self._drops.get(index)},
                "trained": to_ranges(self._trained),
                "filtered": to_ranges(self._filtered),
            }

    def close(self) -> None:
        """Stop playing: cancel the groups in flight (their episodes are not kept) and stop the thread."""
        if self._closed:
            return
        self._closed = True
        with self._condition:
            running = list(self._running.values())
        for future in running:
            future.cancel()

        async def cancel_the_rest() -> None:  # every task of the loop (a backend's batching task too), awaited
            tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(cancel_the_rest(), self._loop).result(timeout=60)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=60)
            self._playing.__exit__(None, None, None)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> RolloutProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the producer's side (under the condition's lock) ---------------------------------------------------------

    def _capacity(self) -> int:
        """How many groups may have been admitted in all: (S + versions since start + 1) x batch."""
        return (self.max_staleness + self._version - self._first_version + 1) * self.batch

    def _admit(self) -> None:
        while self._taken + len(self._running) + len(self._finished) < self._capacity():
            if self._todo:
                index = self._todo.popleft()
            else:
                index, self._next = self._next, self._next + 1
            seed, group_id, sampling_seed = self.plan(index)
            if not self._running:
                self._busy_since = time.perf_counter()
            future = asyncio.run_coroutine_threadsafe(self.runner.group(seed, group_id, sampling_seed), self._loop)
            self._running[index] = future
            version = self._version
            future.add_done_callback(lambda done, index=index, version=version: self._done(index, version, done))

    def _done(self, index: int, version: int, future: concurrent.futures.Future) -> None:
        with self._condition:
            self._running.pop(index, None)
            if not self._running and self._busy_since is not None:
                self._busy_seconds += time.perf_counter() - self._busy_since
                self._busy_since = None
            if future.cancelled():
                return
            if future.exception() is not None:
                self._failure = future.exception()
            else:
                self._finished[index] = Group(index, future.result(), version, drops=self._drops.get(index, 0))
            self._condition.notify_all()

    def _drop_stale(self) -> int:
        """``order="completion"``: finished groups more than S versions behind go back to the queue's front, unless
        dropped ``max_drops`` times already (then they are trained as they are)."""
        if self.order != "completion":
            return 0
        stale = [
            index
            for index, group in self._finished.items()
            if self._version - group.oldest_version > self.max_staleness and group.drops < self.max_drops
        ]
        for index in sorted(stale, reverse=True):
            del self._finished[index]
            self._drops[index] = self._drops.get(index, 0) + 1
            self._todo.appendleft(index)
        if stale:
            self._admit()
        return len(stale)

    def _ready(self) -> list[int] | None:
        """The data positions of the next batch when all of them have finished, else ``None``."""
        if self.order == "completion":
            return list(self._finished)[: self.batch] if len(self._finished) >= self.batch else None
        oldest = sorted({*self._running, *self._finished})[: self.batch]
        if len(oldest) < self.batch or any(index in self._running for index in oldest):
            return None
        return oldest


def to_ranges(indices: set[int]) -> list[list[int]]:
    """Data positions as sorted ``[start, end)`` ranges (a checkpoint stays small however long the run).

    >>> to_ranges({0, 1, 2, 5, 7, 8})
    [[0, 3], [5, 6], [7, 9]]
    """
    ranges: list[list[int]] = []
    for index in sorted(indices):
        if ranges and ranges[-1][1] == index:
            ranges[-1][1] += 1
        else:
            ranges.append([index, index + 1])
    return ranges


def from_ranges(ranges: Sequence[Sequence[int]]) -> set[int]:
    """The data positions of ``[start, end)`` ranges (:func:`to_ranges`'s inverse).

    >>> sorted(from_ranges([[0, 3], [5, 6]]))
    [0, 1, 2, 5]
    """
    return {index for start, end in ranges for index in range(start, end)}
