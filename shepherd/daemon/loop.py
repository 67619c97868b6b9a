"""The daemon: a level-triggered reconcile loop over every run in FRAY_HOME.

Each cycle reads the runs that are not ended (unchanged files are not
re-parsed), takes one snapshot per backend for all its attempts, asks `policy`
what to do for each run, and carries that out: submit, cancel (batched), end.
It wakes on a timer, on file changes (watchfiles), and when a local wrapper it
started exits, so a control request or a finished attempt is acted on at once.
Between full scans (every FULL_SCAN_EVERY_SEC) it trusts the watcher for the
runs that ended, so a steady cycle costs the runs still going, not all of them.

Crash-only: it may be killed at any line. An attempt is recorded as
`submitting` before the backend is asked, so a restarted daemon looks for it
(and adopts it) instead of submitting twice. One daemon per FRAY_HOME: it holds
locks/daemon.lock for its lifetime and keeps its lease in daemon.json.

Submissions go through `fray.daemon.submitting` (at the end of the cycle, once its group commit,
`fray.state.commit_batch`, made every meta.json it changed durable; a sweep's attempts together); a new
sweep's record becomes runs through `fray.daemon.sweeps`; `fray.daemon.process` is the process entry,
`fray.daemon.watching` the file watcher and `fray.daemon.strays` the sweeper of closed attempts' processes.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import random
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable

from fray import __version__
from fray.backends import cli_health, load_backend
from fray.backends.protocol import AttemptKey, Backend, CancelTarget, Tracked
from fray.core import family, policy
from fray.core.model import AttemptState, Control, Meta, Phase
from fray.core.partition_policy import Candidates as PartitionCandidates
from fray.core.placement.reporting import TaskEnd
from fray.core.policy import AttemptFiles, Situation
from fray.core.observation import BackendView
from fray.core.scheduler import Ledger, run_request
from fray.core.run_row import row_of
from fray.daemon import alerts
from fray.daemon import watching as watching_runs
from fray.daemon.family import CyclePlan, FamilyKeeper
from fray.daemon.housekeeping import Housekeeping
from fray.daemon.sweeps import Launcher
from fray.daemon.nodes import NodeKeeper
from fray.daemon.notifications import Notifications
from fray.daemon.cycle_state import CycleStats, RunState
from fray.daemon.config import Settings
from fray.daemon.strays import Sweeper
from fray.daemon.submitting import Submitter
from fray.errors import BackendError, CorruptFileError, FrayError
from fray.state import meta_file as run_meta, store
from fray.state.commit_batch import CommitBatch
from fray.state.layout import Home, RunPaths
from fray.state.row_cache import stat_key

log = logging.getLogger("fray.daemon")

# Between full scans, ended runs are looked at only when the watcher saw their
# folder change; a full scan every so often is the level-triggered safety net.
FULL_SCAN_EVERY_SEC = 30.0
_ENDED = Phase.ENDED.value  # compared for every run each cycle; an Enum's .value is a slow lookup
INVENTORY_EVERY_SEC = 60.0


class Daemon:
    def __init__(self, home: Home, backends: dict[str, Backend] | None = None,
                 clock: Callable[[], float] = time.time, jitter: Callable[[], float] = random.random) -> None:
        self.home = home
        self.clock = clock
        self.jitter = jitter
        self._backends: dict[str, Backend] = dict(backends or {})
        self._reader = store.CachedReader()
        self._runs: dict[str, RunState] = {}
        self._unsettled: set[str] = set()  # run ids looked at every cycle, whatever the watcher saw
        self._dirty: set[str] = set()
        self._dirty_lock = threading.Lock()
        self._seen_in_flight: set[AttemptKey] = set()
        self._reported_problems: set[str] = set()
        self.started_at = clock()
        self.cycles = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._exclude: tuple[str, ...] = ()
        self._settings = Settings(home)
        self._config = self._settings.config
        self._loaded: set[str] = set()  # backends this daemon built from config.json (not handed in)
        self._nodes = NodeKeeper(home, self._reader, self._config, clock)
        self._family = FamilyKeeper(home, self._config)
        self._cycle_plan = CyclePlan({}, lambda meta: Ledger.unlimited().admit)
        self._alerter = alerts.Alerter.from_config(self._config)
        self._notifications = Notifications(self._config, f"fray daemon on {socket.gethostname()} for {home.root}")
        self._batch = CommitBatch(home.root)  # the cycle's meta.json writes, made durable together
        self._submitter = Submitter(home, self._backend, self._commit, self._finish, self._event, clock,
                                    lambda: self.jitter(), self._seen_in_flight, self._batch)
        self._launcher = Launcher(home, self._backend, self._first_plan, clock)
        self._housekeeping = Housekeeping(home, lambda: list(self._backends.values()))
        self._sweeper = Sweeper(home, self._event)
        self.holds_lock: Callable[[], bool] = lambda: True  # fray.daemon.process: the lock file is still ours

    # -- one cycle -----------------------------------------------------------------

    def cycle(self, full: bool = True) -> CycleStats:
        """One reconcile pass. `full=False` trusts the file watcher for ended runs (see _load_runs)."""
        stats = CycleStats()
        changed = self._settings.reload()
        if changed is not None:
            self._apply_config(changed)
        written = self._launcher.cycle(self._exclude)  # new sweeps: submitted, then their runs written
        if written:
            self._mark_dirty(written)
        runs = self._load_runs(stats, full)
        # In run id order, which is submission order: admission serves the oldest first.
        active = [state for run_id in sorted(self._unsettled) if (state := self._runs[run_id]).meta is not None
                  and _needs_attention(state.meta, state.control)]
        stats.runs, stats.active = len(runs), len(active)
        views = self._snapshots(active, stats)
        ledgers = self._ledgers(active)
        self._exclude = self._nodes.excluded() if active else ()
        cancels: dict[str, list[CancelTarget]] = {}
        now = self.clock()
        # Children of ended parents, groups, reservations: decided for all runs at once (daemon_family).
        self._cycle_plan = self._family.prepare(runs, active, ledgers, now, self._submitter.submits_together)
        for run in active:
            try:
                self._reconcile(run, views, ledgers, cancels, now, stats)
            except Exception as exc:  # one broken run must not stop the others
                log.exception("run %s: unexpected error", run.paths.run_id)
                stats.errors.append(f"{run.paths.run_id}: {exc}")
                self._event(run.paths, "error", f"daemon error while handling this run: {exc}")
        try:
            self._submitter.flush(self._exclude, stats)  # a sweep's attempts of this cycle, together
        except Exception as exc:
            log.exception("submitting sweeps' attempts: unexpected error")
            stats.errors.append(f"submitting sweeps' attempts: {exc}")
        for name, targets in cancels.items():
            try:
                self._backend(name).cancel(targets)
                stats.cancelled += len(targets)
            except (BackendError, OSError) as exc:
                stats.errors.append(f"cancel on {name}: {exc}")
                log.warning("cancel on %s failed (retried next cycle): %s", name, exc)
        self._sweeper.cycle(self._runs)  # what closed attempts left running: killed
        try:
            self._family.sweep_endpoints(runs)
        except OSError as exc:
            log.warning("sweeping actor endpoints failed (retried next cycle): %s", exc)
        self._housekeeping.tidy([run.meta for run in runs], now)  # finished arrays' folders, unused snapshots
        message = self._notifications.flush(now)  # what this cycle's changes (and any held back) call for
        for notice in message.notices if message else ():
            sinks = ", ".join(self._notifications.sinks)
            self._event(self.home.run(notice.run_id), "notify", f"{notice.status}: notifying {sinks}")
        # Those the policy just ended leave the per-cycle set.
        self._unsettled.difference_update(run.paths.run_id for run in active if _settled(run))
        self.cycles += 1
        return stats

    def _load_runs(self, stats: CycleStats, full: bool) -> list[RunState]:
        """Every run, re-reading only the files whose stat changed since the last cycle.

        A full cycle lists the runs folder and looks at every run. Otherwise the
        file watcher is trusted: only the runs not settled (not ended, unreadable,
        or with a start request pending) and the folders it saw change (new,
        removed, or a control.json written) are looked at, so a steady cycle costs
        the runs still going, not the thousands that ended. An ended run changes
        only through its control.json (`fray control start`).
        """
        dirty = self._take_dirty()
        if full:
            self._runs = {run_id: self._refresh(run_id, self._runs.get(run_id), stats) for run_id in self.home.run_ids()}
            self._unsettled = {run_id for run_id, state in self._runs.items() if not _settled(state)}
            return list(self._runs.values())
        added = False
        for run_id in dirty:
            if run_id.startswith(".") or not os.path.isdir(self.home.run_folder(run_id)):
                self._runs.pop(run_id, None)
                self._unsettled.discard(run_id)
                continue
            added = added or run_id not in self._runs
            self._look_at(run_id, stats)
        for run_id in list(self._unsettled - dirty):
            self._look_at(run_id, stats)
        if added:
            self._runs = dict(sorted(self._runs.items()))
        return list(self._runs.values())

    def _look_at(self, run_id: str, stats: CycleStats) -> None:
        state = self._refresh(run_id, self._runs.get(run_id), stats)
        self._runs[run_id] = state
        if _settled(state):
            self._unsettled.discard(run_id)
        else:
            self._unsettled.add(run_id)

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
        meta = Meta.from_dict(raw) if raw is not None else None
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

    def _take_dirty(self) -> set[str]:
        with self._dirty_lock:
            dirty, self._dirty = self._dirty, set()
        return dirty

    def _mark_dirty(self, run_ids: set[str]) -> None:
        with self._dirty_lock:
            self._dirty |= run_ids

    def _snapshots(self, active: list[RunState], stats: CycleStats) -> dict[AttemptKey, BackendView]:
        tracked: dict[str, list[Tracked]] = {}
        for run in active:
            attempt = run.meta.in_flight if run.meta else None
            if attempt is not None:
                key = AttemptKey(run.paths.run_id, attempt.number)
                tracked.setdefault(attempt.backend, []).append(Tracked(key, attempt.backend_ref, run.meta.spec))
        for name in [n for n, b in self._backends.items() if getattr(b, "snapshot_when_idle", False)]:
            tracked.setdefault(name, [])  # the TPU backend deletes finished attempts' slices from its snapshot
        views: dict[AttemptKey, BackendView] = {}
        for name, items in tracked.items():
            try:
                views.update(self._backend(name).snapshot(items))
            except (BackendError, OSError) as exc:
                # An observation failed: every attempt there is "unknown" this cycle.
                stats.errors.append(f"snapshot of {name}: {exc}")
                log.warning("snapshot of %s failed (retried next cycle): %s", name, exc)
        return views

    def _ledgers(self, active: list[RunState]) -> dict[str, Ledger]:
        ledgers: dict[str, Ledger] = {}
        for run in active:
            meta = run.meta
            assert meta is not None
            name = meta.spec.backend
            if name not in ledgers:
                try:
                    backend = self._backend(name)
                    capacity = backend.capacity()
                    # A backend that places work itself (local) must honour bans there too.
                    closed = self._nodes.all_banned(name, backend) if capacity is not None else None
                    # The machine's attributes, which placement checks constraints against (local).
                    attributes = getattr(backend, "worker_attributes", dict)() if capacity is not None else {}
                    ledgers[name] = Ledger(capacity, closed=closed, attributes=attributes) if capacity is not None \
                        else Ledger.unlimited(getattr(backend, "placement_workers", tuple)())
                except FrayError:
                    ledgers[name] = Ledger.unlimited()
            attempt = meta.in_flight
            if attempt is not None:
                gpu_ids = tuple((attempt.backend_ref or {}).get("gpu_ids", ()))
                ledgers[name].hold(run_request(meta.spec.cpus, meta.spec.mem_mb, meta.spec.gpus, meta.spec.replicas),
                                   gpu_ids)
        return ledgers

    def _reconcile(self, run: RunState, views: dict[AttemptKey, BackendView], ledgers: dict[str, Ledger],
                   cancels: dict[str, list[CancelTarget]], now: float, stats: CycleStats) -> None:
        meta = run.meta
        assert meta is not None
        attempt = meta.in_flight
        files = AttemptFiles()
        view = BackendView("unknown")
        first_sight = False
        if attempt is not None:
            key = AttemptKey(meta.run_id, attempt.number)
            view = views.get(key, BackendView("unknown"))
            files = self._attempt_files(run.paths, attempt.number, view.state == "gone")
            first_sight = key not in self._seen_in_flight
            if first_sight:
                self._seen_in_flight.add(key)
                if attempt.state != AttemptState.SUBMITTING.value and self.cycles == 0:
                    self._event(run.paths, "adopted", f"found attempt {attempt.number} {view.state} after a daemon restart",
                                attempt.number)
        control = family.effective_control(run.control, self._cycle_plan.orders.get(meta.run_id))
        plan = policy.decide(Situation(meta, control, files, view, now, self.jitter(),
                                       partitions=self._partition_candidates(meta), first_sight=first_sight),
                             self._cycle_plan.admit_for(meta))
        # Records first, then meta.json, then what reaches the backend: a daemon killed
        # between two steps leaves either a decision the next one makes again (records
        # are idempotent) or an intent it finds recorded (`submitting`), never an ended
        # run without its ended.json or a fault without its blacklist entry.
        for action in plan.actions:
            if isinstance(action, policy.Finish):
                self._finish(run.paths, plan.meta, action)
            elif isinstance(action, policy.Reactivate):
                if run.paths.ended.exists():
                    os.replace(run.paths.ended, run.paths.ended_archive(int(now)))
            elif isinstance(action, policy.SuspectNode):
                attempt_number = meta.current.number if meta.current else None
                entry, ttl = self._nodes.suspect(run.paths, action, attempt_number, now)
                self._exclude = self._nodes.excluded()  # the resubmission this same cycle must already avoid it
                self._event(run.paths, "suspect_node", f"{action.node} blacklisted for {ttl:.0f}s ({entry.strikes} "
                            f"strikes): {action.reason}", attempt_number, {"node": action.node})
        # Staged in the cycle's group commit, made durable before any backend is asked (daemon.submitting).
        self._commit(run.paths, meta, plan)
        self._sweeper.note(attempt, plan.meta)  # one it closes is swept in this cycle, not later
        for action in plan.actions:
            if isinstance(action, policy.Submit):
                self._submitter.submit(run.paths, plan.meta, action, self._exclude, stats)
            elif isinstance(action, policy.Cancel):
                started = files.started or {}
                cancels.setdefault(meta.spec.backend, []).append(CancelTarget(
                    AttemptKey(meta.run_id, action.attempt), attempt.backend_ref if attempt else None,
                    force=action.force, workload_pid=started.get("workload_pid")))
        if self._alerter.rules or self._notifications.enabled:
            self._alert(plan.meta, run.control, files, now)

    def _first_plan(self, meta: Meta) -> policy.Plan:
        """What the policy does with a new sweep's member now, before any of its runs exists (daemon.sweeps)."""
        backend = self._backend(meta.spec.backend)
        admit = Ledger.unlimited(getattr(backend, "placement_workers", tuple)()).admit
        return policy.decide(Situation(meta, Control(), AttemptFiles(), BackendView("unknown"), self.clock(),
                                       self.jitter(), partitions=self._partition_candidates(meta)), admit)

    def _alert(self, meta: Meta, control: Control, files: AttemptFiles, now: float) -> None:
        """Send the alerts and notifications a change of this run's status calls for (in the background)."""
        row = row_of(meta.run_id, meta, control.paused, None, files.heartbeat_at, files.progress, now)
        status = row["status"]
        self._notifications.observe(meta.run_id, meta.name, status, row["reason"], now)
        for firing in self._alerter.observe(meta.run_id, status, now):
            alerts.fire(firing, alerts.payload(firing, row, now))
            self._event(self.home.run(meta.run_id), "alert", f"{status}: ran {firing.rule.command[0]}"
                        + (f" ({firing.held_back} held back)" if firing.held_back else ""))

    def _partition_candidates(self, meta: Meta) -> PartitionCandidates | None:
        """The partitions the run's backend offers it, best first (only backends with partitions have this)."""
        try:
            offer = getattr(self._backend(meta.spec.backend), "partition_candidates", None)
        except FrayError:
            return None  # a backend that cannot load fails the submission itself, with its message
        return offer(meta.spec) if offer is not None else None

    def _attempt_files(self, paths: RunPaths, number: int, gone: bool) -> AttemptFiles:
        attempt = paths.attempt(number)
        read = self._reader.read

        def safe(path: Path, schema: str) -> dict[str, Any] | None:
            try:
                return read(path, schema)
            except CorruptFileError as exc:
                log.error("%s", exc)
                self._event(paths, "error", str(exc), number)
                return None

        exit_record = safe(attempt.exit, "exit")
        indexes = [0]
        tasks: list[TaskEnd] = []
        if exit_record is not None or gone:
            # In a group that failed the task that failed first says why; one whose task 0 succeeded waits
            # for the others to end (placement.groups).
            indexes = attempt.task_indexes()
            for index in indexes[1:]:
                task_exit = safe(attempt.task(index).exit, "exit")
                if task_exit is not None:
                    tasks.append(TaskEnd(index, task_exit, safe(attempt.task(index).failure, "failure")))
        return AttemptFiles(
            started=safe(attempt.started, "started"),
            heartbeat_at=store.read_heartbeat(attempt.heartbeat),
            exit=exit_record,
            final=safe(attempt.final, "final"),
            failure=safe(attempt.failure, "failure"),
            progress=safe(attempt.progress, "progress"),
            tasks=tuple(tasks),
            task_count=len(indexes),
        )

    def _commit(self, paths: RunPaths, before: Meta, plan: policy.Plan) -> None:
        """Stage meta.json if the plan changed it (committed with the cycle's batch), then log the plan's events."""
        after = plan.meta
        if after != before:  # dataclass equality: no dicts built for the common case of no change
            after.updated_at = plan.now
            run_meta.stage(self._batch, paths, after.to_dict())
            indexed = self._runs.get(paths.run_id)
            if indexed is not None:  # what we wrote is what a re-read would give
                indexed.meta, indexed.meta_key = after.copy(), stat_key(paths.meta)
        for event in plan.events:
            self._event(paths, event.kind, event.reason, event.attempt, event.data, at=plan.now)

    def _finish(self, paths: RunPaths, meta: Meta, action: policy.Finish) -> None:
        last = meta.current
        final = store.read_json(paths.attempt(last.number).final, "final") if last and last.cause == "success" else None
        store.create_json(paths.ended, {
            "run_id": meta.run_id, "status": action.status, "reason": action.reason,
            "ended_at": meta.end.at if meta.end else self.clock(), "attempts": len(meta.attempts),
            "final_attempt": last.number if last else None, "result": (final or {}).get("result"),
        }, "ended")

    def _event(self, paths: RunPaths, kind: str, reason: str, attempt: int | None = None,
               data: dict[str, Any] | None = None, at: float | None = None) -> None:
        record: dict[str, Any] = {"at": at or self.clock(), "run_id": paths.run_id, "kind": kind,
                                  "attempt": attempt, "reason": reason}
        if data:
            record["data"] = data
        try:
            store.append_jsonl(paths.events, record, "event")
        except OSError as exc:
            log.warning("could not append to %s: %s", paths.events, exc)
        log.info("%s %s%s: %s", paths.run_id, kind, f" #{attempt}" if attempt else "", reason)

    def _backend(self, name: str) -> Backend:
        if name not in self._backends:
            self._backends[name] = load_backend(name, self.home, on_attempt_exit=self._wake.set)
            self._loaded.add(name)
        return self._backends[name]

    def _apply_config(self, config: dict[str, Any]) -> None:
        """A new config.json in force without a restart: blacklist settings, alerts, notifications, backends."""
        before, self._config = self._config, config
        self._nodes = NodeKeeper(self.home, self._reader, config, self.clock)
        self._alerter.rules = alerts.Alerter.from_config(config).rules
        self._notifications.configure(config)
        self._family.config = config  # priority credits
        for name in [n for n in self._loaded if before.get(n) != config.get(n)]:
            # Rebuilt on next use from the new section; attempts live on and are found again.
            del self._backends[name]
            self._loaded.discard(name)

    @property
    def poll_interval(self) -> float:
        return min((b.poll_interval_sec for b in self._backends.values()), default=1.0)

    # -- the loop ------------------------------------------------------------------

    def request_stop(self) -> None:
        """Finish the current cycle and return from `serve` (from any thread; never from a signal handler, which
        may interrupt the main thread holding the wake event's lock: fray.daemon.process.stop_on_signals)."""
        self._stop.set()
        self._wake.set()

    def serve(self) -> None:
        """Cycle until `request_stop`, waking on the timer and on file changes."""
        stop, wake, watching = self._stop, self._wake, threading.Event()
        watcher = threading.Thread(target=watching_runs.watch_runs, args=(self.home, wake, stop, self._mark_dirty, watching),
                                   name="fray-watch", daemon=True)
        full_scan_at = float("-inf")
        watcher.start()
        self._backend("local")  # the embedded default: ready before the first run arrives
        watching_runs.await_watch(self.home.watch_probe, watching, watcher)
        while not stop.is_set() and self.holds_lock():
            wake.clear()
            started = time.perf_counter()
            try:
                full = (not watcher.is_alive() or not watching.is_set()
                        or time.monotonic() - full_scan_at > FULL_SCAN_EVERY_SEC)
                stats = self.cycle(full)
                if full:
                    full_scan_at = time.monotonic()
                error = "; ".join(stats.errors[-3:]) or None
            except Exception as exc:  # the loop survives anything; the next cycle retries
                log.exception("cycle failed")
                stats, error = CycleStats(), f"cycle failed: {exc}"
            self._write_lease(stats, (time.perf_counter() - started) * 1000, error)
            self._nodes.write_inventory_every(INVENTORY_EVERY_SEC, self._backends)
            wake.wait(self.poll_interval)
        self._notifications.close()
        if self.holds_lock():  # else the lease may be another daemon's now
            self._write_lease(CycleStats(), 0.0, None, stopping=True)

    def _write_lease(self, stats: CycleStats, cycle_ms: float, error: str | None, stopping: bool = False) -> None:
        lease = {"pid": os.getpid(), "host": socket.gethostname(), "version": __version__,
                 "started_at": self.started_at, "last_cycle_at": self.clock(), "poll_interval_sec": self.poll_interval,
                 "cycles": self.cycles, "last_cycle_ms": round(cycle_ms, 3), "active_runs": stats.active,
                 "stopping": stopping, "last_error": error, "config_error": self._settings.error,
                 "failing_commands": cli_health.failing_commands(self._backends)}
        try:
            store.write_json(self.home.daemon_lease, lease, "daemon")
        except OSError as exc:
            log.warning("could not write the lease: %s", exc)


def _needs_attention(meta: Meta, control: Control) -> bool:
    return meta.phase != _ENDED or control.start_nonce > meta.applied.start_nonce


def _settled(state: RunState) -> bool:
    """Ended, readable, and nothing asked of it: a steady cycle need not look at it."""
    return state.problem is None and state.meta is not None and not _needs_attention(state.meta, state.control)
