"""How soon a woken daemon starts its next cycle while a backend's own queue keeps the CPUs busy without it.

Short functions (`fray.map` on the local backend) end one every few
milliseconds, and the warm worker wakes the loop at each end. A cycle per wake
made the daemon cycle back to back, one or two functions a cycle, each cycle
paying its fixed costs (the group commit's barriers, the index's stats, the
scheduler's line) and taking a CPU from the functions themselves: about half
the daemon's CPU during `fray.map`.

The warm worker starts the next queued function the moment one ends, with no
cycle in between (fray.warm.queueing), so while it holds a queue a cycle
that comes a little later costs the functions nothing: the ends that came
meanwhile are then handled by one cycle, together. So while some backend says
work waits in its own queue, a wake after a cycle that took T seconds starts
the next cycle once the loop has rested T (at most `MAX_REST_SEC`): the
daemon is then busy at most half the time. With nothing queued there (a
single function, a script, a control request) the next cycle starts at once,
as before.
"""

from __future__ import annotations

from collections.abc import Iterable

from fray.backends.protocol import Backend, QueuesFunctions

MAX_REST_SEC = 0.1  # well below what a queue of QUEUE_PER_CPU short functions per CPU takes to drain


def rest(backends: Iterable[Backend], busy_sec: float, idle_sec: float) -> float:
    """Seconds still to rest before the next cycle, after a cycle of `busy_sec` and `idle_sec` since it."""
    if not any(isinstance(backend, QueuesFunctions) and backend.queue_held() for backend in backends):
        return 0.0
    return max(0.0, min(MAX_REST_SEC, busy_sec) - idle_sec)
