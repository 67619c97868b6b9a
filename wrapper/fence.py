"""Fencing: a wrapper runs its workload only while its attempt is the run's current one.

The daemon, meta.json's one writer, closes an attempt (its state becomes
"ended") before it submits the next one. Every heartbeat interval a thread of
the wrapper reads meta.json; once its attempt is closed, a newer one exists or
the run's folder is gone, the workload's whole process group (and every
descendant) is SIGKILLed and the wrapper exits at once with EXIT_FENCED,
writing nothing more: no heartbeat, no failure.json, no exit.json, no log line.
A superseded attempt therefore never touches a file the new one uses, even when
it was cut off from the scheduler (a killed slurmd) and kept running.

The same happens when the run's folder cannot be read for `grace` seconds
(FRAY_HOME unreachable from this node; a corrupt meta.json, which the daemon
moves aside, is no reason to stop): the backends set it to half the run's heartbeat
timeout, so by the time the daemon gives up on this attempt and starts another,
this one is gone. A read that hangs (a dead NFS server) counts as unreachable
too: the clock runs from the last successful read, not from the last attempt.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from . import contract


def superseded(meta: Mapping[str, Any], attempt: int) -> str | None:
    """Why `attempt` is no longer the run's current attempt, or None while it is (pure)."""
    attempts = meta.get("attempts") or []
    if len(attempts) > attempt:
        return f"attempt {len(attempts)} has replaced attempt {attempt}"
    if len(attempts) == attempt and attempts[attempt - 1].get("state") == "ended":
        cause = attempts[attempt - 1].get("cause") or "closed"
        return f"the daemon closed attempt {attempt} ({cause})"
    return None


def _well_formed(meta: Any) -> bool:
    attempts = meta.get("attempts") if isinstance(meta, dict) else None
    return isinstance(attempts, list) and all(isinstance(a, dict) for a in attempts)


def meta_path(home: str, run_id: str) -> str:
    return os.path.join(home, contract.RUNS_DIR, run_id, contract.META)


def current(home: str, run_id: str, attempt: int) -> bool:
    """Whether `attempt` is still the run's current attempt (False when that cannot be read)."""
    try:
        with open(meta_path(home, run_id), "rb") as handle:
            meta = json.loads(handle.read())
    except (OSError, ValueError):
        return False
    return _well_formed(meta) and superseded(meta, attempt) is None


class Fence:
    """Checks the fence every `interval` seconds in a daemon thread; calls `on_fenced(reason)` once."""

    def __init__(self, home: str, run_id: str, attempt: int, interval: float, grace: float,
                 on_fenced: Callable[[str], None], clock: Callable[[], float] = time.monotonic) -> None:
        self.path = meta_path(home, run_id)
        self.attempt = attempt
        self.interval = interval
        self.grace = grace
        self._on_fenced = on_fenced
        self._clock = clock
        self._last_read = clock()
        self._stopping = threading.Event()
        self._reader = threading.Thread(target=self._read_loop, name="fray-fence", daemon=True)
        self._watchdog = threading.Thread(target=self._watch_loop, name="fray-fence-watchdog", daemon=True)

    def start(self) -> "Fence":
        self._reader.start()
        self._watchdog.start()
        return self

    def stop(self) -> None:
        """No more checks: the wrapper is writing its own end (exit.json), which the daemon waits for."""
        self._stopping.set()

    def check(self) -> str | None:
        """One read of meta.json: why this attempt is fenced, or None (also when that cannot be told)."""
        try:
            with open(self.path, "rb") as handle:
                raw = handle.read()
        except FileNotFoundError:
            run_folder = os.path.dirname(self.path)
            if os.path.isdir(run_folder):
                self._last_read = self._clock()  # reachable; meta.json moved aside as corrupt: nothing to judge
                return None
            if os.path.isdir(os.path.dirname(run_folder)):
                return "the run's folder is gone"
            return None  # FRAY_HOME itself is missing: unreachable, judged by the grace period
        except OSError:
            return None  # unreachable (a lost mount): judged by the grace period
        self._last_read = self._clock()
        try:
            meta = json.loads(raw)
        except ValueError:
            return None  # caught mid-replace on a filesystem without atomic rename, or corrupt
        return superseded(meta, self.attempt) if _well_formed(meta) else None

    def _read_loop(self) -> None:
        while not self._stopping.wait(self.interval):
            reason = self.check()
            if reason is not None and not self._stopping.is_set():
                self._fire(reason)
                return

    def _watch_loop(self) -> None:
        # Separate from the reader: a read stuck in a dead mount must not stop the grace clock.
        while not self._stopping.wait(min(self.interval, self.grace)):
            unread = self._clock() - self._last_read
            if unread > self.grace:
                self._fire(f"FRAY_HOME has been unreadable for {unread:.0f}s (grace {self.grace:g}s)")
                return

    def _fire(self, reason: str) -> None:
        if not self._stopping.is_set():
            self._stopping.set()
            self._on_fenced(reason)
