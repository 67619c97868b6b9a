"""Partition fallback: which partition the next attempt of a run goes to.

    choose(candidates, attempts, settings, now) -> Choice

`candidates` is the ordered chain the backend offers for this run (best
first; see `fray.backends.slurm.partitions.choose`). A partition is *tripped* when its
last `after_failures` attempts that say anything about it all failed in a way
that blames the partition (node fault, lost, heartbeat stall, preemption,
failed submission). The next attempt goes to the first partition of the chain
that is not tripped. A trip lasts `retry_preferred_sec` after its last
failure, so the preferred partition is tried again periodically; one more
failure there trips it again at once. A change of partition is a *switch*:
the run resubmits at once rather than waiting out its backoff, since the
backoff was earned on the other partition.

The state is the attempts themselves (each records its partition and cause),
so there is nothing extra to store or to get out of step. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from fray.core.model import PARTITION_FALLBACK_DEFAULTS, Attempt, AttemptState, Cause

# Failures that speak against the partition ...
BLAMES_PARTITION = frozenset({Cause.NODE_FAULT.value, Cause.LOST.value, Cause.HEARTBEAT_STALL.value,
                              Cause.PREEMPTED.value, Cause.SUBMIT_FAILED.value})
# ... and outcomes that show it works (the workload ran there, well or not).
CLEARS_PARTITION = frozenset({Cause.SUCCESS.value, Cause.CLEAN_EXIT.value, Cause.WORKLOAD_FAILURE.value,
                              Cause.PROGRESS_STALL.value, Cause.HANG_STOPPED.value, Cause.HANG_IDLE.value})
# Anything else (stopped, paused, restarted, expired) says nothing either way.


@dataclass(frozen=True)
class Candidates:
    """The partitions a backend offers a run, best first; empty: none can run it (`reason` says why)."""

    chain: tuple[str, ...]
    reason: str = ""


@dataclass(frozen=True)
class Choice:
    partition: str | None  # None: let the scheduler's default apply
    wait: str | None = None  # why no attempt can start (nothing in the chain)
    switched: bool = False  # a different partition from the last attempt's: submit now
    reason: str = ""  # for the event log: why this partition


def choose(candidates: Candidates | None, attempts: Sequence[Attempt], settings: dict[str, Any] | None,
           now: float) -> Choice:
    if candidates is None:
        return Choice(None)
    if not candidates.chain:
        return Choice(None, wait=candidates.reason or "no partition can run this")
    config = {**PARTITION_FALLBACK_DEFAULTS, **(settings or {})}
    after, retry = int(config["after_failures"]), float(config["retry_preferred_sec"])
    until = {p: _tripped_until(p, attempts, after, retry) for p in candidates.chain}
    free = [p for p in candidates.chain if _usable(until[p], now)]
    # Everything tripped: the partition that comes back first.
    chosen = free[0] if free else min(candidates.chain, key=lambda p: until[p] or 0.0)
    previous = next((a.partition for a in reversed(attempts) if a.partition), None)
    if previous is None or previous == chosen:
        return Choice(chosen)
    if until.get(previous) is not None or previous not in candidates.chain:
        why = (f"partition {previous} failed {after} times in a row" if until.get(previous) is not None
               else f"partition {previous} is no longer offered")
        return Choice(chosen, switched=True, reason=f"{why}; falling back to {chosen}")
    return Choice(chosen, switched=True, reason=f"retrying the preferred partition {chosen} (left {previous} "
                                                f"after {retry:.0f}s)")


def _usable(tripped_until: float | None, now: float) -> bool:
    return tripped_until is None or now >= tripped_until


def _tripped_until(partition: str, attempts: Sequence[Attempt], after: int, retry: float) -> float | None:
    """When `partition` may be tried again, or None when it is not tripped."""
    if after <= 0:
        return None  # fallback switched off
    telling = [a for a in attempts if a.partition == partition and a.state == AttemptState.ENDED.value
               and (a.cause in BLAMES_PARTITION or a.cause in CLEARS_PARTITION)]
    recent = telling[-after:]
    if len(recent) < after or any(a.cause not in BLAMES_PARTITION for a in recent):
        return None
    return (recent[-1].ended_at or 0.0) + retry
