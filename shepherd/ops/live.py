"""Every run's row kept current cheaply, the recent events across runs, and which files changed.

The live read model behind the dashboard (fray.tui), front-end neutral: any
long-lived view of FRAY_HOME (a terminal, a browser, a watch mode) scans here.

`RunsModel.scan` reads only what changed since the last scan and returns a
`Snapshot` saying which rows changed, so the table updates those rows in place.
Rows are exactly `fray list`'s (fray.core.run_row.row_of, views.read_row_inputs): ended runs
come from the same stat-keyed row cache (row_cache), and for runs still going
the model keeps the inputs of their row (meta, paused, heartbeat time,
progress) and recomputes the row as time passes, re-reading a file only when
its stat changed. A file that cannot be read makes its row error_unknown (the
reason says which file), as in `fray list`; nothing here raises for bad state.

`Watcher` runs watchfiles on FRAY_HOME in a thread and reports which runs
(and which of daemon.json, blacklist.json, nodes.json) changed; the app falls
back to a timer when it cannot watch (no inotify, too many files). Heartbeats
and progress are written by compute nodes, often over NFS where no file event
reaches the login node, so every timer tick re-reads those of the live runs
(`Hint.beats`: a small read and a stat per running run).

No front-end import here: this is plain Python, tested and benchmarked alone.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import orjson

from fray.core.model import Meta, Phase
from fray.core.status import Status
from fray.core.run_row import row_of
from fray.daemon import lease
from fray.ops import views
from fray.state import layout, store
from fray.state.sweeps import unwritten
from fray.state.layout import Home
from fray.wrapper import contract
from fray.state.row_cache import RowCache, stat_key

Row = dict[str, Any]
EVENTS_KEPT = 200  # recent actions held for the dashboard's pane
EVENTS_FIRST_RUNS = 200  # at start, events are read from live runs and this many newest runs
FOCUS_ABOVE = 200  # with more live runs than this, ticks recompute the rows on screen first
RECOMPUTE_ALL_EVERY = 5  # ... and every row of a live run every this many ticks
RUN_FILES = frozenset({layout.META, layout.CONTROL, layout.EVENTS, layout.ENDED, contract.HEARTBEAT, contract.PROGRESS,
                       contract.STARTED, contract.EXIT, contract.FAILURE, contract.PROBE, contract.FINAL})


@dataclass
class Hint:
    """What changed on disk since the last scan (from the watcher); `full` asks for a scan of everything."""

    runs: set[str] = field(default_factory=set)
    daemon: bool = False
    blacklist: bool = False
    nodes: bool = False
    full: bool = False
    # Re-read every live run's heartbeat and progress (the timer asks each tick): compute nodes
    # write them, often over NFS, where no file event reaches the login node.
    beats: bool = False
    # The runs on screen: with many live runs, a tick recomputes only these (and those whose
    # files changed) and all of them every RECOMPUTE_ALL_EVERY ticks. None: all, always.
    focus: set[str] | None = None

    def merge(self, other: "Hint") -> None:
        self.runs |= other.runs
        self.daemon |= other.daemon
        self.blacklist |= other.blacklist
        self.nodes |= other.nodes
        self.full |= other.full
        self.beats |= other.beats
        self.focus = other.focus if other.focus is not None else self.focus

    def __bool__(self) -> bool:
        return bool(self.runs or self.daemon or self.blacklist or self.nodes or self.full or self.beats)


@dataclass
class Snapshot:
    """One scan's result: every row, which changed, counts per status, the daemon's health, recent events."""

    rows: dict[str, Row]
    changed: set[str]
    removed: set[str]
    counts: dict[str, int]
    daemon: dict[str, Any]
    events: list[dict[str, Any]]
    generated_at: float
    full: bool
    hint: Hint
    scan_ms: float = 0.0


@dataclass
class _Live:
    """A run that has not ended: the inputs of its row and the stat keys they were read at."""

    meta: Meta | None
    paused: bool
    problem: str | None
    heartbeat_at: float | None
    progress: dict[str, Any] | None
    keys: tuple[Any, Any]  # (meta.json, control.json)
    progress_key: Any = None
    beat_files: tuple[str, str] | None = None  # (heartbeat, progress.json) of the attempt in flight, as strings

    @property
    def where(self) -> str | None:
        """The partition of the latest attempt, else the backend (the dashboard's WHERE column)."""
        if self.meta is None:
            return None
        current = self.meta.current
        return getattr(current, "partition", None) or self.meta.spec.backend


class RunsModel:
    """Every run's row, updated by scans that read only what changed."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self.rows: dict[str, Row] = {}
        self._live: dict[str, _Live] = {}
        self._ended: dict[str, Any] = {}  # run id -> stat key of the meta.json its cached row came from
        self._cache: RowCache | None = None
        self.events = EventFeed(home)
        self.scans = 0
        self._points: set[str] = set()  # rows of new sweeps' points, from their records

    # -- scanning ---------------------------------------------------------------------

    def scan(self, now: float | None = None, hint: Hint | None = None, newest: int | None = None) -> Snapshot:
        """Bring the rows up to date: everything (hint None or full), else the runs in `hint`.

        `newest`: only that many of the newest runs, and nothing removed: what a dashboard paints first, so
        its first screen does not wait for 10,000 runs to be read; the next scan is a full one.
        """
        started = time.perf_counter()
        now = time.time() if now is None else now
        full = hint is None or hint.full or self.scans == 0
        partial = full and newest is not None  # a first paint: the full scan that follows saves and polls
        if self._cache is None:
            self._cache = RowCache.load(self.home)
        changed: set[str] = set()
        ids = self.home.run_ids() if full else []
        check, removed = (ids[-newest:], set()) if partial else (ids, self._removed(ids, now, changed)) if full \
            else self._hinted(hint)  # type: ignore[arg-type]  # not full: there is a hint
        self._read_all(check, now, changed)
        if not full and hint is not None and hint.beats:
            self._reread_beating(hint, changed)
        self._forget(removed)
        self._recompute(self._to_recompute(full, hint, changed), now, changed)
        if not partial:  # the full scan that follows a first paint saves, polls events and counts as the first
            if full:
                self._cache.save(set(ids))
            self._poll_events(full, changed, hint)
            self.scans += 1
        counts = Counter(row["status"] for row in self.rows.values())
        return Snapshot(rows=dict(self.rows), changed=changed, removed=removed,
                        counts={s.value: counts.get(s.value, 0) for s in Status},
                        daemon=lease.view(self.home), events=self.events.latest(),
                        generated_at=now, full=full and not partial, hint=hint or Hint(full=not partial),
                        scan_ms=(time.perf_counter() - started) * 1000)

    def _removed(self, ids: list[str], now: float, changed: set[str]) -> set[str]:
        """A full scan's removed rows: runs no longer on disk, less new sweeps' points not written yet."""
        listed = set(ids)
        return set(self.rows) - listed - self._new_points(listed, now, changed)

    def _hinted(self, hint: Hint) -> tuple[list[str], set[str]]:
        """The runs a hint names: those to read again, and those whose folder has gone."""
        check: list[str] = []
        removed: set[str] = set()
        for run_id in sorted(hint.runs):
            if os.path.isdir(self.home.run(run_id).dir):
                check.append(run_id)
            elif run_id in self.rows:
                removed.add(run_id)
        return check, removed

    def _read_all(self, check: Iterable[str], now: float, changed: set[str]) -> None:
        for run_id in check:
            self._points.discard(run_id)  # written: its own files from now on
            if self._read(run_id, now):
                changed.add(run_id)

    def _reread_beating(self, hint: Hint, changed: set[str]) -> None:
        """Heartbeats moved: the live runs the hint does not name have only their attempt files to read again."""
        for run_id, live in self._live.items():
            if run_id not in hint.runs and self._reread_attempt_files(live, run_id):
                changed.add(run_id)

    def _forget(self, removed: set[str]) -> None:
        for run_id in removed:
            self.rows.pop(run_id, None)
            self._live.pop(run_id, None)
            self._ended.pop(run_id, None)

    def _to_recompute(self, full: bool, hint: Hint | None, changed: set[str]) -> Iterable[str]:
        """The live runs whose rows to compute again: all of them, or only those on screen and changed."""
        if (not full and hint is not None and hint.focus is not None and len(self._live) > FOCUS_ABOVE
                and self.scans % RECOMPUTE_ALL_EVERY):
            # Ages and uptimes move every second for every running run, but only those on screen
            # show it; the rest (and the counts) catch up every few ticks, or when their files change.
            return [run_id for run_id in hint.focus | changed if run_id in self._live]
        return self._live

    def _recompute(self, run_ids: Iterable[str], now: float, changed: set[str]) -> None:
        for run_id in run_ids:
            live = self._live[run_id]
            row = row_of(run_id, live.meta, live.paused, live.problem, live.heartbeat_at, live.progress, now)
            row["where"] = live.where
            if row != self.rows.get(run_id):
                self.rows[run_id] = row
                changed.add(run_id)

    def _new_points(self, written: set[str], now: float, changed: set[str]) -> set[str]:
        """Rows for new sweeps' points whose runs the daemon has not written yet (fray.state.sweeps.unwritten)."""
        points = unwritten.pending_members(self.home, written)
        self._points = {meta.run_id for meta in points}
        for meta in points:
            row = row_of(meta.run_id, meta, False, None, None, None, now)
            if row != self.rows.get(meta.run_id):
                self.rows[meta.run_id] = row
                changed.add(meta.run_id)
        return self._points

    def _read(self, run_id: str, now: float) -> bool:
        """Read what changed of one run; True when its row may have changed."""
        meta_key = stat_key(self.home.meta_file(run_id))
        if run_id in self._ended:
            if self._ended[run_id] == meta_key and meta_key is not None:
                return False
            del self._ended[run_id]
        live = self._live.get(run_id)
        assert self._cache is not None
        if live is None:  # an ended run's row, as `fray list` cached it: a stat, no Path objects, no parse
            cached = self._cache.get(run_id, meta_key)
            if cached is not None:
                self._set_ended(run_id, meta_key, cached)
                return True
        paths = self.home.run(run_id)
        if live is not None:
            keys = (meta_key, stat_key(paths.control))
            if keys == live.keys:
                return self._reread_attempt_files(live, run_id)
        meta, paused, problem, heartbeat_at, progress = views.read_row_inputs(paths)
        if meta is not None and meta.phase == Phase.ENDED.value and problem is None:
            row = row_of(run_id, meta, paused, problem, heartbeat_at, progress, now)
            self._cache.put(run_id, meta_key, row)
            self._set_ended(run_id, meta_key, row)
            return True
        # Keys taken after the read would miss a write between stat and read; before, they only cost a re-read.
        self._live[run_id] = _Live(meta, paused, problem, heartbeat_at, progress,
                                   (meta_key, stat_key(paths.control)), self._progress_key(run_id, meta))
        return True

    def _set_ended(self, run_id: str, key: Any, row: Row) -> None:
        self._live.pop(run_id, None)
        self._ended[run_id] = key
        self.rows[run_id] = {**row, "where": row.get("backend")}

    def _progress_key(self, run_id: str, meta: Meta | None) -> Any:
        attempt = meta.current if meta is not None else None
        return stat_key(self.home.run(run_id).attempt(attempt.number).progress) if attempt else None

    def _reread_attempt_files(self, live: _Live, run_id: str) -> bool:
        """meta and control are unchanged: only the in-flight attempt's heartbeat and progress may be new.

        Every tick does this for every running run, so the paths are kept as strings
        (no Path objects) and the heartbeat is one open and one read.
        """
        meta = live.meta
        attempt = meta.in_flight if meta is not None else None
        if attempt is None:
            return False
        if live.beat_files is None:
            files = self.home.run(run_id).attempt(attempt.number)
            live.beat_files = (os.fspath(files.heartbeat), os.fspath(files.progress))
        heartbeat, progress = live.beat_files
        heartbeat_at = store.read_heartbeat(heartbeat)
        changed = heartbeat_at != live.heartbeat_at
        live.heartbeat_at = heartbeat_at
        key = stat_key(progress)
        if key is None:
            # No progress.json: none yet, or the write-once layout (progress.json.d/), whose
            # versions change names, so there is no stat to compare; read the newest each tick.
            live.progress_key = None
            document = views.read_progress(progress)
            changed = changed or document != live.progress
            live.progress = document
        elif key != live.progress_key:
            live.progress_key = key
            live.progress = views.read_progress(progress)
            changed = True
        return changed

    def live_ids(self) -> list[str]:
        return list(self._live)

    # -- events -----------------------------------------------------------------------

    def _poll_events(self, full: bool, changed: set[str], hint: Hint | None) -> None:
        if self.scans == 0:
            newest = sorted(self.rows)[-EVENTS_FIRST_RUNS:]
            targets = set(newest) | set(self._live)
        elif full:
            targets = set(self._live) | changed
        else:
            targets = set(hint.runs) if hint else set()
        self.events.poll(sorted(targets), {run_id: self.rows[run_id]["name"] for run_id in targets
                                           if run_id in self.rows})


class EventFeed:
    """The newest daemon events across runs (events.jsonl of each), read incrementally."""

    def __init__(self, home: Home, keep: int = EVENTS_KEPT) -> None:
        self.home = home
        self.keep = keep
        self._offsets: dict[str, int] = {}
        self._events: list[dict[str, Any]] = []

    def poll(self, run_ids: Iterable[str], names: dict[str, str]) -> int:
        """Read the new complete lines of these runs' events.jsonl; returns how many events were added."""
        added = 0
        for run_id in run_ids:
            path = self.home.run(run_id).events
            offset = self._offsets.get(run_id, 0)
            try:
                with open(path, "rb") as handle:
                    size = os.fstat(handle.fileno()).st_size
                    if size < offset:  # replaced or truncated: read again
                        offset = 0
                    handle.seek(offset)
                    data = handle.read()
            except FileNotFoundError:
                continue
            end = data.rfind(b"\n") + 1  # a line still being written is read next time
            self._offsets[run_id] = offset + end
            for raw in data[:end].splitlines():
                try:
                    record = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    continue
                if not isinstance(record, dict) or not isinstance(record.get("at"), (int, float)):
                    continue
                record["name"] = names.get(run_id, run_id)
                self._events.append(record)
                added += 1
        if added:
            self._events.sort(key=lambda e: e["at"], reverse=True)
            del self._events[self.keep:]
        return added

    def latest(self) -> list[dict[str, Any]]:
        return list(self._events)


# -- watching files ------------------------------------------------------------------------


def hint_of(home: Home, paths: Iterable[str]) -> Hint:
    """Which runs and shared files a set of changed paths concerns."""
    hint = Hint()
    runs_dir, groups_dir = str(home.runs_dir) + os.sep, str(home.groups_dir) + os.sep
    for path in paths:
        if path.startswith(groups_dir):  # a new sweep: its points are shown from its record
            hint.full = True
            continue
        if path.startswith(runs_dir):
            run_id = path[len(runs_dir):].split(os.sep, 1)[0]
            if run_id and not run_id.startswith("."):
                hint.runs.add(run_id)
            continue
        name = os.path.basename(path)
        if name == layout.DAEMON_LEASE:
            hint.daemon = True
        elif name == layout.BLACKLIST:
            hint.blacklist = True
        elif name == layout.NODES:
            hint.nodes = True
    return hint


class Watcher:
    """watchfiles on FRAY_HOME in a daemon thread, calling `on_change(Hint)` from that thread."""

    def __init__(self, home: Home, on_change: Callable[[Hint], None], debounce_ms: int = 150) -> None:
        self.home = home
        self.on_change = on_change
        self.debounce_ms = debounce_ms
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._runs_dir = str(home.runs_dir)
        self._groups_dir = str(home.groups_dir)
        self._root = str(home.root)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> bool:
        """Start watching; False when FRAY_HOME does not exist yet (the timer covers until it does)."""
        if self.alive:
            return True
        if not os.path.isdir(self._root):
            return False
        self._thread = threading.Thread(target=self._run, name="fray-tui-watch", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        self._stop.set()

    def _relevant(self, _change: Any, path: str) -> bool:
        parent, name = os.path.split(path)
        if parent == self._root:
            return name in (layout.DAEMON_LEASE, layout.BLACKLIST, layout.NODES, layout.RUNS, layout.GROUPS)
        if parent in (self._runs_dir, self._groups_dir):
            return not name.startswith(".")
        return name in RUN_FILES

    def _run(self) -> None:
        try:
            import watchfiles

            for changes in watchfiles.watch(self._root, watch_filter=self._relevant, stop_event=self._stop,
                                            debounce=self.debounce_ms, step=25, rust_timeout=1000,
                                            raise_interrupt=False, ignore_permission_denied=True):
                hint = hint_of(self.home, (path for _, path in changes))
                if hint:
                    self.on_change(hint)
        except Exception as exc:  # inotify limits, a vanished FRAY_HOME: the timer takes over
            self.error = f"{type(exc).__name__}: {exc}"
