"""A plan for one run (pure): the meta as the policy left it, the actions for the daemon, the events to log.

`fray.core.policy` decides and `fray.core.budgets` settles what an ended attempt costs; both
write into one `Plan`, which the daemon then carries out (submit, cancel, finish, reactivate,
suspect a node) and logs. Ending the run is the one step both take, so it is the plan's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fray.core.model import End, EndStatus, Meta, Phase


@dataclass(frozen=True)
class Submit:
    attempt: int
    gpu_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Cancel:
    attempt: int
    force: bool = False


@dataclass(frozen=True)
class Finish:
    status: str
    reason: str


@dataclass(frozen=True)
class Reactivate:
    pass


@dataclass(frozen=True)
class SuspectNode:
    """Put `node` on the blacklist: an attempt there failed in a way that blames the node."""

    node: str
    reason: str
    cause: str | None = None  # what struck it (node_fault, heartbeat_stall)
    probe: str | None = None  # the preflight probe that failed there, when one did


@dataclass(frozen=True)
class ClearSuspicion:
    """Lift the bans this run alone laid for `probe`'s failure: the probe fails for it on every node, so the
    nodes were not at fault (fray.core.budgets)."""

    probe: str | None
    nodes: tuple[str, ...]


Action = Submit | Cancel | Finish | Reactivate | SuspectNode | ClearSuspicion


@dataclass(frozen=True)
class Event:
    kind: str
    reason: str
    attempt: int | None = None
    data: dict[str, Any] | None = None


@dataclass
class Plan:
    meta: Meta
    now: float
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    # The in-flight attempt's last reported step this cycle (its progress.json): kept on the attempt when it
    # ends, so the backoff can tell an attempt that made progress from a loop (fray.core.budgets).
    step: int | None = None

    def log(self, kind: str, reason: str, attempt: int | None = None, **data: Any) -> None:
        self.events.append(Event(kind, reason, attempt, data or None))

    def end(self, status: str, reason: str, budget: str | None = None, budget_limit: int | None = None) -> None:
        """End the run with `status` (an EndStatus value): nothing waits or retries after this. `budget`: the
        retry budget whose spending ends it, with its limit (End.budget)."""
        meta = self.meta
        meta.phase = Phase.ENDED.value
        meta.end = End(EndStatus(status), reason, self.now, budget, budget_limit)
        meta.wait_reason = None
        meta.next_attempt_at = None
        self.actions.append(Finish(status, reason))
        self.log("ended", f"{status}: {reason}")
