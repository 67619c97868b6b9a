"""The daemon's side of the cluster API: families, groups, reservations, actor endpoints.

Each cycle the daemon asks `FamilyKeeper.prepare` for
- the stop orders: children of ended or stopping parents (`family.stop_orders`),
  members of a group that can never start, runs of a released or expired
  reservation; applied by handing the policy an effective control with a
  stop request (`family.effective_control`), never by writing control.json;
- the admission function for each run: group members are admitted all
  together or not at all (`family.plan_groups`), runs in a reservation against
  it (`reservations.Admitter`), the rest placed by the scheduler
  (`placement.runs.place_on_machine`: priority band, then oldest first;
  constraints on the machine's attributes) on a backend that places work
  itself (local), and then admitted against the backend's ledger; on a
  backend that queues by itself but lists its nodes (Slurm), a run no node
  could ever take waits with the reason (`placement.runs.never_placeable`).
  A run held past its --scheduling-timeout is refused for good: it ends.
  Members of a sweep also wait for their group's `--max-parallel` (fray.core.sweeps.gate).
  A run with `--after` that has never started waits for its upstreams (`dependencies.gate`);
  when they can no longer satisfy it, its admission is a final refusal that ends it failed_dependency.

`remove_stale_endpoints` removes the endpoint files of actors whose job has ended or
moved on to a later attempt (the new attempt's server registers afresh), at
most every `ENDPOINT_CHECK_SEC`, reading each endpoint file once (they never
change).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from fray.state import endpoints
from fray.core import dependencies, family, reservations
from fray.core.model import Control, Meta, Phase
from fray.core.placement.attributes import Resources, Worker
from fray.core.placement.priority import Credits, parse_band
from fray.core.placement.runs import credits_from, never_placeable, place_on_machine
from fray.core.capacity import Request
from fray.core.scheduler import Admission, Ledger
from fray.core.status import normalized_status
from fray.core.sweeps import gate
from fray.errors import CorruptFileError
from fray.state import store
from fray.state import layout
from fray.state.config import load_config
from fray.state.layout import Home
from fray.warm import queueing as warm_queue
from fray.daemon.run_view import RunView

log = logging.getLogger("fray.daemon")

ENDPOINT_CHECK_SEC = 1.0


@dataclass
class CyclePlan:
    orders: dict[str, str]
    admit_for: Callable[[Meta], Callable[[Request], Admission]]


class FamilyKeeper:
    def __init__(self, home: Home, config: dict[str, Any] | None = None) -> None:
        self.home = home
        self.config = load_config(home) if config is None else config
        self._reader = store.CachedReader()
        self._endpoint_cache: dict[Path, endpoints.Endpoint | None] = {}
        self._endpoints_checked_at = float("-inf")

    def sweep_gate(self, runs: RunView, submits_together: Callable[[str], bool] = lambda _backend: False
                   ) -> gate.SweepGate:
        """This cycle's --max-parallel gate over every sweep with a point not ended: the quiet runs' selection
        (fray.daemon.quiet) reads it before `prepare` uses it."""
        return _sweep_gate(runs, runs.going(), submits_together)

    def prepare(self, runs: RunView, active: Iterable[Any], ledgers: dict[str, Ledger], now: float,
                submits_together: Callable[[str], bool] = lambda _backend: False,
                sweeps: gate.SweepGate | None = None) -> CyclePlan:
        """`runs`: every run of the cycle, by id (fray.daemon.run_view: what is asked of the runs that ended is
        looked up, never scanned); `active`: those the policy looks at; `submits_together(backend)`: whether that
        backend submits a sweep's attempts in one call and throttles them itself (Slurm).

        In order: the stop orders (a parent's end, a reservation's), the admitter over the ledgers and the
        reservations, the gangs' all-or-nothing plan, the sweeps' gate, the --after gates, and what the
        scheduler holds back; `admit_for` then answers each run from the first of these that speaks for it."""
        active = list(active)
        going = runs.going()  # every run not ended: the only ones a parent, a group or a sweep orders or holds
        active_metas = [r.meta for r in active if r.meta is not None]
        held = reservations.live(self._reservations(), now)
        orders = family.stop_orders(runs, runs, children=going)
        orders.update({k: v for k, v in reservations.orders(active_metas, held).items() if k not in orders})
        admitter = reservations.Admitter(ledgers, held, _reserved_in_flight(active_metas))
        plan = _gang_plan(runs, going, orders, now, admitter)
        for run_id, why in plan.stop.items():
            orders.setdefault(run_id, why)
        credits = credits_from(self.config, (m for m in runs.metas() if m is not None), now)  # read only if on
        sweeps = sweeps if sweeps is not None else _sweep_gate(runs, going, submits_together)
        gates = _gates(active, runs, now)
        # Backends where a run that cannot queue waits for CPUs (also one this cycle skips as quiet): no queueing.
        closed = {m.spec.backend for m in going.values() if m is not None and _waits_unqueueable(m)}
        held_back = _held_back([r for r in active if r.meta is None or r.meta.run_id not in gates], orders, plan,
                               admitter.ledgers, now, credits, sweeps, closed)
        return CyclePlan(orders, _admit_for({**held_back, **_group_answers(plan), **gates}, sweeps, admitter))

    def _reservations(self) -> list[dict[str, Any]]:
        found = []
        try:
            ids = [i for i in (layout.record_id(e.name) for e in os.scandir(self.home.reservations_dir)) if i]
        except FileNotFoundError:
            return []
        for reservation_id in ids:
            try:
                record = self._reader.read(self.home.reservation(reservation_id), "reservation")
            except CorruptFileError as exc:
                log.error("%s", exc)
                continue
            if record is not None:
                found.append(record)
        return found

    def remove_stale_endpoints(self, runs: Mapping[str, Meta | None], force: bool = False) -> int:
        """Remove stale endpoint files; how many were removed."""
        if not force and time.monotonic() - self._endpoints_checked_at < ENDPOINT_CHECK_SEC:
            return 0
        self._endpoints_checked_at = time.monotonic()
        if not self.home.namespaces_dir.exists():
            return 0
        metas = runs
        removed = 0
        seen: set[Path] = set()
        for path in _endpoint_files(self.home):
            seen.add(path)
            if path not in self._endpoint_cache:
                try:
                    raw = store.read_json(path, "endpoint")
                    self._endpoint_cache[path] = endpoints.Endpoint.from_dict(raw) if raw else None
                except (CorruptFileError, OSError):
                    self._endpoint_cache[path] = None
            record = self._endpoint_cache[path]
            if record is None:
                continue
            why = family.stale_endpoint(record.run_id, record.attempt, metas.get(record.run_id or ""),
                                        record.run_id in metas)
            if why:
                try:
                    os.unlink(path)
                    removed += 1
                    log.info("removed the endpoint of actor %s (%s) in namespace %s at %s: %s", record.name,
                             record.actor_id, record.namespace, record.address, why)
                except FileNotFoundError:
                    pass
        for path in [p for p in self._endpoint_cache if p not in seen]:
            del self._endpoint_cache[path]
        return removed


def _reserved_in_flight(metas: list[Meta]) -> list[tuple[str, Request]]:
    """What each reservation already holds: the requests of its runs' attempts in flight."""
    return [(m.reservation, warm_queue.request_of(m)) for m in metas if m.reservation and m.in_flight is not None]


