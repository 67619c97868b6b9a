"""Admission with reservations (pure): resources held for some jobs, capped for them.

A reservation (schemas/reservation.json) has a `min` and a `max`. While it is
live, the part of `min` its jobs do not use is held out of the backend's
ledger, so other runs cannot take it; its own jobs are admitted while the
jobs of the reservation together stay within `max` (and the machine has room,
counting the held part as theirs). A run whose reservation was released or
has expired is stopped (`orders`), queued or running.

`Admitter` wraps the daemon's per-backend `scheduler.Ledger`s for one cycle.
Runs of a reservation are admitted here, outside `placement`'s ordering; the
other runs are placed by `placement` on what the ledger has left once the
reservations' idle minimum is held out.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from fray.core.model import Meta, Phase
from fray.core.capacity import Request
from fray.core.scheduler import Admission, Ledger


@dataclass(frozen=True)
class Held:
    """A live reservation as admission sees it."""

    reservation_id: str
    backend: str
    min: Request
    max: Request
    expires_at: float

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Held":
        def request(r: Mapping[str, Any]) -> Request:
            return Request(r["cpus"], r.get("mem_mb"), r["gpus"])

        return cls(data["reservation_id"], data["backend"], request(data["min"]), request(data["max"]),
                   data["expires_at"])


def live(records: Iterable[Mapping[str, Any]], now: float) -> dict[str, Held]:
    return {r["reservation_id"]: Held.from_dict(r) for r in records if r["expires_at"] > now}


def orders(metas: Iterable[Meta], live_ids: Iterable[str]) -> dict[str, str]:
    """run id -> why it must stop: its reservation is gone (released or expired)."""
    alive = set(live_ids)
    return {m.run_id: f"its reservation {m.reservation} was released or has expired"
            for m in metas if m.reservation and m.phase != Phase.ENDED.value and m.reservation not in alive}


@dataclass
class _Use:
    cpus: int = 0
    mem_mb: int = 0
    gpus: int = 0
    held_gpu_ids: tuple[int, ...] = ()
    held: Request = field(default_factory=lambda: Request(0, None, 0))


class Admitter:
    def __init__(self, ledgers: Mapping[str, Ledger], held: Mapping[str, Held],
                 in_flight: Iterable[tuple[str, Request]]) -> None:
        """`in_flight`: (reservation id, request) of every attempt in flight admitted against a reservation."""
        self.ledgers = dict(ledgers)
        self.held = dict(held)
        self.use: dict[str, _Use] = {rid: _Use() for rid in held}
        for rid, request in in_flight:
            if rid in self.use:
                use = self.use[rid]
                use.cpus += request.cpus
                use.mem_mb += request.mem_mb or 0
                use.gpus += request.gpus
        for rid, res in self.held.items():
            # A backend's own queue of functions (fray.warm.queueing) starts what it holds as soon as the
            # machine's CPUs are free, blind to the CPUs a reservation keeps: while one is live there, nothing
            # is queued past the CPUs.
            self.ledger(res.backend).queue_cpus = 0
            self._hold_idle(rid)

    def ledger(self, backend: str) -> Ledger:
        return self.ledgers.setdefault(backend, Ledger.unlimited())

    def admit(self, backend: str, request: Request, reservation: str | None) -> Admission:
        ledger = self.ledger(backend)
        if reservation is None:
            return ledger.admit(request)
        res = self.held.get(reservation)
        if res is None:
            return Admission(False, f"reservation {reservation} was released or has expired")
        use = self.use[reservation]
        over = []
        if use.cpus + request.cpus > res.max.cpus:
            over.append(f"{request.cpus} CPUs wanted, {res.max.cpus - use.cpus} of its {res.max.cpus} free")
        if res.max.mem_mb is not None and request.mem_mb and use.mem_mb + request.mem_mb > res.max.mem_mb:
            over.append(f"{request.mem_mb} MB wanted, {res.max.mem_mb - use.mem_mb} of its {res.max.mem_mb} MB free")
        if use.gpus + request.gpus > res.max.gpus:
            over.append(f"{request.gpus} GPUs wanted, {res.max.gpus - use.gpus} of its {res.max.gpus} free")
        if over:
            return Admission(False, f"reservation {reservation} is at its max: " + "; ".join(over))
        self._release_idle(reservation)
        admission = ledger.admit(request)
        if admission.admitted:
            use.cpus += request.cpus
            use.mem_mb += request.mem_mb or 0
            use.gpus += request.gpus
        self._hold_idle(reservation)
        return admission

    def snapshot(self) -> Any:
        return copy.deepcopy((self.ledgers, self.use))

    def restore(self, state: Any) -> None:
        self.ledgers, self.use = copy.deepcopy(state)

    def _hold_idle(self, reservation: str) -> None:
        """Take the unused part of `min` out of the ledger (GPU ids: the lowest free ones)."""
        res, use = self.held[reservation], self.use[reservation]
        ledger = self.ledger(res.backend)
        idle = Request(max(0, res.min.cpus - use.cpus), max(0, (res.min.mem_mb or 0) - use.mem_mb) or None,
                       max(0, res.min.gpus - use.gpus))
        gpu_ids: tuple[int, ...] = ()
        if ledger.capacity is not None and idle.gpus:
            free = [i for i in range(ledger.capacity.gpus) if i not in ledger.used_gpu_ids]
            gpu_ids = tuple(free[: idle.gpus])
        ledger.hold(idle, gpu_ids)
        use.held, use.held_gpu_ids = idle, gpu_ids

    def _release_idle(self, reservation: str) -> None:
        res, use = self.held[reservation], self.use[reservation]
        ledger = self.ledger(res.backend)
        ledger.used_cpus -= use.held.cpus
        ledger.unqueued_cpus -= 0 if use.held.queueable else use.held.cpus
        ledger.used_mem_mb -= use.held.mem_mb or 0
        ledger.used_gpu_ids.difference_update(use.held_gpu_ids)
        use.held, use.held_gpu_ids = Request(0, None, 0), ()
