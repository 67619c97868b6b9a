"""The daemon's stray killer: kills what closed attempts left running on this machine, and says so in events.

Each cycle, after its decisions are applied, the daemon lists the processes of
this FRAY_HOME tagged with an attempt (fray.wrapper.tags), judges each attempt
by the run as it has just read or written it (fray.core.strays), SIGKILLs the
processes of closed ones, and appends a `reaped` event naming the pids to that
run's events.jsonl. On the local backend that bounds how long a tree outlives
its attempt to one daemon cycle; on Slurm and TPU nodes the next wrapper
reaps the same way as it starts (the daemon sees only the login node).

Listing /proc and reading each process's environment costs a few
milliseconds per hundred processes (7 ms for 130 on a busy 2-core VM), so it
runs every REAP_EVERY_SEC, and at once when an attempt has just been closed.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from fray.core import strays
from fray.core.model import Attempt, Meta
from fray.daemon.cycle_state import RunState
from fray.state.layout import Home, RunPaths
from fray.wrapper import face as wrapper

REAP_EVERY_SEC = 2.0

log = logging.getLogger("fray.daemon")

EventSink = Callable[[RunPaths, str, str, "int | None", "dict[str, Any] | None"], None]


class StrayKiller:
    """Reaps at the end of a cycle that closed an attempt its wrapper did not see end, and every REAP_EVERY_SEC."""

    def __init__(self, home: Home, event: EventSink, clock: Callable[[], float] = time.monotonic) -> None:
        self.home = home
        self._event = event
        self._clock = clock
        self._last = float("-inf")
        self._closed = False

    def note(self, before: Attempt | None, after: Meta) -> None:
        """A decision of this cycle: when it closed the attempt in flight, reap at the end of the cycle."""
        now_in_flight = after.in_flight
        if before is not None and (now_in_flight is None or now_in_flight.number != before.number):
            closed = next((a for a in after.attempts if a.number == before.number), None)
            # An attempt whose wrapper wrote its exit code ended after its clean-up (its guardian kills what the
            # workload left): the reaping every REAP_EVERY_SEC is soon enough, and a thousand short functions
            # ending do not cost a scan of /proc each. One closed otherwise (lost, superseded) is reaped at once.
            if closed is None or closed.exit_code is None:
                self._closed = True

    def cycle(self, runs: Mapping[str, RunState]) -> None:
        """Reap when an attempt was closed this cycle, or REAP_EVERY_SEC after the last time."""
        if not self._closed and self._clock() - self._last < REAP_EVERY_SEC:
            return
        self._closed = False
        try:
            self.reap(runs)
        except OSError as exc:
            log.warning("killing closed attempts' processes failed (retried next cycle): %s", exc)

    def reap(self, runs: Mapping[str, RunState]) -> dict[wrapper.Tag, tuple[str, list[int]]]:
        """Kill the strays of this home; tag -> (reason, pids killed). Each kill is an event of its run."""
        self._last = self._clock()
        killed = wrapper.kill_closed_attempts(str(self.home.root),
                                              lambda tag: strays.closed(self._known(runs, tag.run_id), tag.attempt))
        for tag, (reason, pids) in killed.items():
            paths = self.home.run(tag.run_id)
            if os.path.isdir(paths.dir):
                self._event(paths, "reaped", f"killed {len(pids)} process(es) left running by attempt {tag.attempt} "
                            f"({reason}): pids {pids}", tag.attempt, {"pids": pids})
        return killed

    def _known(self, runs: Mapping[str, RunState], run_id: str) -> strays.RunKnown:
        state = runs.get(run_id)
        if state is not None:
            return strays.RunKnown(state.meta)
        # Not indexed: a run this daemon has not read yet (judged next cycle), or one whose folder is gone.
        return strays.RunKnown(None, exists=os.path.isdir(self.home.run_folder(run_id)))
