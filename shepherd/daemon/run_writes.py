"""What carrying out a plan writes into a run's folder: meta.json (staged in the cycle's group commit), ended.json, events.

The daemon's cycle (`fray.daemon.loop`) decides the order, records first, then
meta.json, then what reaches the backend; these are the writes themselves, shared
with the submitter (`fray.daemon.submitting`) and the sweeper of strays.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from fray.core import policy
from fray.core.model import Meta
from fray.daemon.cycle_state import RunState
from fray.daemon.lease_keeper import Fence
from fray.daemon.run_index import RunIndex
from fray.errors import CorruptFileError
from fray.state import meta_file as run_meta, store
from fray.state.commit_batch import CommitBatch
from fray.state.layout import RunPaths
from fray.state.row_cache import stat_key

log = logging.getLogger("fray.daemon")


class EventLog:
    """Each run's events.jsonl, as the daemon appends to it (and its own log)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock

    def event(self, paths: RunPaths, kind: str, reason: str, attempt: int | None = None,
              data: dict[str, Any] | None = None, at: float | None = None) -> None:
        """One line in the run's events.jsonl (and the daemon's log); a full disk loses the line, not the cycle."""
        record: dict[str, Any] = {"at": at or self.clock(), "run_id": paths.run_id, "kind": kind,
                                  "attempt": attempt, "reason": reason}
        if data:
            record["data"] = data
        try:
            store.append_jsonl(paths.events, record, "event")
        except OSError as exc:
            log.warning("could not append to %s: %s", paths.events, exc)
        log.info("%s %s%s: %s", paths.run_id, kind, f" #{attempt}" if attempt else "", reason)


class RunWrites:
    """The daemon's writes of one run's records (one writer per file: DESIGN's writers table)."""

    def __init__(self, batch: CommitBatch, index: RunIndex, events: EventLog, lease: Fence) -> None:
        self.batch = batch  # the cycle's group commit, which `commit` stages into
        self._index = index
        self.event, self._clock = events.event, events.clock
        self._lease = lease
        self._written: dict[str, RunState] = {}  # meta.json path -> its run as indexed, staged since the last commit
        batch.on_commit(self._committed)

    def commit(self, paths: RunPaths, before: Meta, plan: policy.Plan) -> None:
        """Stage meta.json if the plan changed it (committed with the cycle's batch), then log the plan's events."""
        after = plan.meta
        if after != before:  # dataclass equality: no dicts built for the common case of no change
            after.updated_at = plan.now
            after.lease_generation = self._lease.generation  # a newer daemon can tell this write from its own
            run_meta.stage(self.batch, paths, after.to_dict())
            indexed = self._index.runs.get(paths.run_id)
            if indexed is not None:  # what we wrote is what a re-read would give, once committed (_committed)
                indexed.meta, indexed.meta_key = after.copy(), None  # None: read again unless committed
                self._written[str(paths.meta)] = indexed
        for event in plan.events:
            self.event(paths, event.kind, event.reason, event.attempt, event.data, at=plan.now)

    def _committed(self, targets: list[str]) -> None:
        """The batch put these in place: the index takes their new stat, so the next cycle does not read back
        what this daemon wrote (a later change by anyone else changes the stat again, and is read)."""
        written, self._written = self._written, {}
        for target in targets:
            indexed = written.get(target)
            if indexed is not None:
                indexed.meta_key = stat_key(target)

    def finish(self, paths: RunPaths, meta: Meta, action: policy.Finish) -> None:
        """ended.json: the run's final status, reason and result, written once, and agreeing with meta.json.

        One already there is not a committed end (meta.json would say ended, and no Finish would be decided): a
        daemon killed between it and its commit, or one whose lease lapsed while it was paused between its check
        and its create, landing after the takeover. What this daemon decided is what its commit says: an earlier
        record that says otherwise is replaced (one that says the same, but for its time, stands)."""
        self._lease.check()  # never by a daemon another one replaced
        last = meta.current
        final = store.read_json(paths.attempt(last.number).final, "final") if last and last.cause == "success" else None
        record = {"run_id": meta.run_id, "status": action.status, "reason": action.reason,
                  "ended_at": meta.end.at if meta.end else self._clock(), "attempts": len(meta.attempts),
                  "final_attempt": last.number if last else None, "result": (final or {}).get("result")}
        if store.create_json(paths.ended, record, "ended"):
            return
        try:
            found = store.read_json(paths.ended, "ended")
        except CorruptFileError:
            found = None  # moved aside: written again below
        if found is None or {**found, "ended_at": None} != {**record, "ended_at": None}:
            store.write_json(paths.ended, record, "ended")
            self.event(paths, "error", f"ended.json said {(found or {}).get('status', 'nothing readable')} in a "
                       "record no commit of meta.json backs: this daemon's end is written in its place")
