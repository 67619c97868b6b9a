"""Retry budgets and backoff (pure): what a failure costs a run, and how long it waits before the next try.

Each ended attempt that drew on a budget says which (`counted_as`); the counts
are recomputed from the attempts inside the sliding retry window, never kept as
a running total that could drift. The backoff grows with the streak of fast
failures, capped, half of it random so runs do not restart in lockstep.
"""

from __future__ import annotations

from dataclasses import dataclass

from fray.core.model import Meta, RunSpec

WORKLOAD_BUDGET, NODE_BUDGET = "workload", "node"


@dataclass(frozen=True)
class BudgetsUsed:
    """Failures that count against each retry budget now."""

    workload: int
    node: int


def budgets_used(meta: Meta, now: float) -> BudgetsUsed:
    """Failures inside the retry window (and since the run was last (re)started), per budget."""
    since = meta.counters.since or float("-inf")
    if meta.spec.retry_window_sec:
        since = max(since, now - meta.spec.retry_window_sec)
    workload = node = 0
    for attempt in meta.attempts:
        if attempt.counted_as is None or (attempt.ended_at or now) < since:
            continue
        if attempt.counted_as == WORKLOAD_BUDGET:
            workload += 1
        else:
            node += 1
    return BudgetsUsed(workload, node)


def backoff_delay(spec: RunSpec, streak: int, jitter: float) -> float:
    """Exponential in the failure streak, capped, with 'equal jitter' (half fixed, half random)."""
    if streak <= 0 or spec.backoff_base_sec <= 0:
        return 0.0
    ceiling = min(spec.backoff_max_sec, spec.backoff_base_sec * 2 ** min(streak - 1, 32))
    return ceiling * (0.5 + 0.5 * jitter)
