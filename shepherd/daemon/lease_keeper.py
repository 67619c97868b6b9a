"""The daemon's side of the lease: standing by, taking a generation, renewing, and the fence every write passes.

One daemon acts for a FRAY_HOME across all the login hosts that share it, and
nothing here trusts `flock` or compares two hosts' clocks (docs/state.md, "Many
hosts"):

- **Generations.** Acting needs a generation: `daemon/generation-<n>.json`,
  created with O_EXCL, which a network file system decides at its server; of
  two hosts that try the same n, one wins. The lease (daemon.json) names it.
- **Standing by.** A daemon that holds none watches the lease: it takes the
  next generation when there is no lease, when its holder stopped cleanly, when
  its holder ran on this host and is dead (the host guard, fray.daemon.host_guard,
  says so exactly), or when it has watched the lease unchanged for the holder's
  timeout on its own monotonic clock (fray.core.lease_rules.Watch). The first
  two shortcuts are never taken on a stale write: a lease renewed by a daemon
  paused between its check and its rename, landing after the next generation
  was taken (its pid then even this standby's own); only the timeout judges it.
- **Renewing.** A thread rewrites the lease every `renew_every` while the
  daemon's loop shows progress. A renewal that finds a higher generation (in the
  lease or as the next generation file) loses the lease; so does a lease whose
  last renewal began more than `timeout - margin` ago (the process was paused):
  a lapsed lease is never renewed, only taken again as a new generation.
- **The fence.** `check()` raises LeaseLost unless the lease is held and valid
  on this process's monotonic clock; the daemon calls it before every write
  that could contradict a newer holder (its group commit, a submission, a
  cancel, ended.json, the blacklist) and stamps its generation into every
  meta.json it writes, so a newer holder can tell (and undo) a stale write that
  slipped between a check and its rename (fray.daemon.run_index).

Each daemon process also keeps its host's record, `daemon/hosts/<host>.json`
(acting or standing by, and how a standby sees the holder), for `fray daemon
status` on any host and for this host's commands to trust without watching.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable, Protocol

from fray.core import lease_rules
from fray.core.lease_rules import Watch
from fray.daemon.lease_file import STANDBY_POLL_SEC, lease_version, read_lease, timeout_of
from fray.errors import LeaseLost, StateError
from fray.state import store, this_host
from fray.state.layout import Home

log = logging.getLogger("fray.daemon")

LOOP_HUNG_SEC = 300.0  # a loop silent this long (longer than any bounded external command) stops renewing
KEEP_GENERATIONS = 8  # generation files older than this many are removed by the holder


def configured_timeout(config: dict[str, Any]) -> float:
    return float(config.get("daemon", {}).get("lease_timeout_sec", lease_rules.DEFAULT_TIMEOUT_SEC))


def highest_generation(home: Home) -> int:
    """The highest generation file this host can list (a listing may be cached: O_EXCL decides, not this)."""
    try:
        names = os.listdir(home.daemon_generation(0).parent)
    except FileNotFoundError:
        return 0
    numbers = [int(n[11:-5]) for n in names if n.startswith("generation-") and n.endswith(".json") and n[11:-5].isdigit()]
    return max(numbers, default=0)


class Fence(Protocol):
    """What the daemon's writes ask of the lease (LeaseKeeper; UNFENCED for a daemon run in-process by a test)."""

    generation: int | None

    def check(self) -> None: ...
    def valid(self) -> bool: ...
    def alive(self) -> None: ...
    def publish(self, fields: dict[str, Any]) -> None: ...


class _Unfenced:
    """No lease at all: a Daemon driven cycle by cycle in one process (tests), where nothing else could act."""

    generation: int | None = None

    def check(self) -> None:
        pass

    def valid(self) -> bool:
        return True

    def alive(self) -> None:
        pass

    def publish(self, fields: dict[str, Any]) -> None:
        pass


UNFENCED: Fence = _Unfenced()


