"""Is a daemon serving this FRAY_HOME, on any host, and starting or stopping this host's.

What any fray command asks: the lease (daemon.json, written by the daemon that
acts: fray.daemon.lease_keeper) says who; whether it still lives is judged on
this host's own clock (fray.core.lease_rules.judge): exactly when the holder
runs on this host (its process and the host guard); from this host's standby
daemon, which watches the lease all the time; else by watching the lease change
for a moment (`confirmed`), or, where a command must not wait (a listing's
header), from the lease's own clock as a hint that says so.

A command that needs a daemon (`ensure_running`) uses the live one wherever it
runs, and otherwise starts one on this host, which takes the lease over or,
behind a live holder it could not see at once, stands by.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, NamedTuple

from fray.core import lease_rules
from fray.core.lease_rules import Health, Sight
from fray.daemon import host_guard
from fray.daemon.lease_file import STANDBY_POLL_SEC, lease_version, read_lease
from fray.errors import CorruptFileError, StateError
from fray.state import store, this_host
from fray.state.layout import Home

START_TIMEOUT_SEC = 15.0
WATCH_SLACK_SEC = 0.3  # a watch lasts a renewal interval and this: room for the write and the file system


class Spawned(NamedTuple):
    """A daemon this command started: when, and its pid (what `await_first_cycle` waits for)."""

    at: float
    pid: int


def is_locked(home: Home) -> bool:
    """Whether a daemon of this home (acting or standing by) runs on this host right now."""
    return host_guard.held_here(home)


def host_record(home: Home, host: str | None = None) -> dict[str, Any] | None:
    """A host's daemon record (daemon/hosts/<host>.json; this host's by default)."""
    try:
        return store.read_json(home.daemon_host(host or this_host.hostname()), "daemon-host")
    except CorruptFileError:
        return None


def _sight(home: Home, lease: dict[str, Any] | None, now: float) -> Sight:
    if lease is None:
        return Sight()
    if lease.get("host_id") == this_host.host_id():
        return Sight(same_host=True, holder_alive=_alive(lease["pid"]) and is_locked(home))
    mine = host_record(home)
    fresh = mine is not None and mine["role"] == "standby" and now - mine["written_at"] < 3 * STANDBY_POLL_SEC + 1 \
        and _alive(mine["pid"])
    return Sight(standby=mine if fresh else None)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def current_health(home: Home) -> tuple[Health, dict[str, Any] | None]:
    """The daemon's health without waiting (on another host's daemon, a hint at worst: `judged_by` says)."""
    lease = read_lease(home)
    now = time.time()
    return lease_rules.judge(lease, _sight(home, lease, now), now), lease


def confirmed(home: Home) -> tuple[Health, dict[str, Any] | None]:
    """The daemon's health judged on this host's clock: where only a hint is at hand, the lease is watched for a
    renewal interval (about a second) to see whether it changes."""
    lease = read_lease(home)
    now = time.time()
    sight = _sight(home, lease, now)
    health = lease_rules.judge(lease, sight, now)
    if health.judged_by != "clock":
        return health, lease
    timeout = lease_rules.DEFAULT_TIMEOUT_SEC if lease is None else float(lease.get("lease_timeout_sec") or 15.0)
    began = time.monotonic()
    deadline = began + lease_rules.renew_every(timeout) + WATCH_SLACK_SEC
    first = lease_version(lease)
    while time.monotonic() < deadline:
        time.sleep(0.05)
        seen = read_lease(home)
        if lease_version(seen) != first:
            lease = seen
            return lease_rules.judge(seen, Sight(watched_for=time.monotonic() - began, changed=True), time.time()), seen
    return lease_rules.judge(lease, Sight(watched_for=time.monotonic() - began), time.time()), lease


def view(home: Home) -> dict[str, Any]:
    """The daemon as the CLI's documents show it (their `daemon` object): its state, why, how that is known, its lease."""
    state, record = current_health(home)
    return {"state": state.state, "detail": state.detail, "judged_by": state.judged_by, "lease": record}


def confirmed_view(home: Home) -> dict[str, Any]:
    """`view`, judged on this host's clock (`confirmed`), with the daemon of every host that shares the home."""
    state, record = confirmed(home)
    return {"state": state.state, "detail": state.detail, "judged_by": state.judged_by, "lease": record,
            "this_host": this_host.hostname(), "hosts": hosts(home)}


