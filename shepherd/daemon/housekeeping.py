"""Removing what no run needs any more, now and then, at the end of a cycle: finished job arrays' folders
(fray.daemon.array_folders) and code snapshots no run refers to (fray.daemon.snapshot_collector).

Each keeps its own pace; both need every run's meta, which the cycle has in hand.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from fray.core.model import Meta
from fray.daemon.array_folders import ArrayFolders
from fray.daemon.snapshot_collector import SnapshotCollector
from fray.state.layout import Home


class Housekeeping:
    def __init__(self, home: Home, backends: Callable[[], Iterable[Any]]) -> None:
        self.arrays = ArrayFolders(home, backends)
        self.snapshots = SnapshotCollector(home)

    def tidy(self, metas: list[Meta | None], now: float) -> None:
        self.arrays.sweep(metas, now)
        self.snapshots.collect(metas, now)
