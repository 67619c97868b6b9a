"""The daemon's writer of the list summary (fray.state.list_summary): the rows of the runs not running.

After a cycle, at most every WRITE_EVERY_SEC and only when a row or a position
moved, the daemon writes the row of every run it holds whose row does not move
with time: readable, its meta.json committed (its stat known), and ended, or
not ended with no attempt in flight and no backoff timer. A row is built again
only when its run's meta.json or control.json stat changed; the progress of its
last attempt is read then (the wrapper writes no more once the attempt is closed).

What readers need to see past it: the journal's end (fray.state.run_changes)
as the summary is written, between two batches, and how far audit.jsonl was
read. A run named in audit.jsonl is left out, and so read live by every
listing, until the control.json on disk is the one this daemon's index read
(the request is written before its audit line, so a request read here is on
disk; the index takes it at the watcher's report or the next full scan). A
line that cannot be read (a request cut off by a crash) leaves out, once, every
run whose control.json is not the one read.

Fenced like the daemon's other writes: written only while the lease is held, and
named after this daemon's journal, which a newer daemon replaces with its own.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from typing import Any, Callable

from fray.core.model import Meta
from fray.core.run_row import row_of
from fray.daemon.cycle_state import RunState
from fray.daemon.lease_keeper import Fence
from fray.errors import CorruptFileError
from fray.state import list_summary, store
from fray.state.layout import Home, attempt_file
from fray.state.row_cache import stat_key
from fray.state.run_changes import Journal
from fray.wrapper import contract

log = logging.getLogger("fray.daemon")

WRITE_EVERY_SEC = 1.0  # a busy daemon rewrites it at most this often; a listing reads live what changed since


def summarized(meta: Meta) -> bool:
    """Whether a run's row is the same whenever it is computed: nothing in flight, no timer (core.status)."""
    return meta.in_flight is None and (meta.phase == "ended" or meta.next_attempt_at is None)


class SummaryWriter:
    """Keeps each summarized run's row (rebuilt when its files' stat change) and writes the summary."""

    def __init__(self, home: Home, journal: Journal, lease: Fence,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.home = home
        self._journal = journal
        self._lease = lease
        self._clock = clock
        self._rows: dict[str, tuple[Any, Any, dict[str, Any]]] = {}  # run id -> (meta key, control key, row)
        self._audit = _audit_size(home)  # what the index reads from now on was written before it
        self._suspects: set[str] = set()  # runs named in audit.jsonl whose request the index has not read yet
        self._check_all = False
        self._written: tuple[Any, ...] | None = None
        self._written_at = float("-inf")
        self._changed = False  # a row built or dropped by the last `_current_rows`

    def write(self, runs: Mapping[str, RunState], force: bool = False) -> bool:
        """Write the summary of `runs` (the index's) if it moved and WRITE_EVERY_SEC passed (`force`: whenever it
        moved); whether it was written."""
        if not force and self._clock() - self._written_at < WRITE_EVERY_SEC:
            return False
        position = self._journal.position()
        if position is None or not self._lease.valid():
            return False
        self._read_requests()
        rows = self._current_rows(runs)
        moved = (position, self._audit, frozenset(self._rows), frozenset(self._suspects))
        if moved == self._written and not self._changed:
            return False
        try:
            store.make_dirs(self.home.cache_dir)
            self._lease.check()
            data = list_summary.encode(rows, position, self._audit, self._lease.generation, time.time())
            store.write_bytes_atomic(list_summary.path(self.home), data, sync=False)
        except OSError as exc:
            log.warning("could not write %s (listings read the runs instead): %s", list_summary.path(self.home), exc)
            return False
        self._written, self._written_at = moved, self._clock()
        return True

    def _read_requests(self) -> None:
        requested = list_summary.requested_since(self.home, self._audit)
        if requested is None:  # audit.jsonl replaced: whatever it said, check every run once
            self._audit, self._check_all = _audit_size(self.home), True
            return
        self._audit = requested.offset
        self._suspects |= requested.run_ids
        self._check_all = self._check_all or requested.unreadable

    def _current_rows(self, runs: Mapping[str, RunState]) -> dict[str, dict[str, Any]]:
        """Each summarized run's row, as of the index; the rows kept are brought up to date."""
        self._changed = False
        checking = set(runs) if self._check_all else self._suspects
        self._check_all = False
        pending = {run_id for run_id in checking if run_id in runs
                   and stat_key(self.home.control_file(run_id)) != runs[run_id].control_key}
        self._suspects = pending
        kept: dict[str, tuple[Any, Any, dict[str, Any]]] = {}
        for run_id, state in runs.items():
            meta = state.meta
            if (meta is None or state.problem is not None or state.meta_key is None or run_id in pending
                    or not summarized(meta)):
                continue
            before = self._rows.get(run_id)
            if before is not None and before[0] == state.meta_key and before[1] == state.control_key:
                kept[run_id] = before
                continue
            kept[run_id] = (state.meta_key, state.control_key, self._row(run_id, state))
            self._changed = True
        if kept.keys() != self._rows.keys():
            self._changed = True
        self._rows = kept
        return {run_id: entry[2] for run_id, entry in kept.items()}

    def _row(self, run_id: str, state: RunState) -> dict[str, Any]:
        meta = state.meta
        assert meta is not None
        current = meta.current
        progress = None
        if current is not None:
            try:
                progress = store.read_json(attempt_file(str(state.paths.dir), current.number, contract.PROGRESS),
                                           "progress")
            except CorruptFileError:
                progress = None
        return row_of(run_id, meta, state.control.paused, None, None, progress, time.time())


def _audit_size(home: Home) -> int:
    try:
        return os.stat(home.audit).st_size
    except FileNotFoundError:
        return 0
