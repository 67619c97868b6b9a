"""When a daemon's lease is held, and when another host may take it: pure rules, every time on one clock.

The lease (daemon.json) is renewed by the daemon that holds it; the hosts that
share FRAY_HOME cannot compare its times with theirs (any clock may be minutes
off). So two rules, each on the clock of the one who applies it:

- **The holder** acts only while its last renewal *began* less than
  `timeout - margin` ago on its own monotonic clock (`holder_valid`). A daemon
  paused (SIGSTOP, a frozen VM, a long swap-in) past that finds its lease lapsed
  before its next write, and never renews a lapsed lease: it takes a new
  generation like anyone else (fray.daemon.lease_keeper).
- **An observer** judges the lease expired only once it has watched it unchanged
  for `timeout` on its own monotonic clock since it first saw that version
  (`Watch`). A renewal is seen by the observer after it began, so the holder's
  last valid instant comes before the earliest takeover, by `margin` at least.

Both assume what every cluster file system gives: an opened file shows what its
last writer closed within `timeout - renew_every` (docs/state.md, per kind).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, NamedTuple

DEFAULT_TIMEOUT_SEC = 15.0
MIN_TIMEOUT_SEC = 2.0


def renew_every(timeout: float) -> float:
    """How often the holder renews: often enough that an observer sees several renewals inside one timeout."""
    return min(1.0, timeout / 5)


def margin(timeout: float) -> float:
    """How long before an observer may take over the holder stops acting: room for a write in flight."""
    return max(0.5, timeout / 5)


def holder_valid(renewal_began: float | None, now: float, timeout: float) -> bool:
    """Whether the holder may still act: its last successful renewal began less than timeout - margin ago
    (both on its monotonic clock). None: it never renewed (it holds nothing)."""
    return renewal_began is not None and now - renewal_began < timeout - margin(timeout)


@dataclass
class Watch:
    """What one observer saw of a file that another host rewrites: since when (on the observer's own monotonic
    clock) its current version has been unchanged. A version is whatever `observe` is given (a renewal counter)."""

    version: Hashable = None
    since: float | None = None
    changes: int = 0

    def observe(self, version: Hashable, now: float) -> bool:
        """Note what was read at `now`; whether it changed since the last reading (the first reading is no change)."""
        if self.since is not None and version == self.version:
            return False
        changed = self.since is not None
        self.version, self.since = version, now
        self.changes += changed
        return changed

    def unchanged_for(self, now: float) -> float:
        return 0.0 if self.since is None else now - self.since

    def expired(self, now: float, timeout: float) -> bool:
        return self.since is not None and self.unchanged_for(now) >= timeout



class Health(NamedTuple):
    """The daemon as one reader sees it, and how it knows (`judged_by`)."""

    state: str  # "running" | "stale" | "stopped"
    detail: str
    judged_by: str  # "process" (same host) | "standby" (this host's) | "watched" | "clock" (a hint) | "none"


@dataclass(frozen=True)
class Sight:
    """What a reader knows beyond the lease itself."""

    same_host: bool = False  # the holder ran on this host: its process can be looked at
    holder_alive: bool = False  # same host: that process lives and holds the host guard
    standby: dict[str, Any] | None = None  # this host's standby's view of the holder (daemon-host.json), if fresh
    watched_for: float | None = None  # seconds this reader watched the lease (None: not watched)
    changed: bool = False  # ... and whether it changed meanwhile


def judge(lease: dict[str, Any] | None, sight: Sight, now: float) -> Health:
    """Whether a daemon serves: from the lease, and what this reader could check on its own clock."""
    if lease is None:
        return Health("stopped", "no daemon has run here", "none")
    who = f"pid {lease['pid']} on {lease['host']}"
    timeout = float(lease.get("lease_timeout_sec") or DEFAULT_TIMEOUT_SEC)
    if sight.same_host:
        age = now - lease["last_cycle_at"]
        if lease.get("stopping") or not sight.holder_alive:
            return Health("stopped", f"not running (last: {who}, {age:.0f}s ago)", "process")
        if age > max(10.0, 5 * lease["poll_interval_sec"]):
            return Health("stale", f"{who} has not completed a cycle for {age:.0f}s", "process")
        return Health("running", f"{who}, last cycle {age:.1f}s ago", "process")
    if lease.get("stopping"):
        return Health("stopped", f"not running (last: {who})", "none")
    standby = (sight.standby or {}).get("holder")
    if standby and standby.get("generation") == lease.get("generation", 0) and standby.get("pid") == lease["pid"]:
        # This host's clock on both sides: what the standby saw, and how long ago it wrote that.
        still = standby["unchanged_for_sec"] + max(0.0, now - sight.standby["written_at"])  # type: ignore[index]
        if still >= timeout:
            return Health("stale", f"{who}: its lease unchanged for {still:.0f}s on this host's clock; this host's "
                                   "daemon takes over", "standby")
        return Health("running", f"{who}, lease renewed {still:.1f}s ago (seen by this host's standby)", "standby")
    if sight.watched_for is not None:
        if sight.changed:
            return Health("running", f"{who}, its lease renewed while this host watched", "watched")
        return Health("stale", f"{who}: its lease did not change in the {sight.watched_for:.1f}s this host watched "
                               f"(renewed every {renew_every(timeout):.1f}s; taken over after {timeout:.0f}s)", "watched")
    age = now - float(lease.get("renewed_at", lease["last_cycle_at"]))
    if abs(age) < timeout:
        return Health("running", f"{who} (by its clock, renewed {max(age, 0.0):.0f}s ago)", "clock")
    return Health("stale", f"{who}: renewed {age:.0f}s ago by this host's clock (clocks may differ)", "clock")
