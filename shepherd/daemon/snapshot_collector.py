"""Removing code snapshots no run refers to any more (fray.state.snapshots.collect), now and then.

A snapshot is referred to by every run whose spec names its tree, ended runs
included (`fray control start` runs one again), and by the template of every
sweep whose runs are not written yet. What a submit is writing at this moment
is young, and collect spares anything young, so no lock is needed.
"""

from __future__ import annotations

import logging
import time
from typing import Iterable

from fray.core.model import Meta
from fray.state import snapshots
from fray.state.sweeps import unwritten
from fray.state.layout import Home

log = logging.getLogger("fray.daemon")

COLLECT_EVERY_SEC = 3600.0


class SnapshotCollector:
    def __init__(self, home: Home) -> None:
        self.home = home
        self._collected_at = float("-inf")

    def collect(self, metas: Iterable[Meta | None], now: float) -> tuple[int, int]:
        """Remove unreferenced trees and objects (at most every COLLECT_EVERY_SEC): how many of each.
        A run too new for `metas` is safe: its tree is young."""
        if time.monotonic() - self._collected_at < COLLECT_EVERY_SEC or not self.home.snapshots_dir.is_dir():
            return 0, 0
        self._collected_at = time.monotonic()
        referenced = {meta.spec.code["tree"] for meta in metas if meta is not None and meta.spec.code}
        for record, _ in unwritten.pending(self.home):
            code = record["template"]["spec"].get("code")
            if code:
                referenced.add(code["tree"])
        try:
            removed = snapshots.collect(self.home, referenced, now)
        except OSError as exc:
            log.warning("removing unused code snapshots (retried later): %s", exc)
            return 0, 0
        if any(removed):
            log.info("removed %d code snapshots and %d stored files no run uses", *removed)
        return removed