class LeaseKeeper:
    """This process's claim on the lease: acquired by `acquire`, renewed by a thread, checked by `check`."""

    def __init__(self, home: Home, timeout: float, version: str, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.home = home
        self.timeout = max(lease_rules.MIN_TIMEOUT_SEC, timeout)
        self.clock = clock
        self.monotonic = monotonic
        self.generation: int | None = None
        self.lost_why: str | None = None
        self.took_over_why: str | None = None
        self._renewal_began: float | None = None
        self._loop_alive_at = monotonic()
        self._renewals = 0
        self._host_writes = 0
        self._role_since = clock()
        self._fields: dict[str, Any] = {"version": version}  # and what the daemon publishes of its cycles
        self._lock = threading.Lock()
        self._stop_renewing = threading.Event()
        self._renewer: threading.Thread | None = None
        self.on_lost: Callable[[], None] = lambda: None  # wakes the daemon's loop

    # -- standing by -----------------------------------------------------------------------------

    def acquire(self, stop: threading.Event) -> bool:
        """Stand by until this process holds a new generation (True), or `stop` is set (False)."""
        watch, floor = Watch(), 1
        self._role_since = self.clock()
        while not stop.is_set():
            lease = read_lease(self.home)
            now = self.monotonic()
            watch.observe(lease_version(lease), now)
            why = self._takeover_reason(lease, watch, now)
            if why is not None:
                number = max(floor, highest_generation(self.home) + 1, (lease or {}).get("generation", 0) + 1)
                if self._take(number, why):
                    return True
                # Another daemon took it an instant before: watch its lease from scratch (it writes one at once).
                watch, floor = Watch(), number + 1
            self._write_host("standby", self._holder_view(lease, watch, now))
            stop.wait(STANDBY_POLL_SEC)
        return False

    def _takeover_reason(self, lease: dict[str, Any] | None, watch: Watch, now: float) -> str | None:
        if lease is None and highest_generation(self.home) == 0:
            return "no daemon held the lease"
        if lease is None:  # unreadable (moved aside as corrupt) or not written yet: its holder rewrites it if it lives
            return f"the lease was missing for {watch.unchanged_for(now):.1f}s" \
                if watch.expired(now, self.timeout) else None
        # The shortcuts only: a stale write looked for (one stat) when one would be taken, not at every poll.
        if lease.get("stopping") and not self._stale_write(lease):
            return f"the daemon on {lease['host']} (pid {lease['pid']}) stopped"
        if lease.get("host_id") == this_host.host_id() and not self._stale_write(lease):
            # This process holds the host guard: no other daemon of this home lives on this host.
            return f"the daemon on this host (pid {lease['pid']}) is gone"
        timeout = timeout_of(lease, self.timeout)
        if watch.expired(now, timeout):
            return (f"the lease of the daemon on {lease['host']} (pid {lease['pid']}) was unchanged for "
                    f"{watch.unchanged_for(now):.1f}s on this host's clock (timeout {timeout:.0f}s)")
        return None

    def _stale_write(self, lease: dict[str, Any]) -> bool:
        """Whether the lease on disk was written by a holder already superseded, so is not its holder's word.

        A renewal (or a release) checks the lease, then renames its file into place; a daemon paused between
        the two (a frozen VM) lands its write after another host took the next generation. What it says then
        is stale: not a sign that its writer is gone (its pid is this very process's), nor that the holder
        stopped. The holder's next renewal writes over it; until then only the timeout may judge."""
        if lease.get("host_id") == this_host.host_id() and lease.get("pid") == os.getpid():
            return True  # written by this very process, which stands by: before it lost the lease
        return self.home.daemon_generation(int(lease.get("generation", 0)) + 1).exists()

    def _holder_view(self, lease: dict[str, Any] | None, watch: Watch, now: float) -> dict[str, Any] | None:
        if lease is None:
            return None
        return {"host": lease["host"], "pid": lease["pid"], "generation": lease.get("generation", 0),
                "unchanged_for_sec": round(watch.unchanged_for(now), 3), "timeout_sec": timeout_of(lease, self.timeout),
                "clock_offset_sec": None}

    def _take(self, number: int, why: str) -> bool:
        """Create generation `number` exclusively; on success this process holds the lease and has written it."""
        began = self.monotonic()
        record = {"generation": number, "host": this_host.hostname(), "host_id": this_host.host_id(),
                  "pid": os.getpid(), "taken_at": self.clock(), "why": why}
        path = self.home.daemon_generation(number)
        store.make_dirs(path.parent)
        try:
            created = store.create_json(path, record, "daemon-generation")
        except OSError as exc:
            raise StateError(f"cannot create {path} to take the daemon's lease: {exc.strerror or exc}") from None
        if not created:
            log.info("generation %d was taken by another daemon first; standing by", number)
            return False
        with self._lock:
            self.generation, self.lost_why, self.took_over_why = number, None, why
            self._renewal_began = began
            self._loop_alive_at = began
            self._role_since = self.clock()
            try:
                self._write_lease()
            except OSError as exc:  # the renewer tries again; the lease lapses if none succeeds in time
                log.warning("took generation %d but could not write the lease yet: %s", number, exc)
        log.info("took generation %d of the lease: %s", number, why)
        self._write_host("active", None)
        self._prune(number)
        return True

    def _prune(self, number: int) -> None:
        for old in range(max(1, number - KEEP_GENERATIONS - 32), number - KEEP_GENERATIONS):
            try:
                os.unlink(self.home.daemon_generation(old))
            except OSError:
                pass

    # -- holding ---------------------------------------------------------------------------------

    def valid(self) -> bool:
        return self.generation is not None and self.lost_why is None and \
            lease_rules.holder_valid(self._renewal_began, self.monotonic(), self.timeout)

    def check(self) -> None:
        """The fence: raise LeaseLost unless this process may still act for the home."""
        if self.valid():
            return
        if self.lost_why is None and self.generation is not None:
            self._lose(f"its last renewal began {self.monotonic() - (self._renewal_began or 0):.1f}s ago on this "
                       f"host's clock (valid for {self.timeout - lease_rules.margin(self.timeout):.1f}s): paused?")
        raise LeaseLost(f"this daemon no longer holds the lease of {self.home.root} (generation "
                        f"{self.generation}): {self.lost_why}")

    def alive(self) -> None:
        """The daemon's loop made progress: the renewer keeps the lease only while it does."""
        self._loop_alive_at = self.monotonic()

    def publish(self, fields: dict[str, Any]) -> None:
        """The daemon's cycle statistics, written into the lease now (a renewal like the thread's)."""
        self.alive()
        with self._lock:
            self._fields = fields
            self._renew_locked()

    def start_renewing(self) -> None:
        self._stop_renewing.clear()
        self._renewer = threading.Thread(target=self._renew_loop, name="fray-lease", daemon=True)
        self._renewer.start()

    def _renew_loop(self) -> None:
        every = lease_rules.renew_every(self.timeout)
        while not self._stop_renewing.wait(every):
            with self._lock:
                if not self._renew_locked():
                    return

    def _renew_locked(self) -> bool:
        """One renewal (the lock held); False once the lease is lost."""
        if self.generation is None or self.lost_why is not None:
            return False
        began = self.monotonic()
        if not lease_rules.holder_valid(self._renewal_began, began, self.timeout):
            self._lose(f"its last renewal began {began - (self._renewal_began or 0):.1f}s ago on this host's clock: "
                       "a lapsed lease is taken again, never renewed")
            return False
        if began - self._loop_alive_at > LOOP_HUNG_SEC:
            self._lose(f"the daemon's loop made no progress for {began - self._loop_alive_at:.0f}s")
            return False
        newer = self._newer_holder()
        if newer is not None:
            self._lose(newer)
            return False
        try:
            self._write_lease()
        except (OSError, ValueError) as exc:  # not renewed: the lease lapses unless a later renewal succeeds
            log.warning("could not renew the lease: %s", exc)
            return True
        self._renewal_began = began
        return True

    def _newer_holder(self) -> str | None:
        current = read_lease(self.home)
        assert self.generation is not None
        if current is not None and current.get("generation", 0) > self.generation:
            return f"generation {current['generation']} was taken by the daemon on {current['host']} (pid {current['pid']})"
        nxt = self.home.daemon_generation(self.generation + 1)
        if nxt.exists():
            taker = store.read_json(nxt, "daemon-generation") if nxt.stat().st_size else None
            who = f"the daemon on {taker['host']} (pid {taker['pid']})" if taker else "another daemon"
            return f"generation {self.generation + 1} was taken by {who}"
        return None

    def _write_lease(self, stopping: bool = False) -> None:
        self._renewals += 1
        document = {"started_at": self._role_since, "last_cycle_at": self._role_since,
                    "poll_interval_sec": 1.0, "cycles": 0, **self._fields,
                    "pid": os.getpid(), "host": this_host.hostname(), "host_id": this_host.host_id(),
                    "generation": self.generation, "renewals": self._renewals, "renewed_at": self.clock(),
                    "lease_timeout_sec": self.timeout, "stopping": stopping}
        store.write_json(self.home.daemon_lease, document, "daemon")

    def _lose(self, why: str) -> None:
        if self.lost_why is None:
            self.lost_why = why
            log.error("lost the lease (generation %s): %s", self.generation, why)
            self.on_lost()

    def release(self) -> None:
        """Stop renewing; a lease still held is handed over at once (stopping: a standby takes the next generation)."""
        self._stop_renewing.set()
        if self._renewer is not None:
            self._renewer.join(timeout=5)
        with self._lock:
            if self.valid() and self._newer_holder() is None:
                try:
                    self._write_lease(stopping=True)
                except (OSError, ValueError) as exc:
                    log.warning("could not mark the lease stopping: %s", exc)
            self.generation = None
        self._write_host("stopped", None, self.lost_why)

    # -- this host's record ----------------------------------------------------------------------

    def _write_host(self, role: str, holder: dict[str, Any] | None, why: str | None = None) -> None:
        self._host_writes += 1
        record = {"host": this_host.hostname(), "host_id": this_host.host_id(), "pid": os.getpid(), "role": role,
                  "since": self._role_since, "written_at": self.clock(), "writes": self._host_writes,
                  "generation": self.generation if role == "active" else (holder or {}).get("generation"),
                  "holder": holder, "stopped_why": why}
        path = self.home.daemon_host(this_host.hostname())
        try:
            store.make_dirs(path.parent)
            store.write_json(path, record, "daemon-host", sync=False)  # advisory: rewritten every standby poll
        except OSError as exc:
            log.warning("could not write %s: %s", path, exc)
