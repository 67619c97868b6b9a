"""Is a daemon serving this FRAY_HOME, and starting or stopping one.

The lock (locks/daemon.lock) says whether a daemon lives; its lease
(daemon.json) says who it is and when it last completed a cycle, from which
`health` (pure) tells a live daemon from a stale or stopped one.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, NamedTuple

from fray.errors import CorruptFileError, StateError
from fray.state import store
from fray.state.layout import Home

START_TIMEOUT_SEC = 15.0


class Health(NamedTuple):
    """The daemon as a reader sees it from its lock and lease."""

    state: str  # "running" | "stale" | "stopped"
    detail: str


def health(lease: dict[str, Any] | None, locked: bool, now: float) -> Health:
    if lease is None:
        return Health("running", "running (no lease written yet)") if locked else Health("stopped", "no daemon has run here")
    age = now - lease["last_cycle_at"]
    stale_after = max(10.0, 5 * lease["poll_interval_sec"])
    who = f"pid {lease['pid']} on {lease['host']}"
    if not locked or lease.get("stopping"):
        return Health("stopped", f"not running (last: {who}, {age:.0f}s ago)")
    if age > stale_after:
        return Health("stale", f"{who} has not completed a cycle for {age:.0f}s")
    return Health("running", f"{who}, last cycle {age:.1f}s ago")


def read_lease(home: Home) -> dict[str, Any] | None:
    try:
        return store.read_json(home.daemon_lease, "daemon")
    except CorruptFileError:
        return None  # moved aside; the running daemon rewrites it on its next cycle


def is_locked(home: Home) -> bool:
    """Whether some process holds the daemon lock right now."""
    return store.held(home, "daemon")


def current_health(home: Home) -> tuple[Health, dict[str, Any] | None]:
    lease = read_lease(home)
    return health(lease, is_locked(home), time.time()), lease


def view(home: Home) -> dict[str, Any]:
    """The daemon as the CLI's documents show it (their `daemon` object): its state, why, and its lease."""
    state, record = current_health(home)
    return {"state": state.state, "detail": state.detail, "lease": record}


def ensure_running(home: Home) -> dict[str, Any]:
    """Start a daemon in the background unless one is serving; wait for its first cycle."""
    store.ensure_home(home)
    lease = read_lease(home)
    if is_locked(home) and lease is not None and not lease.get("stopping"):
        return lease
    return await_first_cycle(home, _spawn(home))


def start(home: Home) -> float | None:
    """Start a daemon in the background unless one is serving, without waiting for it: when it was started
    (for `await_first_cycle`), None when one serves already."""
    store.ensure_home(home)
    lease = read_lease(home)
    if is_locked(home) and lease is not None and not lease.get("stopping"):
        return None
    return _spawn(home)


def _spawn(home: Home) -> float:
    import subprocess  # only starting a daemon needs these: `fray list` reads the lease without them

    from fray.wrapper import tags

    spawned_at = time.time()
    log_fd = os.open(home.daemon_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, store.FILE_MODE)
    try:
        # Untagged: a daemon started from inside a job must not die with that job's attempt (fray.wrapper.tags).
        subprocess.Popen([sys.executable, "-m", "fray.daemon", "--home", str(home.root)], env=tags.untagged(os.environ),
                         stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd, cwd=str(home.root),
                         start_new_session=True, close_fds=True)
    finally:
        os.close(log_fd)
    return spawned_at


def await_first_cycle(home: Home, spawned_at: float) -> dict[str, Any]:
    """The lease of the daemon started at `spawned_at` (`start`) once it has completed a cycle."""
    deadline = spawned_at + START_TIMEOUT_SEC
    while time.time() < deadline:
        lease = read_lease(home)
        if lease is not None and lease["last_cycle_at"] >= spawned_at and not lease.get("stopping"):
            return lease
        time.sleep(0.02)
    raise StateError(f"the daemon did not start within {START_TIMEOUT_SEC:.0f}s; see {home.daemon_log}")


def stop(home: Home, timeout: float = 15.0) -> dict[str, Any] | None:
    """Ask the running daemon to exit (its attempts keep running); wait until it has."""
    lease = read_lease(home)
    if not is_locked(home) or lease is None:
        return None
    import signal
    import socket

    if lease["host"] != socket.gethostname():
        raise StateError(f"the daemon runs on {lease['host']} (pid {lease['pid']}); stop it from there")
    try:
        os.kill(lease["pid"], signal.SIGTERM)
    except ProcessLookupError:
        return lease
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not is_locked(home):
            return lease
        time.sleep(0.05)
    raise StateError(f"the daemon (pid {lease['pid']}) did not stop within {timeout:.0f}s")
