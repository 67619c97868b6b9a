"""Fencing: a wrapper runs its workload only while its attempt is the run's current one,
and no job-side write lands once it is not.

The daemon, meta.json's one writer, closes an attempt (its state becomes
"ended") before it submits the next one. Every heartbeat interval a thread of
the wrapper reads meta.json; once its attempt is closed, a newer one exists or
the run's folder is gone, the workload's whole process group (and every
descendant) is SIGKILLed and the wrapper exits at once with EXIT_FENCED,
writing nothing more: no heartbeat, no failure.json, no exit.json, no log line.
A superseded attempt therefore never touches a file the new one uses, even when
it was cut off from the scheduler (a killed slurmd) and kept running.

The thread alone is not enough: a wrapper stopped (SIGSTOP, a frozen VM) past
its fence and then continued runs whichever thread the kernel picks first,
perhaps the heartbeat's. So `guard()` - the one check - runs before every
job-side write (heartbeat, progress, result, started/probe/health/failure/exit
records, command receipts, checkpoint promotion): it reads meta.json and, when
the attempt is superseded, writes nothing and raises `Superseded`; in the
wrapper it first calls the handler `bind()` registered, which kills the
workload and exits. The writer is the attempt bound by the wrapper, else the
one the environment names (a workload and its helpers).

The same happens when the run's state cannot be read for `grace` seconds:
FRAY_HOME unreachable from this node, or meta.json and its last good copy both
unreadable (nothing could stop this attempt otherwise). A corrupt meta.json
alone is no reason to stop: the daemon moves it aside and restores it, and
meanwhile the fence reads its copy. The backends set `grace` to half the run's heartbeat
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
from typing import Any, NamedTuple

from . import contract


class Superseded(RuntimeError):
    """This attempt is no longer the run's current one: what it was about to write was not written."""


def superseded(meta: Mapping[str, Any], attempt: int) -> str | None:
    """Why `attempt` is no longer the run's current attempt, or None while it is (pure)."""
    attempts = meta.get("attempts") or []
    if len(attempts) > attempt:
        return f"attempt {len(attempts)} has replaced attempt {attempt}"
    if len(attempts) == attempt and attempts[attempt - 1].get("state") == "ended":
        cause = attempts[attempt - 1].get("cause") or "closed"
        return f"the daemon closed attempt {attempt} ({cause})"
    return None


def well_formed(meta: Any) -> bool:
    attempts = meta.get("attempts") if isinstance(meta, dict) else None
    return isinstance(attempts, list) and all(isinstance(a, dict) for a in attempts)


def meta_path(home: str, run_id: str) -> str:
    return os.path.join(home, contract.RUNS_DIR, run_id, contract.META)


def stop_asked(meta: Mapping[str, Any], attempt: int) -> bool:
    """Whether the daemon decided to stop `attempt` (it is `stopping`): what the wrapper carries out itself when
    no signal came, as from a daemon on another login host, which cannot signal this one's processes (pure)."""
    attempts = meta.get("attempts") or []
    return len(attempts) == attempt and attempts[attempt - 1].get("state") == "stopping"


class Reading(NamedTuple):  # NamedTuple, not a dataclass: this module is on the path to the first beat
    """One read of meta.json: why the attempt is fenced (None: it is not, or that cannot be told),
    whether FRAY_HOME answered, whether meta.json could be judged at all, and whether a stop was decided."""

    reason: str | None
    reached: bool
    judged: bool
    stopping: bool = False


def read(path: str, attempt: int) -> Reading:
    """Read meta.json at `path` and judge `attempt` by it; by its last good copy when it cannot be judged
    (moved aside as corrupt, or corrupt still), which says the same until the daemon puts it back."""
    reading = _read_one(path, attempt)
    if reading.judged or not reading.reached:
        return reading
    return _read_one(os.path.join(os.path.dirname(path), contract.META_COPY), attempt)


