"""Calls submitted close together, held a few milliseconds and written as one group: `fray.submit`'s coalescer.

A call joins the pending group of its key (fray.cluster.submits: the same function and settings), opened by
the first such call. A group is written (its `launch`, by whichever thread gets to it first) when:

- no call has joined it for LINGER_SEC, or its first call has waited LINGER_MAX_SEC (the linger thread);
- one of its calls' futures is asked anything (`Ticket.outcome`): a single submit followed by `.result()`
  is written at once, as before;
- the interpreter exits (atexit), for a script that submits and ends without waiting.

Until then a call lives only in this process's memory: a `kill -9` of it (or a power cut) inside the linger
loses the calls not yet written. Once written, a call is a run's like any other (durable, retried, adopted).

Threads may submit at once (one lock guards the pending groups; a group is written outside it). A child forked
while calls were pending does not write them (its parent does): they are dropped from its coalescer, and their
futures there raise UsageError instead of waiting for a write that is not theirs to make.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from concurrent.futures import CancelledError
from typing import Any, Callable

from fray.errors import UsageError

LINGER_SEC = 0.005  # a burst is over once no call joined its group this long
LINGER_MAX_SEC = 0.05  # the longest a call waits to be written, however long the burst


class Group:
    """The pending calls of one key, then what writing them gave: one target (or exception) per call."""

    def __init__(self, key: object, launch: Callable[[list[Any]], list[Any]]) -> None:
        self.key = key
        self.launch = launch  # the calls' items -> a target (or an exception) per call, in order
        self.items: list[Any] = []
        self.cancelled: set[int] = set()
        self.opened = self.last = time.monotonic()
        self.pid = os.getpid()
        self._written = threading.Event()
        self._targets: list[Any] = []

    def due(self) -> float:
        """When (monotonic) the linger thread writes it."""
        return min(self.last + LINGER_SEC, self.opened + LINGER_MAX_SEC)

    def write(self) -> None:
        """Launch the calls not cancelled; every call's target (or exception) is then known."""
        kept = [index for index in range(len(self.items)) if index not in self.cancelled]
        targets: list[Any] = [CancelledError("cancelled before it was written")] * len(self.items)
        try:
            written = self.launch([self.items[index] for index in kept]) if kept else []
        except BaseException as exc:  # each future raises it (nothing was written: a launch is all or none)
            written = [exc] * len(kept)
        for index, target in zip(kept, written):
            targets[index] = target
        self._targets = targets
        self.items = []  # the pickled arguments are in FRAY_HOME now: not held as long as a future lives
        self._written.set()

    def wait_written(self) -> None:
        self._written.wait()

    def outcome(self, index: int) -> Any:
        """Call `index`'s target, once the group is written; raises what writing it raised."""
        while not self._written.wait(0.5):
            if self.pid != os.getpid():
                raise UsageError(f"this call was submitted by process {self.pid} before this process was forked "
                                 "from it and had not been written then: that process writes it and holds its "
                                 "future (ask it there, or `fray.get_run` its run once it has one)")
        target = self._targets[index]
        if isinstance(target, BaseException):
            raise target
        return target


class Ticket:
    """One call's place in its group: what its future asks for."""

    def __init__(self, batcher: "Batcher", group: Group, index: int) -> None:
        self._batcher = batcher
        self.group = group
        self.index = index

    def outcome(self) -> Any:
        """The call's target (its group written first, at once, if it was still pending)."""
        self._batcher.write(self.group)
        return self.group.outcome(self.index)

    def cancel(self) -> bool:
        """Drop the call if its group is still pending (it is then never written); False once it was."""
        return self._batcher.cancel(self.group, self.index)


class Batcher:
    """This process's pending groups and the thread that writes them when due."""

    def __init__(self) -> None:
        self._reset()
        atexit.register(self.write_all)
        os.register_at_fork(before=self._lock_for_fork, after_in_parent=self._unlock_after_fork,
                            after_in_child=self._reset)

    def _reset(self) -> None:
        """A fresh state: at start, and in a forked child (its parent's pending calls are its parent's)."""
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._pending: list[Group] = []
        self._writing: list[Group] = []
        self._thread: threading.Thread | None = None

    def _lock_for_fork(self) -> None:
        self._lock.acquire()  # the child copies the pending groups whole, never halfway through a change

    def _unlock_after_fork(self) -> None:
        self._lock.release()

    def add(self, key: object, item: Any, launch: Callable[[list[Any]], list[Any]],
            check: Callable[[], None]) -> Ticket:
        """Pend a call of `key`; its ticket. `check` runs (and may raise, pending nothing) when the call opens a
        group: what writing it would refuse is refused now, as an unbatched submit refuses it."""
        with self._lock:
            group = self._open(key)
        if group is None:
            check()
        with self._lock:
            group = self._open(key)
            if group is None:
                group = Group(key, launch)
                self._pending.append(group)
                self._changed.notify()
            group.items.append(item)
            group.last = time.monotonic()
            if self._thread is None:
                self._thread = threading.Thread(target=self._linger, name="fray-submit-linger", daemon=True)
                self._thread.start()
            return Ticket(self, group, len(group.items) - 1)

    def _open(self, key: object) -> Group | None:
        return next((group for group in self._pending if group.key == key), None)

    def write(self, group: Group) -> None:
        """Write the group now unless it was written or another thread is writing it (its outcome waits)."""
        with self._lock:
            if group not in self._pending:
                return
            self._pending.remove(group)
            self._writing.append(group)
        self._write(group)

    def cancel(self, group: Group, index: int) -> bool:
        with self._lock:
            if group not in self._pending:
                return False
            group.cancelled.add(index)
            return True

    def write_all(self) -> None:
        """Write every pending group and wait for those being written (atexit: no call left behind)."""
        with self._lock:
            groups, self._pending = self._pending, []
            self._writing.extend(groups)
            writing = list(self._writing)
        for group in groups:
            self._write(group)
        for group in writing:
            group.wait_written()

    def _write(self, group: Group) -> None:
        try:
            group.write()
        finally:
            with self._lock:
                self._writing.remove(group)

    def _linger(self) -> None:
        """The linger thread: each group written once due (Group.due); it ends when none is pending (a process
        that submitted once keeps no thread of ours: `os.fork` warns of threads from Python 3.12 on)."""
        while True:
            with self._lock:
                if not self._pending:
                    self._thread = None  # the next `add` starts another
                    return
                now = time.monotonic()
                due = [group for group in self._pending if group.due() <= now]
                if not due:
                    self._changed.wait(min(group.due() for group in self._pending) - now)
                    continue
                for group in due:
                    self._pending.remove(group)
                    self._writing.append(group)
            for group in due:
                self._write(group)


BATCHER = Batcher()
