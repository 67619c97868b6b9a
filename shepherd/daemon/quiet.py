"""Waiting runs a steady cycle need not decide again: nothing of theirs changed and no room opened for them.

A thousand functions mapped on a two-CPU machine are a thousand runs waiting
for two slots. Deciding each of them every cycle (the policy, its copy of the
meta, the scheduler's line) made a cycle cost the queue's length, hundreds of
milliseconds, and the queue drained one cycle per freed slot. A run waiting for
resources gets the same decision as last time when all of these hold, so the
cycle skips it:

- it was decided in an earlier cycle and left waiting, and neither its
  meta.json nor its control.json changed since (their stat is the one then);
- nothing but room can start it: no timer of its own is running (a backoff,
  a --scheduling-timeout, a keep-alive, a partition's retry) and it depends on
  no other run's state (no --after, no parent, no job group, no reservation),
  and credits are off (with them a user's runs change band as time passes);
- its backend's ledger, with every attempt in flight held, has no room for
  it: of the runs alike (the same request, constraints, priority, user and
  sweep), the scheduler's line starts the oldest first, so only as many of
  them as the room could take on their own are decided, oldest first;
- or its sweep's --max-parallel gate (fray.core.sweeps.gate) has no room
  for it, on any backend (one that queues by itself too: Slurm): the gate
  lets the oldest members start first, and the others are told the gate's
  words again. A 10,000-point sweep waiting on --max-parallel 2 cost a
  steady cycle 10,000 decisions (half a core, all the time); now 3.

A paused run waiting to start is skipped the same way (`_stays_paused`): once
decided into its pause, with neither file changed since, no timer of its own
and no tie to another run, it gets the same decision until a person unpauses
or stops it, which writes its control.json. A home with a thousand paused runs
then costs a steady cycle their stat, not a thousand decisions.

When room opens, a run changes or a full cycle comes (`FULL_SCAN_EVERY_SEC`,
the level-triggered safety net), it is decided as before, so what it is told
(started, or why it waits) is what an undivided cycle tells it; its recorded
wait reason may only lag a change of other runs' line in front of it.
"""

from __future__ import annotations

import heapq
from typing import Any, Callable

from fray.core.model import Control, Meta, Mode, Phase
from fray.core.capacity import Request
from fray.core.scheduler import Ledger
from fray.core.sweeps.gate import SweepGate
from fray.core.status import PAUSED_REASON
from fray.warm import queueing as warm_queue
from fray.daemon.cycle_state import RunState
from fray.state.row_cache import StatKey

_QUEUED = Phase.QUEUED.value
_RUN_ONCE = Mode.RUN_ONCE.value


class QuietRuns:
    """The waiting runs last decided, by the stat of their files then; which of them to skip this cycle."""

    def __init__(self, config: Callable[[], dict[str, Any]]) -> None:
        self._config = config  # config.json as the daemon has it now
        # run id -> the stat of its meta.json and control.json when last decided, its kind (_kind), and why the
        # ledger then left a run of that kind waiting once that cycle's runs had started (its wait reason's words)
        self._waiting: dict[str, tuple[StatKey | None, StatKey | None, tuple[Any, ...], str]] = {}
        self._ledgers: dict[str, Ledger] = {}  # this cycle's: they hold what it admits once it has decided
        self._paused: dict[str, tuple[StatKey | None, StatKey | None]] = {}  # run id -> its files' stat then
        self._held: dict[str, str] = {}  # run id -> the sweep whose full gate held it back last cycle (resting)

    def select(self, active: list[RunState], ledgers: dict[str, Ledger], full: bool,
               sweeps: SweepGate | None = None) -> list[RunState]:
        """The runs of `active` to decide this cycle: every one on a full cycle, else all but the quiet ones.
        `sweeps`: this cycle's --max-parallel gate, which holds back the members of a full sweep."""
        self._ledgers = ledgers
        if full:
            self._held.clear()
        if full or not (self._waiting or self._paused) \
                or (self._config().get("priority") or {}).get("credit_hours") is not None:
            return active  # with credits, a user's runs change band as time passes (fray.core.placement.priority)
        sweeps = sweeps or SweepGate()
        alike: dict[tuple[Any, ...], list[RunState]] = {}
        skipped: set[int] = set()
        for run in active:
            paused = self._paused.get(run.meta.run_id if run.meta is not None else "")
            if paused is not None and paused == (run.meta_key, run.control_key) and run.problem is None:
                skipped.add(id(run))
                continue
            seen = self._waiting.get(run.meta.run_id if run.meta is not None else "")
            if seen is not None and seen[:2] == (run.meta_key, run.control_key) and run.problem is None:
                ledger = ledgers.get(seen[2][0])
                # One that queues by itself admits at once, unless its sweep's gate holds it back.
                if ledger is not None and (ledger.capacity is not None or sweeps.held_reason(run.meta)):
                    alike.setdefault(seen[2], []).append(run)
        for kind, runs in alike.items():
            still = self._still_waiting(ledgers[kind[0]], kind, runs, sweeps)
            skipped.update(id(run) for run in still)
            if sweeps.counted_room(runs[0].meta) == 0 and kind[-1] is not None:  # held by a full gate: they rest
                self._held.update((_id(run), kind[-1]) for run in still)
        return [run for run in active if id(run) not in skipped] if skipped else active

    def wake(self, sweeps: SweepGate) -> set[str]:
        """The resting members of sweeps whose gate has room now (or gates them no more): the run index looks
        at them again this cycle. Until then they are not even stat'ed: a 10,000-point sweep waiting on
        --max-parallel costs a steady cycle its points going, not its 10,000 files."""
        woken = {run_id for run_id, sweep_id in self._held.items() if sweeps.room.get(sweep_id, 1) > 0
                 or sweep_id in sweeps.whole or sweep_id in sweeps.waiting}
        for run_id in woken:
            del self._held[run_id]
        return woken

    def _still_waiting(self, ledger: Ledger, kind: tuple[Any, ...], runs: list[RunState],
                       sweeps: SweepGate) -> list[RunState]:
        """Of quiet runs alike, those that would be told what they were told last time. The scheduler's line
        (fray.core.placement) takes the oldest first: only as many as the room takes can start, and the next
        in line is told it is first; the others wait as before unless the ledger, once that room is taken,
        would give other words for it. A member of a sweep its gate holds back waits for the sweep's room
        as much as for the ledger's: a sweep of 10,000 points with --max-parallel 2 decides 3 of them, not
        10,000 (the words it was told are the gate's, so those are compared)."""
        first = runs[0].meta
        assert first is not None
        gated, held = sweeps.counted_room(first), sweeps.held_reason(first)
        if gated is None and held is not None:  # a sweep still being written: none of it starts
            return [run for run in runs if _told(run) == held]
        if gated is not None:
            room, why = (gated, "") if ledger.capacity is None else _room(ledger, kind[1], min(len(runs), gated))
            rest = _behind(runs, room + 1)
            if room >= gated:  # the gate is full before the ledger: the rest are told the gate's words
                return [run for run in rest if _told(run) == held]
            return [run for run in rest if self._waiting[_id(run)][3] == why]
        room, why = _room(ledger, kind[1], len(runs))
        rest = _behind(runs, room + 1) if room else runs
        return [run for run in rest if self._waiting[_id(run)][3] == why]

    def resting(self) -> set[str]:
        """The paused runs decided into their pause and the members a full sweep's gate holds back: the run
        index need not look at them until their files change (fray.daemon.run_index) or `wake` says so."""
        return set(self._paused) | set(self._held)

    def note(self, decided: list[RunState], now: float) -> None:
        """After the cycle: remember the decided runs left waiting (and forget the others among them)."""
        why: dict[tuple[str, Request], str] = {}
        for run in decided:
            meta = run.meta
            if meta is not None:
                self._held.pop(meta.run_id, None)  # decided again: held, if at all, by this decision's words
            if meta is not None and _only_room_starts(meta, run.control, now):
                kind = _kind(meta)
                if kind[:2] not in why:
                    ledger = self._ledgers.get(kind[0])
                    why[kind[:2]] = ledger.explain(kind[1]) if ledger is not None else ""
                self._waiting[meta.run_id] = (run.meta_key, run.control_key, kind, why[kind[:2]])
                self._paused.pop(meta.run_id, None)
            elif meta is not None and _stays_paused(meta, run.control):
                self._paused[meta.run_id] = (run.meta_key, run.control_key)
                self._waiting.pop(meta.run_id, None)
            elif meta is not None:
                self._waiting.pop(meta.run_id, None)
                self._paused.pop(meta.run_id, None)


