"""What `fray list` and `fray status` show, as plain JSON-ready data.

Human output is rendered from exactly these dicts (and `--json` prints them),
so the two can never disagree. Reading is tolerant: a corrupt or missing file
makes the run `error_unknown` with the reason, never an exception.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Container
from operator import itemgetter
from pathlib import Path
from typing import Any

from fray.core.model import Attempt, AttemptState, Control, Meta, RunSpec
from fray.core.run_row import row_of
from fray.core.status import Status
from fray.core.sweeps import folding, lookup
from fray.daemon import lease
from fray.errors import CorruptFileError
from fray.state import list_summary, meta_file, parents_index, run_changes, store
from fray.state import layout
from fray.state.layout import Home, RunPaths
from fray.state.row_cache import RowCache, stat_key
from fray.wrapper import contract

FEW_READ = 64  # runs the summary leaves out that are read one by one, without loading the row cache


def _load(paths: RunPaths, with_control: bool = True) -> tuple[Meta | None, Control, str | None]:
    """Meta and control of a run, and why the run cannot be judged (neither meta.json nor its copy could be
    read); `with_control=False` skips control.json for ended runs (nothing to ask)."""
    raw, problem = meta_file.read(paths)  # a corrupt meta.json: its last good copy (listed in corrupt_files)
    meta = Meta.from_dict(raw) if raw is not None else None
    if meta is not None and meta.phase == "ended" and not with_control:
        return meta, Control(), problem
    try:
        raw_control = store.read_json(paths.control, "control")
    except CorruptFileError:
        # Moved aside and listed with the run's corrupt files; the run is what its meta.json says it is,
        # with no request pending until the next one rewrites control.json.
        raw_control = None
    return meta, Control.from_dict(raw_control), problem


def run_row(home: Home, run_id: str, now: float) -> dict[str, Any]:
    """One run as a row of `fray list --json` (schemas/cli-list.json)."""
    meta, control, problem = _load(home.run(run_id), with_control=False)
    return _row_from(home.run_folder(run_id), run_id, meta, control.paused, problem, now)


def _row_from(folder: str, run_id: str, meta: Meta | None, paused: bool, problem: str | None,
              now: float) -> dict[str, Any]:
    heartbeat_at, progress = _attempt_inputs(folder, meta)
    return row_of(run_id, meta, paused, problem, heartbeat_at, progress, now)


def _attempt_inputs(folder: str, meta: Meta | None) -> tuple[float | None, dict[str, Any] | None]:
    """The current attempt's heartbeat (while it is in flight) and progress (from plain string paths: `fray
    list` reads these for every run still going)."""
    current = meta.current if meta is not None else None
    if current is None:
        return None, None
    heartbeat = store.read_heartbeat(layout.attempt_file(folder, current.number, contract.HEARTBEAT)) \
        if current.in_flight else None
    return heartbeat, read_progress(layout.attempt_file(folder, current.number, contract.PROGRESS))


def read_progress(path: Path | str) -> dict[str, Any] | None:
    """An attempt's progress.json; None when there is none or it was corrupt (moved aside)."""
    try:
        return store.read_json(path, "progress")
    except CorruptFileError:
        return None


def read_row_inputs(paths: RunPaths) -> tuple[Meta | None, bool, str | None, float | None, dict[str, Any] | None]:
    """What a run's row is computed from: (meta, paused, problem, heartbeat time, progress).

    `row_of(run_id, *inputs, now)` turns them into the row; a reader that keeps
    them (the TUI) recomputes rows as time passes without reading again.
    """
    meta, control, problem = _load(paths)
    return (meta, control.paused, problem, *_attempt_inputs(str(paths.dir), meta))


def budgets_view(meta: Meta, now: float) -> dict[str, Any]:
    """What is left of each retry budget: failures inside the retry window against the maximum."""
    from fray.core.budgets import budgets_used  # this and the other imports inside `fray status`'s functions:
    # `fray list` and `fray status` import this module, and a listing needs none of them

    from fray.core.status import healthy_period

    used = budgets_used(meta, now)
    spec = meta.spec
    return {"window_sec": spec.retry_window_sec,
            "workload": {"used": used.workload, "max": spec.max_retries},
            "node": {"used": used.node, "max": spec.max_retries_preemption},
            "backoff": {"base_sec": spec.backoff_base_sec, "max_sec": spec.backoff_max_sec,
                        "progress_after_sec": healthy_period(spec),
                        "streak": meta.counters.consecutive_fast_failures}}


def list_view(home: Home, include_ended: bool = True, limit: int | None = None, tree: bool = False,
              group: str | None = None, fold: bool = True) -> dict[str, Any]:
    """Every run (newest first), with counts per status and the daemon's health (schemas/cli-list.json).

    `tree` orders the rows shown with each job under its parent and gives each a depth.
    `group` shows only that group's runs, in index order (core.sweeps.lookup.resolve says what it may be);
    otherwise `fold` shows each sweep as one row counting its runs per status (core.sweeps.folding).
    """
    now = time.time()
    ids = list(reversed(home.run_ids()))
    folding_only = fold and group is None and not tree  # a sweep's members are seen only through its row
    rows = _rows(home, ids, now, folding_only)
    written = set(ids)
    new_points = _pending_points(home, written)
    if new_points:  # a new sweep's points, shown from its record until the daemon has written their runs
        rows = sorted(rows + [row_of(m.run_id, m, False, None, None, None, now) for m in new_points],
                      key=lambda row: row["run_id"], reverse=True)
    group_id = None
    if group is not None:
        group_id, rows = lookup.resolve(rows, group)
    if not include_ended:
        rows = [r for r in rows if r["phase"] != "ended"]
    counts = Counter(map(itemgetter("status"), rows))
    if fold and group_id is None and not tree:
        rows = folding.fold(rows)
    if limit is not None:
        rows = rows[:limit]
    data = {"home": str(home.root), "generated_at": now, "daemon": lease.view(home),
            "counts": {s.value: counts.get(s.value, 0) for s in Status}, "runs": rows,
            "active_only": not include_ended}
    if group_id is not None:
        data["group"] = group_id
    if tree:
        from fray.core import family  # only --tree needs it: `fray list` stays lean

        data["tree"] = True
        data["runs"] = [{**row, "depth": depth} for depth, row in family.tree(rows)]
    return data


def _rows(home: Home, ids: list[str], now: float, folding_only: bool = False) -> list[dict[str, Any]]:
    """The rows of these runs: from the daemon's summary (fray.state.list_summary) where it may be trusted,
    the others (running, changed since, not in it) read; every run read when there is no summary to trust.
    `folding_only`: the rows of sweeps' members are only folded, so those alike may be one shared row."""
    summary = list_summary.load(home)
    stale = list_summary.changed_since(home, summary) if summary is not None else None  # before any run is read
    if summary is None or stale is None:
        return _cached_rows(home, ids, now)
    rows = summary.rows_of(ids, stale, shared=folding_only)
    missing = [i for i, found in enumerate(rows) if found is None]
    if len(missing) > FEW_READ:
        for i, found in zip(missing, _cached_rows(home, [ids[i] for i in missing], now, set(ids))):
            rows[i] = found
    else:
        for i in missing:
            rows[i] = run_row(home, ids[i], now)
    return rows  # type: ignore[return-value]


def _cached_rows(home: Home, ids: list[str], now: float, existing: set[str] | None = None) -> list[dict[str, Any]]:
    """The rows of these runs through the row cache (fray.state.row_cache). `existing`: every run, of which
    these are some; the cache then keeps its place in the journal (the others' changes are not checked)."""
    cache = RowCache.load(home)
    changes = run_changes.read_since(home, cache.position)  # before any file is looked at: a later change shows
    if existing is None:
        cache.position, existing = changes.position, set(ids)
    rows = [row if row is not None else _uncached_row(home, run_id, cache, key, now)
            for run_id, (key, row) in zip(ids, cache.ended_rows(ids, home.meta_file, changes.run_ids))]
    cache.save(existing)
    return rows


def _pending_points(home: Home, written: Container[str]) -> list[Meta]:
    """The points of new sweeps whose runs the daemon has not written yet (none without sweep records)."""
    if not home.group_ids():
        return []  # and fray.state.sweeps.unwritten (with the audit log's hashing) is not imported
    from fray.state.sweeps import unwritten

    return unwritten.pending_members(home, written)


def _uncached_row(home: Home, run_id: str, cache: RowCache, meta_key: list[int] | None,
                  now: float) -> dict[str, Any]:
    """The row of a run not cached as ended, caching what it can for the next listing.

    A run still going takes its meta and paused flag from the cache when neither
    meta.json nor control.json changed; its heartbeat and progress are always read.
    """
    control_key = stat_key(home.control_file(run_id))
    hit = cache.get_live(run_id, meta_key, control_key)
    if hit is not None:
        try:
            return _row_from(home.run_folder(run_id), run_id, hit[0], hit[1], None, now)
        except (AttributeError, KeyError, TypeError, ValueError):
            pass  # a cache damaged by hand (the files were validated when it was written): read the files
    meta, control, problem = _load(home.run(run_id), with_control=False)
    if meta is not None and problem is None and meta.phase != "ended":
        cache.put_live(run_id, meta_key, control_key, meta, control.paused)
    row = _row_from(home.run_folder(run_id), run_id, meta, control.paused, problem, now)
    if row["phase"] == "ended":
        cache.put(run_id, meta_key, row)
    return row


def status_view(home: Home, run_id: str, events: int = 20) -> dict[str, Any]:
    """One run in full: its row, spec, attempts with their records, recent events (schemas/cli-status.json)."""
    from fray.ops.history import goodput_view

    now = time.time()
    paths = home.run(run_id)
    meta, control, problem = _load(paths)
    heartbeat_at, progress = _attempt_inputs(str(paths.dir), meta)
    row = row_of(run_id, meta, control.paused, problem, heartbeat_at, progress, now)
    attempts = []
    for attempt in (meta.attempts if meta else []):
        files = paths.attempt(attempt.number)
        failure, task = _reported_failure(files, attempt)
        attempts.append({**attempt.to_dict(), "failure": failure, "failed_task": task,
                         "stdout": str(files.stdout), "stderr": str(files.stderr),
                         "watch": read_record(files.dir / contract.WATCH, "watch"),
                         "retry_args": _retry_args(files, meta.spec)})
    recent = [line.record for line in store.read_jsonl(paths.events, "event") if line.record is not None]
    return {
        "run": row,
        "spec": meta.spec.to_dict() if meta else None,
        "script": meta.script if meta else None,
        "submitted_by": meta.submitted_by if meta else None,
        "namespace": meta.job_namespace if meta else None,
        "counters": vars(meta.counters) if meta else None,
        "budgets": budgets_view(meta, now) if meta else None,
        "wait_reason": meta.wait_reason if meta else None,
        "next_attempt_at": meta.next_attempt_at if meta else None,
        "end": vars(meta.end) if meta and meta.end else None,
        "control": control.to_dict(),
        "attempts": attempts,
        "progress": progress,
        "goodput": goodput_view(home, meta, now) if meta else None,
        "events": recent[-events:],
        "corrupt_files": [str(p) for p in paths.corrupt_files()],
        "dir": str(paths.dir),
        "workdir": workdir_view(paths, meta.spec) if meta else None,
        "daemon": lease.view(home),
        "commands": commands_view(paths, now),
    }


def workdir_view(paths: layout.RunPaths, spec: RunSpec) -> dict[str, Any]:
    """Where the job runs, so where its relative outputs land: in the run's copy of its code, or --workdir."""
    code = spec.code
    if code is not None and code.get("cwd") is not None:
        return {"path": str(paths.code_dir / code["cwd"]) if code["cwd"] != "." else str(paths.code_dir),
                "in_snapshot": True}
    return {"path": spec.workdir, "in_snapshot": False}


def _retry_args(files: layout.AttemptPaths, spec: RunSpec) -> dict[str, Any] | None:
    if not spec.retry_args:
        return None
    started = read_record(files.started, "started")
    return started.get("retry_args") if started else None


def commands_view(paths: RunPaths, now: float) -> dict[str, Any]:
    """The run's runtime commands: those not acknowledged yet (oldest first, with their age), and how many were.

    Each command is its envelope plus the receipts the workload wrote
    (fray.wrapper.commands); a corrupt file is moved aside and listed with the run's
    corrupt files, not shown here.
    """
    waiting: list[dict[str, Any]] = []
    acknowledged = 0
    for command_id in paths.command_ids():
        if paths.command_ack(command_id).exists():
            acknowledged += 1
            continue
        envelope = read_record(paths.command(command_id), "command")
        if envelope is None:
            continue
        delivered = read_record(paths.command_delivered(command_id), "command-delivered")
        waiting.append({
            **envelope,
            "age_sec": round(max(0.0, now - envelope["issued_at"]), 3),
            "delivered_at": delivered["delivered_at"] if delivered else None,
            "delivered_attempt": delivered["attempt"] if delivered else None,
        })
    waiting.sort(key=lambda c: (c["issued_at"], c["id"]))
    return {"unacknowledged": waiting, "acknowledged": acknowledged}


def _reported_failure(files: layout.AttemptPaths, attempt: Attempt) -> tuple[dict[str, Any] | None, int | None]:
    """The failure record an ended attempt is reported by, and its task when the attempt has several: the
    task that failed the group, as the daemon chose it (core.placement.reporting), not a sibling killed with it."""
    failure = read_record(files.failure, "failure")
    indexes = files.task_indexes()
    if len(indexes) < 2 or attempt.state != AttemptState.ENDED.value:
        return failure, None
    from fray.core.placement.reporting import TaskEnd, reporting_task  # attempts of several tasks only

    exit_record = read_record(files.exit, "exit")
    others = [] if attempt.stop_reason else [TaskEnd(i, record, read_record(files.task(i).failure, "failure"))
                                             for i in indexes[1:] if (record := read_record(files.task(i).exit, "exit"))]
    end, prefix = reporting_task(TaskEnd(0, exit_record, failure) if exit_record else None, others, len(indexes))
    return (end.failure, end.index if prefix else None) if end is not None else (failure, None)


def read_record(path: Any, schema: str) -> dict[str, Any] | None:
    """A small record file (failure, probe, command...); None when absent or corrupt (moved aside)."""
    try:
        return store.read_json(path, schema)
    except CorruptFileError:
        return None


# -- families (the cluster API) ---------------------------------------------------------


def _summary(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in ("run_id", "name", "status", "icon", "reason")}


class _FolderExists:
    """Run ids as a container answered by one stat each: whether a few runs exist, without listing runs/."""

    def __init__(self, home: Home) -> None:
        self.home = home

    def __contains__(self, run_id: object) -> bool:
        return isinstance(run_id, str) and os.path.isdir(self.home.run_folder(run_id))


def family_view(home: Home, meta: Meta | None) -> dict[str, Any] | None:
    """A run's family for `fray status`: namespace, parent, children, group, reservation (None: it has none).

    Reads that run's parent and children only: the children are found in fray.state.parents_index, not by
    listing every run, so `fray status` costs the same among 10 runs or 10,000.
    """
    if meta is None:
        return None
    now = time.time()
    written = _FolderExists(home)
    rows = [run_row(home, child, now) for child in parents_index.children(home, meta.run_id)]
    rows += [row_of(m.run_id, m, False, None, None, None, now) for m in _pending_points(home, written)
             if m.parent_run_id == meta.run_id]  # a new sweep's points, until the daemon has written their runs
    children = sorted((_summary(r) for r in rows), key=lambda r: r["run_id"])
    parent = None
    if meta.parent_run_id:
        parent = (_summary(run_row(home, meta.parent_run_id, now)) if meta.parent_run_id in written else
                  {"run_id": meta.parent_run_id, "name": meta.parent_run_id, "status": "error_unknown", "icon": "✗",
                   "reason": "no such run"})
    if parent is None and not children and not meta.namespace and not meta.group and not meta.reservation:
        return None
    return {"namespace": meta.namespace or (meta.run_id if children else None), "parent": parent,
            "parent_attempt": meta.parent_attempt, "children": children, "group": meta.group,
            "reservation": meta.reservation}
