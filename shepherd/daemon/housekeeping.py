"""Removing what no run needs any more, now and then, at the end of a cycle: finished job arrays' folders
(fray.daemon.sweeps), code snapshots no run refers to (fray.daemon.snapshot_collector), and the
uncommitted temp files of a daemon killed mid-cycle (fray.state.commit_batch).

Each keeps its own pace; the first two need every run's meta, which the cycle has in hand. The temp files
are looked for in the first cycle and hourly after it, in a thread: a look at every run folder must not hold
up the first cycle of a daemon started over thousands of runs.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable, Iterable, Iterator

from fray.core.model import Meta
from fray.daemon.sweeps import ArrayFolders
from fray.daemon.snapshot_collector import SnapshotCollector
from fray.state import commit_batch
from fray.state.layout import Home

log = logging.getLogger("fray.daemon")

TEMPS_EVERY_SEC = 3600.0


class LazyMetas:
    """Every run's meta, passed over only if iterated."""

    def __init__(self, metas: Callable[[], Iterable[Meta | None]]) -> None:
        self._metas = metas

    def __iter__(self) -> Iterator[Meta | None]:
        return iter(self._metas())


class Housekeeping:
    def __init__(self, home: Home, backends: Callable[[], Iterable[Any]]) -> None:
        self.arrays = ArrayFolders(home, backends)
        self.snapshots = SnapshotCollector(home)
        self.home = home
        self._temps_at = float("-inf")

    def remove_left_behind(self) -> None:
        try:
            removed = commit_batch.remove_left_behind(self.home, os.getpid())
        except OSError as exc:
            log.warning("removing temp files left by a killed daemon (retried later): %s", exc)
            return
        if removed:
            log.info("removed %d temp files a killed daemon left in run folders", removed)

    def tidy(self, metas: Callable[[], Iterable[Meta | None]], now: float) -> None:
        """`metas()`: every run's meta, asked for only by a task whose time has come (a pass over every run)."""
        self.arrays.remove_finished(LazyMetas(metas), now)
        self.snapshots.collect(LazyMetas(metas), now)
        if time.monotonic() - self._temps_at >= TEMPS_EVERY_SEC:
            self._temps_at = time.monotonic()
            threading.Thread(target=self.remove_left_behind, name="fray-temps", daemon=True).start()