def _read_one(path: str, attempt: int) -> Reading:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        run_folder = os.path.dirname(path)
        if os.path.isdir(run_folder):
            return Reading(None, True, False)  # reachable, but nothing to judge by
        if os.path.isdir(os.path.dirname(run_folder)):
            return Reading("the run's folder is gone", True, True)
        return Reading(None, False, False)  # FRAY_HOME itself is missing: unreachable, judged by the grace period
    except OSError:
        return Reading(None, False, False)  # unreachable (a lost mount): judged by the grace period
    try:
        meta = json.loads(raw)
    except ValueError:
        return Reading(None, True, False)  # caught mid-replace on a filesystem without atomic rename, or corrupt
    if not well_formed(meta):
        return Reading(None, True, False)
    return Reading(superseded(meta, attempt), True, True, stop_asked(meta, attempt))


def current(home: str, run_id: str, attempt: int) -> bool:
    """Whether `attempt` is still the run's current attempt (False when that cannot be read)."""
    reading = read(meta_path(home, run_id), attempt)
    return reading.judged and reading.reason is None


# -- the one check before every job-side write --------------------------------------------------


class Writer(NamedTuple):
    """The attempt whose writes this process makes."""

    home: str
    run_id: str
    attempt: int


_bound: Writer | None = None
_is_bound = False
_on_fenced: Callable[[str], None] | None = None


def bind(writer: Writer | None, on_fenced: Callable[[str], None] | None = None) -> None:
    """Make `writer` this process's attempt (the wrapper; None: none, whatever the environment says - it may
    be the job the wrapper's daemon was started from); `on_fenced(reason)` runs when a write finds it
    superseded, before `Superseded` is raised (the wrapper's: kill the workload, exit)."""
    global _bound, _is_bound, _on_fenced
    _bound, _is_bound, _on_fenced = writer, True, on_fenced


def writer() -> Writer | None:
    """The attempt this process writes for: the bound one, else the environment's; None outside a fray job."""
    if _is_bound:
        return _bound
    home, run_id, attempt = (os.environ.get(contract.ENV_HOME), os.environ.get(contract.ENV_RUN_ID),
                             os.environ.get(contract.ENV_ATTEMPT))
    if not (home and run_id and attempt and attempt.isdigit()):
        return None  # not a run fray manages: nothing can supersede it
    return Writer(home, run_id, int(attempt))


def guard(strict: bool = False) -> None:
    """Raise `Superseded` when this process's attempt is superseded; return when it may write.

    `strict` (an irrevocable write: a checkpoint's promotion) refuses also when meta.json
    cannot be judged; otherwise an unreadable meta.json is no reason to stop writing.
    """
    who = writer()
    if who is None:
        return
    reading = read(meta_path(who.home, who.run_id), who.attempt)
    reason = reading.reason
    if reason is None and strict and not reading.judged:
        reason = "whether this attempt is still current cannot be read from meta.json"
    if reason is None:
        return
    if _on_fenced is not None and reading.reason is not None:
        _on_fenced(reason)
    raise Superseded(f"run {who.run_id} attempt {who.attempt} writes nothing more: {reason}")


class Fence:
    """Checks the fence every `interval` seconds in a daemon thread; calls `on_fenced(reason)` once."""

    def __init__(self, home: str, run_id: str, attempt: int, interval: float, grace: float,
                 on_fenced: Callable[[str], None], clock: Callable[[], float] = time.monotonic,
                 on_stop_asked: Callable[[], None] = lambda: None) -> None:
        self.path = meta_path(home, run_id)
        # Called once when the daemon's stop of this attempt is seen in two readings in a row and no signal came
        # meanwhile (the backend's signal comes first wherever it can reach): a stop the wrapper carries out itself.
        self._on_stop_asked = on_stop_asked
        self._stop_seen = 0
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
        reading = read(self.path, self.attempt)
        # The grace clock runs until the run's state is judged again: FRAY_HOME unreachable, or meta.json and
        # its last good copy both unreadable (a run the daemon cannot manage must not run on unstoppable).
        if reading.judged:
            self._last_read = self._clock()
        self._stop_seen = self._stop_seen + 1 if reading.stopping else 0
        if self._stop_seen == 2:
            self._on_stop_asked()
        return reading.reason

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
                self._fire(f"the run's meta.json has been unreadable for {unread:.0f}s (grace {self.grace:g}s)")
                return

    def _fire(self, reason: str) -> None:
        if not self._stopping.is_set():
            self._stopping.set()
            self._on_fenced(reason)