def _sweep_gate(runs: RunView, going: Mapping[str, Meta | None],
                submits_together: Callable[[str], bool]) -> gate.SweepGate:
    """The --max-parallel gate over every sweep with a point not ended (all its points, ended ones too)."""
    sweep_ids = {m.sweep["id"] for m in going.values() if m is not None and m.sweep is not None}
    return gate.plan((run.meta for sweep_id in sweep_ids for run in runs.members(sweep_id) if run.meta is not None),
                     submits_together)


def _gang_plan(runs: RunView, going: Mapping[str, Meta | None], orders: dict[str, str], now: float,
               admitter: reservations.Admitter) -> family.GroupPlan:
    """The all-or-nothing plan of every gang with a member not ended (and none ordered to stop)."""
    groups: dict[str, list[tuple[Meta, Control]]] = {}
    for gang_id in {m.gang["id"] for m in going.values() if m is not None and m.gang is not None}:
        for run in runs.members(gang_id):  # ended members too: one that ended before the start breaks its group
            meta = run.meta
            if meta is not None and meta.gang is not None and meta.run_id not in orders:
                groups.setdefault(gang_id, []).append((meta, run.control))
    groups = {g: found for g, found in groups.items() if any(m.phase != "ended" for m, _ in found)}
    if not groups:
        return family.GroupPlan()

    def admit_meta(meta: Meta) -> Admission:
        return admitter.admit(meta.spec.backend, warm_queue.request_of(meta), meta.reservation)

    return family.plan_groups(groups, now, admit_meta, admitter.snapshot, admitter.restore)


