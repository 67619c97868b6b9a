"""How many members of each sweep may start an attempt this cycle (`--max-parallel K`). Pure.

A sweep's members start on their own (not all or nothing, unlike a job group),
with two rules:
- no member starts before every member's run folder is there (they are
  written together, but a daemon may list the folder halfway through);
- at most K members are in flight at once. Where the backend submits a
  sweep's attempts together (Slurm: one job array throttled with `%K`), the
  first start of the whole group goes at once and the scheduler keeps the
  limit; after that (retries), an attempt starts only while fewer than K
  members are in flight, pending array tasks included. On the local backend
  every start is counted here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from fray.core.model import Meta, Phase
from fray.core.capacity import Request
from fray.core.scheduler import Admission

Admit = Callable[[Request], Admission]


@dataclass
class SweepGate:
    waiting: dict[str, str] = field(default_factory=dict)  # group id -> why none of its members starts now
    whole: set[str] = field(default_factory=set)  # groups whose first start goes at once (the backend throttles)
    room: dict[str, int] = field(default_factory=dict)  # group id -> how many more may start this cycle
    limits: dict[str, int] = field(default_factory=dict)

    def may_start(self, metas: list[Meta]) -> list[Meta]:
        """Those of `metas` (in order) that the gate would let start this cycle: the scheduler places only
        these, so a member the gate holds back takes no room from a run that may start."""
        left = dict(self.room)
        kept = []
        for meta in metas:
            group_id = meta.sweep["id"] if meta.sweep is not None else None
            if group_id is None or group_id in self.whole or (group_id not in self.waiting and group_id not in left):
                kept.append(meta)
            elif group_id in left and left[group_id] > 0:
                left[group_id] -= 1
                kept.append(meta)
        return kept

    def counted_room(self, meta: Meta) -> int | None:
        """How many more of `meta`'s sweep may start this cycle, where the gate counts them (None: it does not:
        no sweep, no --max-parallel, a first start the backend throttles, or a sweep still being written)."""
        group_id = meta.sweep["id"] if meta.sweep is not None else None
        if group_id is None or group_id in self.whole or group_id in self.waiting:
            return None
        return self.room.get(group_id)

    def held_reason(self, meta: Meta) -> str | None:
        """What the gate tells a member it holds back: its sweep still being written, or no room left in it."""
        group = meta.sweep
        if group is None or group["id"] in self.whole:
            return None
        if group["id"] in self.waiting:
            return self.waiting[group["id"]]
        return _full(self.limits[group["id"]], group) if group["id"] in self.room else None

    def admit_for(self, meta: Meta, inner: Admit) -> Admit:
        """`inner` (the ordinary admission), held to the sweep's rules for this member."""
        group = meta.sweep
        if group is None:
            return inner
        group_id = group["id"]
        if group_id in self.waiting:
            why = self.waiting[group_id]
            return lambda _request: Admission(False, why)
        if group_id in self.whole or group_id not in self.room:
            return inner

        def admit(request: Request) -> Admission:
            if self.room[group_id] <= 0:
                return Admission(False, _full(self.limits[group_id], group))
            admission = inner(request)
            if admission.admitted:
                self.room[group_id] -= 1
            return admission

        return admit


def plan(metas: Iterable[Meta], submits_together: Callable[[str], bool]) -> SweepGate:
    """The gate for this cycle from every run's meta (ended ones too); `submits_together(backend)`:
    whether that backend submits a sweep's attempts in one call and throttles them itself."""
    members: dict[str, list[Meta]] = {}
    for meta in metas:
        group = meta.sweep
        if group is not None:
            members.setdefault(group["id"], []).append(meta)
    gate = SweepGate()
    for group_id, found in members.items():
        group = found[0].group
        assert group is not None
        started = any(m.attempts for m in found)
        if not started and len(found) < group["size"]:
            gate.waiting[group_id] = f"waiting for all {group['size']} members of sweep {group_id} ({len(found)} so far)"
            continue
        if not started and submits_together(found[0].spec.backend):
            gate.whole.add(group_id)
            continue
        limit = group.get("max_parallel")
        if limit:
            in_flight = sum(1 for m in found if m.phase != Phase.ENDED.value and m.in_flight is not None)
            gate.room[group_id] = max(0, limit - in_flight)
            gate.limits[group_id] = limit
    return gate


def _full(limit: int, group: dict) -> str:
    return f"waiting: {limit} members of sweep {group.get('name', group['id'])} are in flight (--max-parallel {limit})"
