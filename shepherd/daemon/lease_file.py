"""The lease as a file: reading daemon.json, and what of it changes at each renewal (for holder and readers alike).

The writer's side (taking a generation, renewing, the fence) is fray.daemon.lease_keeper; a reader (`fray list`'s
header, `fray daemon status`) needs only this, none of the keeper's threads and logging.
"""

from __future__ import annotations

from typing import Any

from fray.errors import CorruptFileError
from fray.state import store
from fray.state.layout import Home

STANDBY_POLL_SEC = 0.5  # how often a standby reads the lease: part of the takeover bound


def read_lease(home: Home) -> dict[str, Any] | None:
    try:
        return store.read_json(home.daemon_lease, "daemon")
    except CorruptFileError:
        return None  # moved aside; the holder rewrites it at its next renewal


def lease_version(lease: dict[str, Any] | None) -> tuple[Any, ...] | None:
    """What changes at every renewal: what an observer watches."""
    if lease is None:
        return None
    return lease.get("generation", 0), lease.get("renewals", lease.get("cycles")), lease["pid"], lease["host"], \
        lease.get("stopping", False)


def timeout_of(lease: dict[str, Any] | None, default: float) -> float:
    return float((lease or {}).get("lease_timeout_sec") or default)
