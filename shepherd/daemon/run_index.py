"""The daemon's index of the runs in FRAY_HOME: which to look at this cycle, each as last read.

A run's files are re-read only when their stat changed since the last cycle. A
full cycle lists the runs folder and looks at every run. Otherwise the file
watcher is trusted: only the runs not settled (not ended, unreadable, or with a
start request pending) and the folders it saw change (new, removed, or a
control.json written) are looked at, so a steady cycle costs the runs still
going, not the thousands that ended. An ended run changes only through its
control.json (`fray control start`), and so does a paused run once decided
into its pause (`resting`, fray.daemon.quiet): neither is looked at again
until the watcher reports its folder or a full scan comes. A daemon's first cycle defers the runs
the index of settled runs vouches for (`fray.daemon.settled`): they are read
a share between each two cycles after it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any, Callable

from fray.core.model import Control, Meta, Phase
from fray.daemon.cycle_state import CycleStats, RunState
from fray.daemon.run_view import RunView, group_ids
from fray.daemon.settled import Deferral
from fray.errors import CorruptFileError
from fray.state import meta_file as run_meta, store
from fray.state.layout import Home, RunPaths
from fray.state.row_cache import stat_key
from fray.state.run_changes import Journal

log = logging.getLogger("fray.daemon")

_ENDED = Phase.ENDED.value  # compared for every run each cycle; an Enum's .value is a slow lookup

IDLE_SHARE_SEC = 0.01  # of reading deferred runs at a time while idle: how long a wake may wait for it

# Records a problem with a run in its events: (run folder, kind, reason).
EventSink = Callable[[RunPaths, str, str], None]


class RunIndex:
    """Every run as last read, the ones still to be looked at each cycle, and what the watcher saw change."""

    def __init__(self, home: Home, event: EventSink, config: Callable[[], Mapping[str, Any]] = dict,
                 journal: Journal | None = None, generation: Callable[[], int | None] = lambda: None) -> None:
        self.home = home
        self._generation = generation  # this daemon's lease generation (fray.daemon.lease_keeper)
        # Runs whose meta.json a superseded daemon overwrote after this one took over: rewritten by the loop.
        self.overwritten: list[RunState] = []
        self._journal = journal  # told of meta.json files changed by another hand (fray.state.run_changes)
        self._event = event
        self._config = config  # config.json as in force (priority credits need every run: nothing deferred)
        self.deferral = Deferral(home)
        self._first = True
        self.runs: dict[str, RunState] = {}
        self.unsettled: set[str] = set()  # run ids looked at every cycle, whatever the watcher saw
        self._members: dict[str, set[str]] = {}  # group or sweep id -> its runs' ids (fray.daemon.run_view)
        # Runs going that only a change of their files can wake (a paused run decided into its pause:
        # fray.daemon.quiet), as ended runs: looked at when the watcher reports their folder, or by a full scan.
        self.resting: set[str] = set()
        self._dirty: set[str] = set()
        self._dirty_lock = threading.Lock()
        self._reported_problems: set[str] = set()

    def mark_dirty(self, run_ids: set[str]) -> None:
        """The watcher (another thread) saw these runs' folders change."""
        with self._dirty_lock:
            self._dirty |= run_ids

    def load(self, stats: CycleStats, full: bool) -> None:
        """Bring the index up to date, re-reading only the files whose stat changed; `full` lists the runs folder
        (module doc). What a cycle then reads of it is `view()` and `active()`."""
        dirty = self._take_dirty()
        self.resting = set() if full else self.resting - dirty
        if full:
            self.runs = {run_id: self._refresh(run_id, self.runs.get(run_id), stats) for run_id in self._listed()}
            self.unsettled = {run_id for run_id, state in self.runs.items() if not settled(state)}
            self._members = {}
            for run_id, state in self.runs.items():
                for group_id in group_ids(state.meta):
                    self._members.setdefault(group_id, set()).add(run_id)
            self._read_deferred(stats)
            return
        self._read_deferred(stats)
        for run_id in dirty:
            if run_id.startswith(".") or not os.path.isdir(self.home.run_folder(run_id)):
                self._group(run_id, self.runs.pop(run_id, None), None)
                self.unsettled.discard(run_id)
                continue
            self._look_at(run_id, stats)
        for run_id in list(self.unsettled - dirty - self.resting):
            self._look_at(run_id, stats)

    def _listed(self) -> list[str]:
        """The run folders a full cycle reads: at the first, those the index of settled runs does not vouch for."""
        run_ids = self.home.run_ids()
        if self._first:
            self._first = False
            return self.deferral.split(run_ids, self._config())
        return [run_id for run_id in run_ids if not self.deferral.holds(run_id)] if self.deferral.pending else run_ids

    def _read_deferred(self, stats: CycleStats) -> None:
        """Read the deferred runs that the runs going refer to."""
        if not self.deferral.pending:
            return
        metas = [self.runs[run_id].meta for run_id in self.unsettled]
        self._read(self.deferral.referenced(metas, self.runs), stats)

    def read_deferred_share(self) -> None:
        """Between two cycles: read a share of the runs still deferred (fray.daemon.settled)."""
        if self.deferral.pending:
            self._read(self.deferral.share(), CycleStats())

    def idle(self, wake: threading.Event, timeout: float) -> None:
        """Wait up to `timeout` for `wake`, reading the runs still deferred meanwhile, IDLE_SHARE_SEC at a time:
        an idle daemon reads them all within a second or two, and a wake waits for one share at most (a run
        submitted into a home of 10,000 is not held up by a share each second for the next ten)."""
        deadline = time.monotonic() + timeout
        while self.deferral.pending and not wake.is_set() and time.monotonic() < deadline:
            self._read(self.deferral.share(IDLE_SHARE_SEC, every=0.0), CycleStats())
        wake.wait(max(0.0, deadline - time.monotonic()))

    def _read(self, run_ids: Iterable[str], stats: CycleStats) -> None:
        for run_id in run_ids:
            if os.path.isdir(self.home.run_folder(run_id)):
                self._look_at(run_id, stats)

    def save_settled(self, force: bool = False) -> None:
        """The index of settled runs, for the next daemon's start (now and then; `force`: as this one stops)."""
        self.deferral.save(self.runs, settled, force)

    def view(self) -> RunView:
        """Every run by id, the runs going and each group's members, as this cycle's `load` left them."""
        return RunView(self.runs, self.unsettled - self.resting, self._members)

    def active(self) -> list[RunState]:
        """The runs the policy must look at this cycle, in run id order (submission order: the oldest is admitted first)."""
        return [state for run_id in sorted(self.unsettled - self.resting) if (state := self.runs[run_id]).meta is not None
                and needs_attention(state.meta, state.control)]

    def drop_settled(self, looked_at: list[RunState]) -> None:
        """Those the policy just ended leave the per-cycle set."""
        self.unsettled.difference_update(run.paths.run_id for run in looked_at if settled(run))

    def _look_at(self, run_id: str, stats: CycleStats) -> None:
        before = self.runs.get(run_id)
        state = self._refresh(run_id, before, stats)
        self.runs[run_id] = state
        if state is not before:
            self._group(run_id, before, state)
        if settled(state):
            self.unsettled.discard(run_id)
        else:
            self.unsettled.add(run_id)

    def _refresh(self, run_id: str, state: RunState | None, stats: CycleStats) -> RunState:
        meta_file, control_file = self.home.meta_file(run_id), self.home.control_file(run_id)
        meta_key = stat_key(meta_file)  # taken before reading: a later change shows
        control_key = stat_key(control_file)
        # No meta.json (moved aside) is never "unchanged": it is restored from its copy below.
        if state is not None and state.problem is None and meta_key is not None \
                and (meta_key, control_key) == (state.meta_key, state.control_key):
            return state
        paths = state.paths if state is not None else self.home.run(run_id)
        # A corrupt or missing meta.json is put back from its last good copy, and that said in the run's events.
        raw, problem = run_meta.read(paths, on_restored=lambda what: self._event(paths, "error", what))
        if self._journal is not None and state is not None and state.meta_key != meta_key:
            self._journal.note([run_id])  # not this daemon's commit (that set the key): `fray list` reads it again
        meta = Meta.from_dict(raw) if raw is not None else None
        if meta is not None and state is not None and state.meta is not None and _superseded_write(
                meta, state.meta, self._generation()):
            # What this daemon decided stands: a daemon whose lease lapsed wrote between its last check and
            # its rename (microseconds, but a pause can land there); the loop writes this daemon's version back.
            restored = RunState(paths, state.meta, state.control, None, None, state.control_key)
            self.overwritten.append(restored)
            return restored
        try:
            control = Control.from_dict(store.read_json(control_file, "control"))
        except CorruptFileError as exc:
            # The CLI rewrites control.json on the next request; until then act on no request.
            control, problem = Control(), problem or str(exc)
        if problem and run_id + problem not in self._reported_problems:
            self._reported_problems.add(run_id + problem)
            log.error("run %s: %s", run_id, problem)
            stats.errors.append(f"{run_id}: {problem}")
            self._event(paths, "error", problem)
        return RunState(paths, meta, control, problem, meta_key, control_key)

    def _group(self, run_id: str, before: RunState | None, after: RunState | None) -> None:
        """Keep the index of groups' members as a run is read again, appears or goes."""
        old = group_ids(before.meta if before is not None else None)
        new = group_ids(after.meta if after is not None else None)
        if old == new:
            return
        for group_id in old:
            members = self._members.get(group_id)
            if members is not None:
                members.discard(run_id)
                if not members:
                    del self._members[group_id]
        for group_id in new:
            self._members.setdefault(group_id, set()).add(run_id)

    def _take_dirty(self) -> set[str]:
        with self._dirty_lock:
            dirty, self._dirty = self._dirty, set()
        return dirty


def _superseded_write(found: Meta, ours: Meta, generation: int | None) -> bool:
    """Whether `found` on disk was written by a daemon of an older generation after this one (which wrote `ours`)
    took over. Unstamped files are another hand's (`fray submit`, an editor): read as such."""
    return generation is not None and ours.lease_generation == generation and \
        found.lease_generation is not None and found.lease_generation < generation


def needs_attention(meta: Meta, control: Control) -> bool:
    """Not ended, or asked to start again."""
    return meta.phase != _ENDED or control.start_nonce > meta.applied.start_nonce


def settled(state: RunState) -> bool:
    """Ended, readable, and nothing asked of it: a steady cycle need not look at it."""
    return state.problem is None and state.meta is not None and not needs_attention(state.meta, state.control)