def hosts(home: Home) -> list[dict[str, Any]]:
    """Every host's daemon record, each with `seen`: what this host can tell of it on its own clock."""
    folder = home.daemon_host("x").parent
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json") and not n.startswith("."))
    except FileNotFoundError:
        return []
    found = []
    now = time.time()
    for name in names:
        try:
            record = store.read_json(folder / name, "daemon-host")
        except (CorruptFileError, StateError):
            continue
        if record is None:
            continue
        if record["host_id"] == this_host.host_id():
            alive = record["role"] != "stopped" and _alive(record["pid"]) and is_locked(home)
            seen = "running" if alive else "gone"
        else:
            seen = "stopped" if record["role"] == "stopped" else "elsewhere"
        found.append({**record, "seen": seen})
    return found


def ensure_running(home: Home) -> dict[str, Any]:
    """Use the daemon that serves, on any host; else start one here and wait until it serves or stands by."""
    store.ensure_home(home)
    health, lease = confirmed(home)
    if health.state == "running" or (health.state == "stale" and is_locked(home)):
        return lease or {}  # a daemon of this host stands by: it takes over when the lease expires
    return await_first_cycle(home, _spawn(home))


def start_here(home: Home) -> bool:
    """Start a daemon on this host unless one runs here, and wait until it acts or stands by; whether one started."""
    store.ensure_home(home)
    if is_locked(home):
        return False
    await_first_cycle(home, _spawn(home))
    return True


def start(home: Home) -> Spawned | None:
    """Start a daemon in the background unless one serves, without waiting for it (for `await_first_cycle`);
    None when one serves already. No watch: a caller that writes many runs meanwhile would pay for it."""
    store.ensure_home(home)
    health, _ = current_health(home)
    if health.state == "running" or is_locked(home):
        return None
    return _spawn(home)


def _spawn(home: Home) -> Spawned:
    import subprocess  # only starting a daemon needs these: `fray list` reads the lease without them

    from fray.wrapper import face as wrapper

    spawned_at = time.time()
    log_fd = os.open(home.daemon_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, store.FILE_MODE)
    try:
        # Untagged: a daemon started from inside a job must not die with that job's attempt (fray.wrapper.tags).
        proc = subprocess.Popen([sys.executable, "-m", "fray.daemon", "--home", str(home.root)],
                                env=wrapper.untagged(os.environ), stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd,
                                cwd=str(home.root), start_new_session=True, close_fds=True)
    finally:
        os.close(log_fd)
    return Spawned(spawned_at, proc.pid)


def await_first_cycle(home: Home, spawned: Spawned) -> dict[str, Any]:
    """The lease once a daemon of this host serves and has cycled since `spawned` (ours, or one that beat it here),
    or once ours stands by and has seen the holder on another host renew its lease (it is alive after all)."""
    deadline = spawned.at + START_TIMEOUT_SEC
    mine = this_host.host_id()
    standing_by: tuple[Any, ...] | None = None  # the lease's version when ours was first seen standing by
    while time.time() < deadline:
        lease = read_lease(home)
        if lease is not None and not lease.get("stopping") and lease.get("host_id") == mine \
                and lease["last_cycle_at"] >= spawned.at and lease.get("cycles", 0) >= 1 and _alive(lease["pid"]):
            return lease
        record = host_record(home)
        if lease is not None and record is not None and record["pid"] == spawned.pid and record["role"] == "standby":
            if standing_by is None:
                standing_by = lease_version(lease)
            elif lease_version(lease) != standing_by:
                return lease
        time.sleep(0.02)
    raise StateError(f"the daemon did not start within {START_TIMEOUT_SEC:.0f}s; see {home.daemon_log}")


def stop(home: Home, timeout: float = 15.0) -> dict[str, Any] | None:
    """Ask this host's daemon (acting or standing by) to exit, and wait until it has; its record, None if none ran.
    Its attempts keep running; a standby of another host takes the lease over at once."""
    lease = read_lease(home)
    record = host_record(home)
    pid = None
    if lease is not None and lease.get("host_id") == this_host.host_id() and not lease.get("stopping"):
        pid = lease["pid"]
    elif record is not None and record["host_id"] == this_host.host_id() and record["role"] != "stopped":
        pid = record["pid"]
    if pid is None or not is_locked(home):
        if lease is not None and lease.get("host_id") != this_host.host_id() and not lease.get("stopping"):
            raise StateError(f"the daemon runs on {lease['host']} (pid {lease['pid']}); stop it from there "
                             f"(`fray --remote {lease['host']} daemon stop`), or start one here to stand by")
        return None
    import signal

    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return lease if lease is not None and lease["pid"] == pid else record
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not is_locked(home):
            return lease if lease is not None and lease["pid"] == pid else record
        time.sleep(0.05)
    raise StateError(f"the daemon (pid {pid}) did not stop within {timeout:.0f}s")