def _kind(meta: Meta) -> tuple[Any, ...]:
    """What the scheduler tells runs apart by, but their place in line: runs of one kind are interchangeable."""
    spec = meta.spec
    sweep = meta.sweep
    return (spec.backend, warm_queue.request_of(meta), tuple(spec.constraints),
            tuple(spec.tolerations), spec.group_by, spec.priority, meta.submitted_by.get("user"),
            sweep["id"] if sweep else None)


def _id(run: RunState) -> str:
    assert run.meta is not None
    return run.meta.run_id


def _behind(runs: list[RunState], count: int) -> list[RunState]:
    """The runs but the `count` first in line (a partial selection: 10,000 waiting runs are not sorted)."""
    first = {id(run) for run in heapq.nsmallest(count, runs, key=_in_line)}
    return [run for run in runs if id(run) not in first]


def _told(run: RunState) -> str | None:
    return run.meta.wait_reason if run.meta is not None else None


def _in_line(run: RunState) -> tuple[float, str]:
    assert run.meta is not None
    return run.meta.created_at, run.meta.run_id


def _room(ledger: Ledger, request: Request, most: int) -> tuple[int, str]:
    """How many of `request` the ledger could still admit, up to `most`, and why it would refuse one more then
    (the ledger itself is left as it is)."""
    trial = ledger.copy()
    room = 0
    while room < most and trial.admit(request).admitted:
        room += 1
    return room, trial.explain(request)


def _only_room_starts(meta: Meta, control: Control, now: float) -> bool:
    """Waiting to start, with no timer of its own and no tie to another run's state (module doc)."""
    return (meta.wait_reason is not None and (meta.next_attempt_at is None or meta.next_attempt_at <= now)
            and not control.paused and _untied(meta, control))


def _stays_paused(meta: Meta, control: Control) -> bool:
    """Decided into its pause (fray.core.policy: a paused run waits), which only its control.json can end."""
    return (meta.wait_reason == PAUSED_REASON and control.paused and meta.spec.keep_alive_sec is None
            and _untied(meta, control))


def _untied(meta: Meta, control: Control) -> bool:
    """Queued, nothing asked of it, no timer of its own and no tie to another run's state (module doc)."""
    spec = meta.spec
    return (meta.phase == _QUEUED and meta.in_flight is None
            and not control.stop_requested and control.start_nonce <= meta.applied.start_nonce
            and control.restart_nonce <= meta.applied.restart_nonce
            and spec.mode == _RUN_ONCE and spec.scheduling_timeout_sec is None and not spec.partitions
            and not spec.after and meta.parent_run_id is None and meta.gang is None and meta.reservation is None)
