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
  no other run's state (no --after, no parent, no job group, no reservation);
- its backend's ledger, with every attempt in flight held, has no room for
  it: of the runs alike (the same request, constraints, priority, user and
  sweep), the scheduler's line starts the oldest first, so only as many of
  them as the room could take on their own are decided, oldest first.

When room opens, a run changes or a full cycle comes (`FULL_SCAN_EVERY_SEC`,
the level-triggered safety net), it is decided as before, so what it is told
(started, or why it waits) is what an undivided cycle tells it; its recorded
wait reason may only lag a change of other runs' line in front of it.
"""

from __future__ import annotations

from typing import Any

from fray.core.model import Control, Meta, Mode, Phase
from fray.core.scheduler import Ledger, Request, run_request
from fray.daemon.records import RunState
from fray.state.row_cache import StatKey

_QUEUED = Phase.QUEUED.value
_RUN_ONCE = Mode.RUN_ONCE.value


class QuietRuns:
    """The waiting runs last decided, by the stat of their files then; which of them to skip this cycle."""

    def __init__(self) -> None:
        self._waiting: dict[str, tuple[StatKey | None, StatKey | None]] = {}

    def select(self, active: list[RunState], ledgers: dict[str, Ledger], full: bool) -> list[RunState]:
        """The runs of `active` to decide this cycle: every one on a full cycle, else all but the quiet ones."""
        if full or not self._waiting:
            return active
        alike: dict[tuple[Any, ...], list[RunState]] = {}
        decide = []
        for run in active:
            seen = self._waiting.get(run.paths.run_id)
            meta = run.meta
            ledger = ledgers.get(meta.spec.backend) if meta is not None else None
            if (seen is None or seen != (run.meta_key, run.control_key) or meta is None or run.problem is not None
                    or ledger is None or ledger.capacity is None):  # a backend that queues by itself: no queue here
                decide.append(run)
            else:
                alike.setdefault(_kind(meta), []).append(run)
        for key, runs in alike.items():
            # Of runs alike, the scheduler's line (fray.core.placement) takes the oldest first: only as many as
            # could start if they alone took the room can start at all.
            room = _room(ledgers[key[0]], key[1], len(runs))
            decide.extend(sorted(runs, key=_in_line)[:room])
        return sorted(decide, key=lambda run: run.paths.run_id) if len(decide) < len(active) else active

    def note(self, decided: list[RunState], now: float) -> None:
        """After the cycle: remember the decided runs left waiting (and forget the others among them)."""
        for run in decided:
            run_id = run.paths.run_id
            if run.meta is not None and _only_room_starts(run.meta, run.control, now):
                self._waiting[run_id] = (run.meta_key, run.control_key)
            else:
                self._waiting.pop(run_id, None)


def _kind(meta: Meta) -> tuple[Any, ...]:
    """What the scheduler tells runs apart by, but their place in line: runs of one kind are interchangeable."""
    spec = meta.spec
    sweep = meta.sweep
    return (spec.backend, run_request(spec.cpus, spec.mem_mb, spec.gpus, spec.replicas), tuple(spec.constraints),
            tuple(spec.tolerations), spec.group_by, spec.priority, meta.submitted_by.get("user"),
            sweep["id"] if sweep else None)


def _in_line(run: RunState) -> tuple[float, str]:
    assert run.meta is not None
    return run.meta.created_at, run.paths.run_id


def _room(ledger: Ledger, request: Request, most: int) -> int:
    """How many of `request` the ledger could still admit, up to `most` (the ledger itself is left as it is)."""
    trial = Ledger(ledger.capacity, ledger.used_cpus, ledger.used_mem_mb, set(ledger.used_gpu_ids), ledger.closed)
    room = 0
    while room < most and trial.admit(request).admitted:
        room += 1
    return room


def _only_room_starts(meta: Meta, control: Control, now: float) -> bool:
    """Waiting to start, with no timer of its own and no tie to another run's state (module doc)."""
    spec = meta.spec
    return (meta.phase == _QUEUED and meta.in_flight is None and meta.wait_reason is not None
            and (meta.next_attempt_at is None or meta.next_attempt_at <= now)
            and not control.paused and not control.stop_requested and control.start_nonce <= meta.applied.start_nonce
            and spec.mode == _RUN_ONCE and spec.scheduling_timeout_sec is None and not spec.partitions
            and not spec.after and meta.parent_run_id is None and meta.gang is None and meta.reservation is None)
