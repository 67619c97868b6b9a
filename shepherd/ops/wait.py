"""Waiting for a run to end, and keeping a daemon alive while someone waits.

`fray submit --wait` waits here, and `fray logs -f` (fray.ops.logs.Follower)
keeps the daemon alive through the same DaemonKeeper: a person watching a
run must not watch it stall because the daemon stopped.
"""

from __future__ import annotations

import time
from typing import Any

from fray.core.model import Meta, Phase
from fray.daemon import lease
from fray.errors import CorruptFileError
from fray.state import runs, store
from fray.state.layout import Home

POLL_SEC = 0.2
DAEMON_CHECK_SEC = 5.0


class DaemonKeeper:
    """Restarts the daemon if it stops while someone waits on a run (any fray command may)."""

    def __init__(self, home: Home, every: float = DAEMON_CHECK_SEC) -> None:
        self.home = home
        self.every = every
        self._next = time.monotonic() + every

    def tick(self) -> None:
        if time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self.every
        health, _ = lease.current_health(self.home)
        if health.state == "stopped":
            lease.ensure_running(self.home)


def wait_for_end(home: Home, run_id: str, poll: float = POLL_SEC) -> Meta:
    """Poll the run's meta until it has ended; the daemon is kept alive meanwhile."""
    keeper = DaemonKeeper(home)
    while True:
        meta = runs.read_meta(home, run_id)
        if meta.phase == Phase.ENDED.value and meta.end is not None:
            return meta
        keeper.tick()
        time.sleep(poll)


def ended_record(home: Home, run_id: str, patience: float = 2.0) -> dict[str, Any] | None:
    """ended.json, which the daemon writes just after it marks the run ended in meta.json."""
    deadline = time.monotonic() + patience
    while True:
        try:
            record = store.read_json(home.run(run_id).ended, "ended")
        except CorruptFileError:
            return None
        if record is not None or time.monotonic() >= deadline:
            return record
        time.sleep(0.05)
