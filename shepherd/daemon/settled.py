"""Starting over thousands of runs without reading them all first: the index of settled runs.

A settled run (ended, readable, nothing asked of it) is one a steady cycle need not look at, and it stays
settled until its meta.json or control.json is replaced (a new inode and mtime: `fray control start`, say).
The daemon keeps the index of its settled runs, each with the stat keys of those two files, in
cache/daemon-settled.json, rewritten every SAVE_EVERY_SEC when it changed and as the daemon stops.

A daemon starting over the home reads the index and defers every run whose two files still have the keys it
lists. Its first cycle reads the other runs (those still going, and those the index does not know) and the
deferred runs they refer to: a parent, an --after upstream, the other members of a gang or a sweep (all that the
cycle's decisions about the runs going read of other runs). Between cycles the daemon reads a share of the rest
(LOAD_BUDGET_SEC of reading, at most every SHARE_EVERY_SEC), and any deferred run whose folder changes is read
at once, so a new run is acted on from the daemon's first second while it learns the thousands that ended. What
needs every run (housekeeping, the sweep of actor endpoints) waits until none is deferred. Priority credits
count every run's usage: where they are configured, nothing is deferred.

The index is derived data: missing, unreadable, from another version or stale, it costs only speed (a run it
does not list, or whose files changed, is read as before). Only the daemon that acts writes it (it holds the lease).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import orjson

from fray.core.model import Meta
from fray.daemon.cycle_state import RunState
from fray.state import store
from fray.state.layout import Home
from fray.state.row_cache import StatKey, stat_key

log = logging.getLogger("fray.daemon")

VERSION = 1
SAVE_EVERY_SEC = 60.0
LOAD_BUDGET_SEC = 0.03  # of reading deferred runs after a cycle: a run submitted meanwhile waits no longer
SHARE_EVERY_SEC = 0.25  # at most one share this often: a busy daemon (every event a cycle) keeps its CPUs for them


def _keys(home: Home, run_id: str) -> list[StatKey | None]:
    return [stat_key(home.meta_file(run_id)), stat_key(home.control_file(run_id))]


def load(home: Home) -> dict[str, list[Any]]:
    """run id -> [meta.json key, control.json key, gang id, sweep id] from the index ({} when unusable)."""
    try:
        data = orjson.loads(home.settled_index.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("runs"), dict):
        return {}
    return {run_id: entry for run_id, entry in data["runs"].items() if isinstance(entry, list) and len(entry) == 4}


def _refs(metas: Iterable[Meta | None]) -> tuple[set[str], set[str], set[str]]:
    """(run ids, gang ids, sweep ids) the decisions about these runs read: parents, upstreams, fellow members."""
    ids: set[str] = set()
    gangs: set[str] = set()
    sweeps: set[str] = set()
    for meta in metas:
        if meta is None:
            continue
        if meta.parent_run_id:
            ids.add(meta.parent_run_id)
        for upstream in meta.spec.after:
            if upstream.get("group"):
                sweeps.add(upstream["group"])
            elif upstream.get("run_id"):
                ids.add(upstream["run_id"])
        if meta.gang is not None:
            gangs.add(meta.gang["id"])
        if meta.sweep is not None:
            sweeps.add(meta.sweep["id"])
    return ids, gangs, sweeps


class Deferral:
    """The runs a starting daemon has not read yet, and the index it saves of the settled ones."""

    def __init__(self, home: Home, clock: Callable[[], float] = time.monotonic) -> None:
        self.home = home
        self._clock = clock
        self._deferred: dict[str, list[Any]] = {}  # run id -> its index entry, oldest run first
        self._fresh = False  # split just now: this cycle reads references only, not a share
        self._saved_at = clock()
        self._shared_at = float("-inf")
        self._saved: frozenset[str] | None = None
        self._entries: dict[str, list[Any]] = {}  # as last saved: their files were stat'ed then, not again

    @property
    def pending(self) -> bool:
        """Whether some run is still deferred (what needs every run waits until none is)."""
        return bool(self._deferred)

    def split(self, run_ids: list[str], config: Mapping[str, Any]) -> list[str]:
        """At the daemon's first look at the home: the run ids to read now; the others are deferred."""
        if (config.get("priority") or {}).get("credit_hours") is not None:
            return run_ids
        index = load(self.home)
        if not index:
            return run_ids
        now = []
        for run_id in run_ids:
            entry = index.get(run_id)
            if entry is not None and _keys(self.home, run_id) == entry[:2]:
                self._deferred[run_id] = entry
            else:
                now.append(run_id)
        self._fresh = True
        if self._deferred:
            log.info("first cycle: %d settled runs deferred (read over the next cycles)", len(self._deferred))
        return now

    def holds(self, run_id: str) -> bool:
        """Whether a full scan may skip this run: deferred, and its files are still those the index lists
        (else it is no longer deferred, and read)."""
        entry = self._deferred.get(run_id)
        if entry is None:
            return False
        if _keys(self.home, run_id) == entry[:2]:
            return True
        del self._deferred[run_id]
        return False

    def referenced(self, metas: Iterable[Meta | None], loaded: Mapping[str, Any]) -> list[str]:
        """The deferred runs these runs (the ones a cycle decides about) refer to: to read before the cycle's
        decisions. They, and those in `loaded` (read since: their folder changed), are deferred no more."""
        if not self._deferred:
            return []
        for run_id in [r for r in self._deferred if r in loaded]:
            del self._deferred[run_id]
        ids, gangs, sweeps = _refs(metas)
        found = [run_id for run_id, (_, _, gang, sweep) in self._deferred.items()
                 if run_id in ids or gang in gangs or sweep in sweeps]
        for run_id in found:
            del self._deferred[run_id]
        return found

    def share(self, budget: float = LOAD_BUDGET_SEC, every: float = SHARE_EVERY_SEC) -> Iterator[str]:
        """Deferred runs to read between two cycles, each as the caller reads the one before, for `budget` seconds
        of the caller's reading, at most every `every` seconds (none just after the first cycle)."""
        if self._fresh:
            self._fresh = False
            return
        if self._clock() - self._shared_at < every:
            return
        self._shared_at = self._clock()
        deadline = time.perf_counter() + budget
        while self._deferred and time.perf_counter() < deadline:
            run_id = next(iter(self._deferred))
            del self._deferred[run_id]
            yield run_id
        if not self._deferred:
            log.info("every settled run read")

    def save(self, runs: Mapping[str, RunState], settled: Callable[[RunState], bool], force: bool = False) -> None:
        """Rewrite the index if its runs changed, at most every SAVE_EVERY_SEC (`force`: now, as the daemon stops),
        and never while runs are deferred. A run is listed only when its files are still those it was read from."""
        if self._deferred or (not force and self._clock() - self._saved_at < SAVE_EVERY_SEC):
            return
        self._saved_at = self._clock()
        listed = {run_id: state for run_id, state in runs.items() if state.meta is not None and settled(state)}
        keys = frozenset((run_id, str(state.meta_key), str(state.control_key)) for run_id, state in listed.items())
        if keys == self._saved:
            return
        entries = {}
        for run_id, state in listed.items():
            meta = state.meta
            saved = self._entries.get(run_id)
            if saved is not None and saved[:2] == [state.meta_key, state.control_key]:
                entries[run_id] = saved  # read from the files it was saved with (a start checks them again)
                continue
            # Its meta as the daemon wrote it this cycle carries the key of the file it replaces: left out.
            if meta is None or _keys(self.home, run_id) != [state.meta_key, state.control_key]:
                continue
            entries[run_id] = [state.meta_key, state.control_key, meta.gang["id"] if meta.gang else None,
                               meta.sweep["id"] if meta.sweep else None]
        try:
            store.make_dirs(self.home.cache_dir)
            store.write_bytes_atomic(self.home.settled_index, orjson.dumps({"version": VERSION, "runs": entries}))
            self._saved, self._entries = keys, entries
        except OSError as exc:
            log.warning("could not write %s (only a later start is slower): %s", self.home.settled_index, exc)