def _group_answers(plan: family.GroupPlan) -> dict[str, Admission]:
    """What the gangs' plan answers its members: granted, or waiting for the rest of their group."""
    waiting = {run_id: Admission(False, why) for run_id, why in plan.waiting.items()}
    return {**waiting, **plan.granted}


def _admit_for(answers: dict[str, Admission], sweeps: gate.SweepGate,
               admitter: reservations.Admitter) -> Callable[[Meta], Callable[[Request], Admission]]:
    """Each run's admission: the answer decided for it this cycle (an --after gate, then its gang's plan, then
    the scheduler's holding back, as `answers` is merged), else its sweep's gate over the admitter."""
    def admit_for(meta: Meta) -> Callable[[Request], Admission]:
        answer = answers.get(meta.run_id)
        if answer is not None:
            return lambda _request: answer
        return sweeps.admit_for(meta, lambda request: admitter.admit(
            meta.spec.backend, warm_queue.mark(meta, request), meta.reservation))

    return admit_for

def _gates(active: list[Any], runs: RunView, now: float) -> dict[str, Admission]:
    """Run id -> the refusal of each run held by its --after this cycle (final: failed_dependency)."""
    gates: dict[str, Admission] = {}

    def status_of(upstream: Meta) -> str:
        attempt = upstream.in_flight
        state = runs.state(upstream.run_id)
        beat = store.read_heartbeat(state.paths.attempt(attempt.number).heartbeat) \
            if attempt is not None and state is not None else None
        return normalized_status(upstream, beat, now).status.value

    for run in active:
        meta = run.meta
        verdict = dependencies.gate(meta, runs, runs.__contains__, status_of) if meta is not None else None
        if verdict is not None and not verdict.start:
            gates[meta.run_id] = Admission(False, verdict.reason, unschedulable=verdict.broken,
                                           final="failed_dependency" if verdict.broken else None)
    return gates


def _endpoint_files(home: Home) -> Iterable[Path]:
    try:
        namespaces = [e.name for e in os.scandir(home.namespaces_dir) if e.is_dir()]
    except FileNotFoundError:
        return
    for ns in namespaces:
        try:
            names = [e.path for e in os.scandir(home.actors_dir(ns)) if e.is_dir()]
        except (FileNotFoundError, NotADirectoryError):
            continue
        for folder in names:
            try:
                for entry in os.scandir(folder):
                    if layout.record_id(entry.name) is not None:
                        yield Path(entry.path)
            except FileNotFoundError:
                continue


