"""Removing a Slurm job array's folder (arrays/<name>/: its script, task list and task logs) once it is done.

An array's folder is needed while any task of it may still start or run: a
task reads its line of the task list when it starts, and Slurm writes the
task's own log there. So a folder goes once no attempt in flight is a task
of its array and no new sweep is being launched as it, and it has not
changed for a while (fray.backends.slurm.arrays.finished); this also removes,
in time, the folder of an array lost in a daemon crash, whose tasks run
nothing. Looked at every SWEEP_EVERY_SEC, by the backends that keep such
folders (`remove_finished_arrays`).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Iterable

from fray.core.model import Meta
from fray.state.sweeps import unwritten
from fray.state.layout import Home

log = logging.getLogger("fray.daemon")

SWEEP_EVERY_SEC = 60.0


class ArrayFolders:
    def __init__(self, home: Home, backends: Callable[[], Iterable[Any]]) -> None:
        self.home = home
        self.backends = backends  # the backends loaded now
        self._swept_at = float("-inf")

    def sweep(self, metas: Iterable[Meta | None], now: float) -> list[str]:
        """Remove the finished arrays' folders (at most every SWEEP_EVERY_SEC); their names."""
        if time.monotonic() - self._swept_at < SWEEP_EVERY_SEC or not self.home.array_names():
            return []
        self._swept_at = time.monotonic()
        in_use = {launch["array_name"] for _, launch in unwritten.pending(self.home)
                  if launch is not None and launch["array_name"]}
        for meta in metas:
            attempt = meta.in_flight if meta is not None else None
            if attempt is not None and attempt.backend_ref and attempt.backend_ref.get("job_name"):
                in_use.add(attempt.backend_ref["job_name"])
        removed: list[str] = []
        for backend in self.backends():
            remove = getattr(backend, "remove_finished_arrays", None)
            if remove is not None:
                try:
                    removed += remove(in_use, now)
                except OSError as exc:
                    log.warning("removing finished job arrays' folders (retried later): %s", exc)
        if removed:
            log.info("removed the folders of %d finished job arrays", len(removed))
        return removed
