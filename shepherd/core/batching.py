"""How `fray.map` packs calls into runs when no `chunk=` is given: pure, from the count, the free slots and the
measured call time.

A run has a fixed cost (its folder, the daemon's decisions, the wrapper's records: tens of milliseconds on a
small machine) that a trivial call does not repay: 1,000 runs of `x * x` took 30 s where Ray's warm tasks take
1.5 s. Ray and Dask answer by batching small tasks; a map answers here by cutting its items into runs of
consecutive calls (fray.cluster.chunks), each call keeping its own future and durable result:

- as many items as slots, or fewer: one run per call (all of them run at once; nothing to gain);
- calls measured long (LONG_CALL_SEC or more each, by earlier maps of the same function): one run per call,
  whose cost is then a few percent of the call's;
- calls measured short: the fewest runs that keep every slot busy, each lasting about RUN_TARGET_SEC (more
  runs when the calls add up to more than a target per slot);
- calls never measured: RUNS_PER_SLOT runs per slot, so that a slot that drew slow calls is helped out by the
  others at the end, whatever the calls turn out to cost.

Run sizes differ by one call at most; the calls keep their order (run k holds the calls after run k-1's).
"""

from __future__ import annotations

import math

LONG_CALL_SEC = 1.0  # a call this long pays for its own run (whose cost is tens of ms)
RUN_TARGET_SEC = 1.0  # what a run of measured short calls lasts, about: a retry or a stop costs no more than that
RUNS_PER_SLOT = 2  # runs per slot for calls never measured


def run_count(items: int, slots: int, call_sec: float | None) -> int:
    """How many runs `items` calls go into, `slots` of them running at once; `call_sec`: the measured seconds
    of one call (None: never measured)."""
    if items <= 0:
        return 0
    slots = max(1, slots)
    if items <= slots or (call_sec is not None and call_sec >= LONG_CALL_SEC):
        return items
    if call_sec is None:
        return min(items, RUNS_PER_SLOT * slots)
    wanted = math.ceil(items * max(call_sec, 0.0) / RUN_TARGET_SEC)  # runs of about a target each
    return min(items, max(slots, wanted))


def sizes(items: int, slots: int, call_sec: float | None) -> list[int]:
    """The number of calls in each run, in order (summing to `items`)."""
    runs = run_count(items, slots, call_sec)
    if runs == 0:
        return []
    base, extra = divmod(items, runs)
    return [base + (index < extra) for index in range(runs)]
