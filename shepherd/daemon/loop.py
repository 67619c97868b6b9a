"""The daemon: a level-triggered reconcile loop over every run in FRAY_HOME.

Each cycle reads the runs that are not ended (unchanged files are not
re-parsed: `fray.daemon.run_index`), takes one snapshot per backend for all its attempts, asks `policy`
what to do for each run, and carries that out: submit, cancel (batched), end.
It wakes on a timer, on file changes (watchfiles), on the doorbell a command on this host rings
(fray.state.doorbell), and when a local wrapper it started exits, so a control request or a finished
attempt is acted on at once.
Between full scans (every FULL_SCAN_EVERY_SEC) it trusts the watcher for the
runs that ended, so a steady cycle costs the runs still going, not all of them.
Its first cycle comes before the watch is set up (which holds the GIL for a
moment per thousand folders): every cycle is full until one began with the
watch on, so a run submitted meanwhile is found by a scan, and the watch's
being on (the watcher reported a probe file, `watching.await_watch`) wakes
the loop at once.

Crash-only: it may be killed at any line. An attempt is recorded as
`submitting` before the backend is asked, so a restarted daemon looks for it
(and adopts it) instead of submitting twice. One daemon acts per FRAY_HOME, on whichever login host
holds the lease (fray.daemon.lease_keeper): every write that could contradict a newer holder checks it first.

Submissions go through `fray.daemon.submitting` (at the end of the cycle, once its group commit,
`fray.state.commit_batch`, made every meta.json it changed durable; a sweep's attempts together); a new
sweep's record becomes runs through `fray.daemon.sweeps`; `fray.daemon.process` is the process entry,
`fray.daemon.watching` the file watcher and `fray.daemon.strays` the sweeper of closed attempts' processes.
This module is the cycle and the order of its steps; the writes a plan makes are `fray.daemon.run_writes`,
and what the policy is told of an attempt `fray.daemon.attempt_files`.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import random
import socket
import threading
import time
from typing import Any, Callable, Mapping

from fray.version import __version__
from fray.backends import cli_health, load_backend
from fray.backends.protocol import (AttemptKey, Backend, CancelTarget, Closing, DescribesWorker, ListsWorkers,
                                    OffersPartitions, QueuesFunctions, Tracked, WarmsUp)
from fray.core import family, policy
from fray.core.model import AttemptState, Control, Meta
from fray.core.partition_policy import Candidates as PartitionCandidates
from fray.core.policy import AttemptFiles, Situation
from fray.core.observation import BackendView, ViewState
from fray.core.scheduler import Ledger
from fray.core.run_row import row_of
from fray.daemon import alerts
from fray.daemon import pacing
from fray.warm import queueing as warm_queue
from fray.daemon.attempt_files import read_attempt_files
from fray.daemon import watching as watching_runs
from fray.daemon.family import CyclePlan, FamilyKeeper
from fray.daemon.housekeeping import Housekeeping
from fray.daemon.summary_writer import SummaryWriter
from fray.daemon.sweeps import Launcher
from fray.daemon.nodes import NodeKeeper
from fray.daemon.notifications import Notifications
from fray.daemon.cycle_state import CycleStats, RunState
from fray.daemon.quiet import QuietRuns
from fray.daemon.run_index import RunIndex
from fray.daemon.run_writes import EventLog, RunWrites
from fray.daemon.sightings import Sightings
from fray.daemon.config import Settings
from fray.daemon.lease_keeper import UNFENCED, Fence
from fray.daemon.strays import StrayKiller
from fray.daemon.submitting import Submitter
from fray.errors import BackendError, FrayError, LeaseLost
from fray.state import doorbell, meta_file as run_meta, store
from fray.state.commit_batch import CommitBatch
from fray.state.layout import Home
from fray.state.run_changes import Journal

log = logging.getLogger("fray.daemon")


def _workers(backend: Backend) -> tuple[Any, ...]:
    """The nodes a backend that queues by itself may place on, to judge a run placeable (none: it cannot tell)."""
    return backend.placement_workers() if isinstance(backend, ListsWorkers) else ()

# Between full scans, ended runs are looked at only when the watcher saw their
# folder change; a full scan every so often is the level-triggered safety net.
FULL_SCAN_EVERY_SEC = 30.0
# How late a compute node's file may reach this host before it is judged missing (config.json daemon.file_latency_sec):
# NFS's default attribute caches (acdirmax) hide a new file from a host that looked for it for up to 60 s.
DEFAULT_FILE_LATENCY_SEC = 60.0
INVENTORY_EVERY_SEC = 60.0


class Daemon:
    def __init__(self, home: Home, backends: dict[str, Backend] | None = None,
                 clock: Callable[[], float] = time.time, jitter: Callable[[], float] = random.random,
                 lease: Fence = UNFENCED) -> None:
        self.home = home
        self._lease = lease  # every write that could contradict a newer daemon checks it first (daemon.lease_keeper)
        self.clock = clock
        self.jitter = jitter
        self._backends: dict[str, Backend] = dict(backends or {})
        self._loaded: set[str] = set()  # backends this daemon built from config.json (not handed in)
        self.started_at = clock()
        self.cycles = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._exclude: tuple[str, ...] = ()
        self._settings = Settings(home)
        self._config = self._settings.config  # before anything that reads it (reloaded by the cycle)
        self._open_records(home, clock, lease)
        self._start_keepers(home, clock)

    def _open_records(self, home: Home, clock: Callable[[], float], lease: Fence) -> None:
        """The run index and the writes of runs' records, each after what it uses: the events log (where the index
        reports a damaged file), the index, the cycle's group commit, and the writes over them."""
        self._reader = store.CachedReader()
        self._journal = Journal(home)  # the runs whose meta.json changed, for `fray list` (fray.state.run_changes)
        events = EventLog(clock)
        self._event = events.event
        self._index = RunIndex(home, self._event, lambda: self._config, self._journal, lambda: lease.generation)
        self._quiet = QuietRuns(lambda: self._config)  # waiting runs nothing can start now: not decided again
        # The cycle's meta.json writes, made durable together, never once the lease is lost.
        self._batch = CommitBatch(home.root, self._journal, fence=lease.check)
        self._writes = RunWrites(self._batch, self._index, events, lease)
        self._commit, self._finish = self._writes.commit, self._writes.finish
        self._seen_in_flight: set[AttemptKey] = set()

    def _start_keepers(self, home: Home, clock: Callable[[], float]) -> None:
        """What the cycle hands its work to: nodes, families, alerts, submissions, sweeps' launches, housekeeping."""
        self._nodes = NodeKeeper(home, self._reader, self._config, clock)
        self._family = FamilyKeeper(home, self._config)
        self._cycle_plan = CyclePlan({}, lambda meta: Ledger.unlimited().admit)
        self._alerter = alerts.Alerter.from_config(self._config)
        self._notifications = Notifications(self._config, f"fray daemon on {socket.gethostname()} for {home.root}")
        self._submitter = Submitter(home, self._backend, self._writes, self._seen_in_flight, clock,
                                    lambda: self.jitter())
        self._launcher = Launcher(home, self._backend, self._first_plan, clock)
        self._housekeeping = Housekeeping(home, lambda: list(self._backends.values()))
        self._strays = StrayKiller(home, self._event)
        self._sightings = Sightings()  # heartbeats and steps as this daemon saw them change, on its clock
        self._summary = SummaryWriter(home, self._journal, self._lease)  # the rows `fray list` need not read

    # -- one cycle -----------------------------------------------------------------

    def cycle(self, full: bool = True) -> CycleStats:
        """One reconcile pass. `full=False` trusts the file watcher for ended runs (daemon.run_index)."""
        stats = CycleStats()
        self._lease.check()
        self._lease.alive()
        if self.cycles == 0:
            self._journal.start()  # this daemon's own: a change made while none ran is seen by `fray list` too
        changed = self._settings.reload()
        if changed is not None:
            self._apply_config(changed)
        written = self._launcher.cycle(self._exclude)  # new sweeps: submitted, then their runs written
        if written:
            self._index.mark_dirty(written)
        self._index.load(stats, full)
        self._restore_overwritten()
        runs = self._index.view()  # every run by id: looked up, not passed over (daemon.run_view)
        sweeps = self._family.sweep_gate(runs, self._submitter.submits_together)
        woken = self._quiet.wake(sweeps)  # resting points of a sweep whose gate has room now
        if woken:  # the gate again, over them too: a sweep none of whose points was going had no gate at all
            self._index.resting -= woken
            runs = self._index.view()
            sweeps = self._family.sweep_gate(runs, self._submitter.submits_together)
        active = self._index.active()
        stats.runs, stats.active = len(runs), len(active)
        ledgers = self._ledgers(active)
        self._sightings.keep_only({AttemptKey(r.paths.run_id, r.meta.in_flight.number) for r in active
                                   if r.meta is not None and r.meta.in_flight is not None})
        active = self._quiet.select(active, ledgers, full, sweeps)
        views = self._snapshots(active, stats)
        self._exclude = self._nodes.excluded() if active else ()
        cancels: dict[str, list[CancelTarget]] = {}
        now = self.clock()
        # Children of ended parents, groups, reservations: decided for all runs at once (daemon_family).
        self._cycle_plan = self._family.prepare(runs, active, ledgers, now, self._submitter.submits_together, sweeps)
        for run in active:
            try:
                self._reconcile(run, views, ledgers, cancels, now, stats)
            except LeaseLost:
                raise
            except Exception as exc:  # one broken run must not stop the others
                log.exception("run %s: unexpected error", run.paths.run_id)
                stats.errors.append(f"{run.paths.run_id}: {exc}")
                self._event(run.paths, "error", f"daemon error while handling this run: {exc}")
        try:
            # What attempts closed this cycle left running dies before their runs' next attempts start.
            self._submitter.flush(self._exclude, stats, lambda: self._reap_strays(self._index.runs))
        except LeaseLost:
            raise
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
        self._reap_strays(self._index.runs)
        if not self._index.deferral.pending:  # these need every run, not those a starting daemon has read
            try:
                self._family.remove_stale_endpoints(runs)
            except OSError as exc:
                log.warning("sweeping actor endpoints failed (retried next cycle): %s", exc)
            self._housekeeping.tidy(runs.metas, now)  # finished arrays' folders, unused snapshots, at their pace
        message = self._notifications.flush(now)  # what this cycle's changes (and any held back) call for
        for notice in message.notices if message else ():
            sinks = ", ".join(self._notifications.sinks)
            self._event(self.home.run(notice.run_id), "notify", f"{notice.status}: notifying {sinks}")
        self._index.drop_settled(active)
        self._quiet.note(active, now)
        self._index.resting = self._quiet.resting()  # paused runs, held points: not stat'ed until their folder changes
        self.cycles += 1
        return stats

    def _restore_overwritten(self) -> None:
        """Put back this daemon's meta.json where a superseded daemon wrote over it (daemon.run_index)."""
        restored, self._index.overwritten = self._index.overwritten, []
        for run in restored:
            assert run.meta is not None
            run_meta.stage(self._batch, run.paths, run.meta.to_dict())
            self._event(run.paths, "error", f"meta.json was written by a daemon whose lease had passed to generation "
                                            f"{self._lease.generation}: this daemon's version is put back")

    def _snapshots(self, active: list[RunState], stats: CycleStats) -> dict[AttemptKey, BackendView]:
        tracked: dict[str, list[Tracked]] = {}
        for run in active:
            attempt = run.meta.in_flight if run.meta else None
            if attempt is not None:
                key = AttemptKey(run.paths.run_id, attempt.number)
                tracked.setdefault(attempt.backend, []).append(Tracked(key, attempt.backend_ref, run.meta.spec))
        for name in [n for n, b in self._backends.items() if b.snapshot_when_idle]:
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
                    attributes = backend.worker_attributes() if capacity is not None and isinstance(
                        backend, DescribesWorker) else {}
                    ledgers[name] = Ledger(capacity, closed=closed, attributes=attributes,
                                           queue_cpus=_queue_cpus(backend)) if capacity is not None \
                        else Ledger.unlimited(_workers(backend))
                except FrayError:
                    ledgers[name] = Ledger.unlimited()
            attempt = meta.in_flight
            if attempt is not None:
                gpu_ids = tuple((attempt.backend_ref or {}).get("gpu_ids", ()))
                ledgers[name].hold(warm_queue.request_of(meta), gpu_ids)
        return ledgers

    def _reconcile(self, run: RunState, views: dict[AttemptKey, BackendView], ledgers: dict[str, Ledger],
                   cancels: dict[str, list[CancelTarget]], now: float, stats: CycleStats) -> None:
        self._lease.check()  # its records (ended.json, a ban) are written before the cycle's commit
        meta = run.meta
        assert meta is not None
        attempt = meta.in_flight
        files = written = AttemptFiles()
        view = BackendView(ViewState.UNKNOWN)
        first_sight = False
        if attempt is not None:
            key = AttemptKey(meta.run_id, attempt.number)
            view = views.get(key, BackendView(ViewState.UNKNOWN))
            written = read_attempt_files(self._reader, run.paths, attempt.number, view.state == "gone", self._event)
            files = self._sightings.on_daemon_clock(key, view.node or attempt.node, written, now, view.state == "gone")
            first_sight = key not in self._seen_in_flight
            if first_sight:
                self._seen_in_flight.add(key)
                if attempt.state != AttemptState.SUBMITTING.value and self.cycles == 0:
                    self._event(run.paths, "adopted", f"found attempt {attempt.number} {view.state} after a daemon restart",
                                attempt.number)
        control = family.effective_control(run.control, self._cycle_plan.orders.get(meta.run_id))
        # A local attempt's files are written on this host: nothing is late. Another host's reach it through caches.
        latency = 0.0 if meta.spec.backend == "local" else self._file_latency
        plan = policy.decide(Situation(meta, control, files, view, now, self.jitter(),
                                       partitions=self._partition_candidates(meta), first_sight=first_sight,
                                       file_latency=latency),
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
                entry, ttl, refused = self._nodes.suspect(run.paths, action, attempt_number, now)
                self._exclude = self._nodes.excluded()  # the resubmission this same cycle must already avoid it
                self._event(run.paths, "suspect_node", f"{action.node} {refused}: {action.reason}" if entry is None
                            else f"{action.node} blacklisted for {ttl:.0f}s ({entry.strikes} strikes): {action.reason}",
                            attempt_number, {"node": action.node})
            elif isinstance(action, policy.ClearSuspicion):
                lifted = self._nodes.clear(run.paths, action, now)
                self._exclude = self._nodes.excluded()
                if lifted:
                    self._event(run.paths, "unbanned", f"{', '.join(lifted)} unbanned: the {action.probe} probe fails "
                                "the same way for this run on every node, so they were not at fault", None,
                                {"nodes": lifted})
        # Staged in the cycle's group commit, made durable before any backend is asked (daemon.submitting).
        self._commit(run.paths, meta, plan)
        self._strays.note(attempt, plan.meta)  # one it closes is reaped in this cycle, not later
        if attempt is not None and plan.meta.in_flight is None:
            self._wake.set()  # its room is free: the next cycle, at once, starts what waits for it (daemon.quiet)
        for action in plan.actions:
            if isinstance(action, policy.Submit):
                self._submitter.submit(run.paths, plan.meta, action, self._exclude, stats)
            elif isinstance(action, policy.Cancel):
                started = files.started or {}
                cancels.setdefault(meta.spec.backend, []).append(CancelTarget(
                    AttemptKey(meta.run_id, action.attempt), attempt.backend_ref if attempt else None,
                    force=action.force, workload_pid=started.get("workload_pid")))
        if self._alerter.rules or self._notifications.enabled:
            self._alert(plan.meta, run.control, written, now)  # as every reader sees them: the node's times

    def _first_plan(self, meta: Meta) -> policy.Plan:
        """What the policy does with a new sweep's member now, before any of its runs exists (daemon.sweeps)."""
        backend = self._backend(meta.spec.backend)
        admit = Ledger.unlimited(_workers(backend)).admit
        return policy.decide(Situation(meta, Control(), AttemptFiles(), BackendView(ViewState.UNKNOWN), self.clock(),
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
            backend = self._backend(meta.spec.backend)
        except FrayError:
            return None  # a backend that cannot load fails the submission itself, with its message
        return backend.partition_candidates(meta.spec) if isinstance(backend, OffersPartitions) else None

    def _backend(self, name: str) -> Backend:
        self._lease.check()  # every submission and cancel goes through here
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
    def _file_latency(self) -> float:
        return float(self._config.get("daemon", {}).get("file_latency_sec", DEFAULT_FILE_LATENCY_SEC))

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
        watcher = threading.Thread(target=watching_runs.watch_runs, args=(self.home, wake, stop, self._index.mark_dirty, watching),
                                   name="fray-watch", daemon=True)
        bell = doorbell.Bell(self.home)
        if bell.open():  # before the first cycle: a ring meanwhile waits in the socket's queue
            threading.Thread(target=watching_runs.hear_doorbell, args=(bell, wake, stop, self._index.mark_dirty),
                             name="fray-doorbell", daemon=True).start()
        full_scan_at, watched = float("-inf"), False
        self._backend("local")  # the embedded default: ready before the first run arrives
        while not stop.is_set() and self._lease.valid():
            wake.clear()
            started = time.perf_counter()
            try:
                was_watched, watched = watched, watching.is_set()
                full = (not watcher.is_alive() or not was_watched
                        or time.monotonic() - full_scan_at > FULL_SCAN_EVERY_SEC)
                stats = self.cycle(full)
                if full:
                    full_scan_at = time.monotonic()
                error = "; ".join(stats.errors[-3:]) or None
            except LeaseLost as exc:  # another daemon acts now: stop before writing anything more
                log.error("%s", exc)
                break
            except Exception as exc:  # the loop survives anything; the next cycle retries
                log.exception("cycle failed")
                stats, error = CycleStats(), f"cycle failed: {exc}"
            self._publish(stats, (time.perf_counter() - started) * 1000, error)
            if watcher.ident is None:  # after the first cycle: setting the watch up holds the GIL a while
                watcher.start()  # the cycles are full until one began with the watch on (module doc)
                probe = (self.home.watch_probe, watching, watcher, wake)
                threading.Thread(target=watching_runs.await_watch, args=probe, name="fray-watch-probe", daemon=True).start()
                local = self._backends.get("local")
                if isinstance(local, WarmsUp):
                    local.warm_up()  # a first script need not wait for it
            if self._lease.valid():
                self._nodes.write_inventory_every(INVENTORY_EVERY_SEC, self._backends, self._sightings.node_offsets())
            self._index.save_settled()
            self._write_summary()
            idle_from = time.perf_counter()
            self._index.idle(wake, self.poll_interval)  # the runs a start deferred, read while nothing happens
            stop.wait(pacing.rest(self._backends.values(), idle_from - started, time.perf_counter() - idle_from))
        if self._lease.valid():  # else the newer daemon keeps the index
            self._index.save_settled(force=True)
        self._notifications.close()

    def _write_summary(self) -> None:
        """The list summary after a cycle (daemon.summary_writer): a failure costs listings speed, never a cycle."""
        try:
            self._summary.write(self._index.runs)
        except LeaseLost:
            pass  # the loop stops at its next check
        except Exception:
            log.exception("writing the list summary failed")

    def close(self) -> None:
        """After `serve`: its threads stopped and its backends let go (a daemon that lost the lease is replaced by
        a new Daemon when it takes one again; what it started lives on, to be adopted)."""
        self._stop.set()
        for backend in self._backends.values():
            if isinstance(backend, Closing):
                backend.close()

    def wake(self) -> None:
        """Cut the current wait short (from any thread): the lease was lost, say."""
        self._wake.set()

    def _publish(self, stats: CycleStats, cycle_ms: float, error: str | None) -> None:
        """This cycle's figures, in the lease (daemon.json): written by the lease's keeper, with its renewal."""
        self._lease.publish({
            "version": __version__, "started_at": self.started_at, "last_cycle_at": self.clock(),
            "poll_interval_sec": self.poll_interval, "cycles": self.cycles, "last_cycle_ms": round(cycle_ms, 3),
            "active_runs": stats.active, "last_error": error, "config_error": self._settings.error,
            "failing_commands": cli_health.failing_commands(self._backends)})

    def _reap_strays(self, runs: Mapping[str, RunState]) -> None:
        """Kill what closed attempts left running (when one closed this cycle, or now and then)."""
        self._lease.check()  # it kills processes by what this daemon believes
        self._strays.cycle(runs)


def _queue_cpus(backend: Backend) -> int:
    """How far beyond its CPUs the backend takes queueable runs (0: it has no such queue)."""
    return int(backend.queue_cpus()) if isinstance(backend, QueuesFunctions) else 0