def _held_back(active: list[Any], orders: dict[str, str], plan: family.GroupPlan, ledgers: dict[str, Ledger],
               now: float, credits: Credits, sweeps: gate.SweepGate,
               queue_closed: set[str]) -> dict[str, Admission]:
    """Run id -> the refusal (with why) of the scheduler holding it back this cycle, for the runs
    that may start now on a backend that places work on this machine (its ledger has a capacity),
    or that no node of a backend listing its nodes (Slurm) could ever take; past its
    --scheduling-timeout, the refusal is final. Runs in a gang or a reservation keep their own
    admission; members of a sweep past its --max-parallel wait for that, not for resources."""
    by_backend: dict[str, list[Meta]] = {}
    for run in active:
        meta, control = run.meta, run.control
        ledger = ledgers.get(meta.spec.backend) if meta is not None else None
        if (meta is None or ledger is None or (ledger.capacity is None and not ledger.workers) or meta.run_id in orders
                or meta.gang is not None or meta.reservation is not None or meta.run_id in plan.granted
                or not _may_start(meta, control, now)):
            continue
        by_backend.setdefault(meta.spec.backend, []).append(meta)
    held: dict[str, Admission] = {}
    for name, metas in by_backend.items():
        metas = sweeps.may_start(metas)  # the others wait for their sweep's --max-parallel, not for resources
        ledger = ledgers[name]
        if ledger.capacity is None:  # the backend queues by itself: only runs no node could ever take wait
            held.update({run_id: Admission(False, never.reason, unschedulable=never.timed_out)
                         for run_id, never in never_placeable(metas, ledger.workers, now).items()})
            continue
        by_id = {m.run_id: m for m in metas}
        result = place_on_machine(metas, _machine(ledger), now, credits)
        placed = [by_id[run_id] for run_id in dict.fromkeys(a.task_id.split("/", 1)[0] for a in result.assignments)]
        after = _after_placements(ledger, placed)
        # The scheduler's line (band, then submission): who is ahead of a run left waiting.
        first_placed = min((_in_line(m, result.bands) for m in placed), default=None)
        someone_ahead = False  # result.waiting is in the line's order
        queue_open = name not in queue_closed and _queue_open(after, [by_id[t.split("/", 1)[0]] for t, why in result.waiting.items()
                                          if why.startswith("waiting for resources")])
        for task_id, reason in result.waiting.items():
            run_id = task_id.split("/", 1)[0]
            meta = by_id[run_id]
            if queue_open and reason.startswith("waiting for resources"):
                continue  # the ledger admits it into the backend's queue, or says why not
            if reason.startswith("waiting for resources"):
                # The ledger's words (and its "can never start here") once this cycle's placed runs hold what
                # they take, and whether runs ahead in line took or wait for that room: the same words from the
                # cycle a slot frees to the next, so an end does not rewrite every waiting run's meta.json.
                ahead = someone_ahead or (first_placed is not None and first_placed < _in_line(meta, result.bands))
                someone_ahead = True
                why = after.explain(warm_queue.request_of(meta))
                if not why:  # room left, and the scheduler gave it to others
                    reason = f"waiting for resources: {AHEAD}"
                else:
                    reason = f"{why}; {AHEAD}" if ahead else why
            band = result.bands.get(run_id)
            if band is not None and band != parse_band(meta.spec.priority):
                user = meta.submitted_by.get("user", "its user")
                reason = f"placed as {band.label} ({user}'s credits are spent): {reason}"
            held.setdefault(run_id, Admission(False, reason))
        for late in result.timed_out:
            held[late.task_id.split("/", 1)[0]] = Admission(False, late.reason, unschedulable=True)
    return held


AHEAD = "runs of a higher priority band, or older ones, go first"


def _in_line(meta: Meta, bands: dict[str, Any]) -> tuple[Any, float, str]:
    """Where `meta` stands in the scheduler's line (fray.core.placement.placement: band, then submission)."""
    return (bands.get(meta.run_id), meta.created_at, meta.run_id)


def _waits_unqueueable(meta: Meta) -> bool:
    """A run that cannot go to a backend's own queue, left waiting for CPUs when last decided."""
    return (meta.phase == Phase.QUEUED.value and meta.in_flight is None
            and (meta.wait_reason or "").startswith("waiting for resources")
            and not warm_queue.request_of(meta).queueable)


def _queue_open(ledger: Ledger, waiting: list[Meta]) -> bool:
    """Whether runs left waiting for CPUs may go to the backend's own queue (fray.warm.queueing): it has
    one, no run outside it holds CPUs or was placed this cycle (`ledger` holds those placed), and every run
    waiting may queue. A script placed or waiting closes it, so that functions queued past the CPUs drain and
    the scheduler's line decides who takes the next free CPU."""
    return bool(ledger.queue_cpus) and not ledger.unqueued_cpus and \
        all(warm_queue.request_of(meta).queueable for meta in waiting)


def _after_placements(ledger: Ledger, placed: list[Meta]) -> Ledger:
    """A copy of `ledger` with the runs placed this cycle admitted: what the runs left waiting see."""
    after = replace(ledger, used_gpu_ids=set(ledger.used_gpu_ids))
    for meta in placed:
        after.admit(warm_queue.request_of(meta))
    return after


def _may_start(meta: Meta, control: Control, now: float) -> bool:
    """Queued and not held by a person or a backoff: the policy would ask for admission this cycle."""
    return (meta.phase == Phase.QUEUED.value and meta.in_flight is None and not control.paused
            and not control.stop_requested and (meta.next_attempt_at is None or meta.next_attempt_at <= now))


def _machine(ledger: Ledger) -> Worker:
    """This machine as the scheduler's one worker: its attributes and what its ledger has free."""
    cap = ledger.capacity
    assert cap is not None
    free = Resources(cap.cpus - ledger.used_cpus, None if cap.mem_mb is None else cap.mem_mb - ledger.used_mem_mb,
                     cap.gpus - len(ledger.used_gpu_ids))
    return Worker(str(ledger.attributes.get("hostname", "local")), ledger.attributes, free)
