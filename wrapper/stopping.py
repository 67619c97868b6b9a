"""How a running workload is stopped once the wrapper is told to stop, as time passes.

A plain stop (SIGTERM or SIGINT, from anyone) was forwarded by the relay the
moment it arrived; the workload has --stop-grace to exit, then SIGKILL.

A planned stop (SIGUSR2 from the shepherd: `fray control stop`, pause,
restart, keep-alive expiry, a stall) gives the workload a chance to save its
work first:

1. SIGUSR1 - "checkpoint now" - to each of the workload's processes that
   catches it (its default action is to terminate, so one that does not
   catch it is left to SIGTERM as usual);
2. wait until progress.json shows a newer checkpoint_version, the workload
   exits, or half the grace has passed;
3. SIGTERM to the whole group, and SIGKILL when the grace is over.

When no process catches SIGUSR1, SIGTERM goes at once, with the whole grace.
A SIGUSR1 the wrapper receives from outside (Slurm's `--signal=B:USR1@...`
before a time limit) is passed on the same way, by `request_checkpoint`.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

from . import procs, records
from .signals import SignalRelay

CHECKPOINT_SHARE = 0.5  # of the grace, for the checkpoint before SIGTERM
POLL_SEC = 0.1  # how often progress.json is read while waiting for the checkpoint


def request_checkpoint() -> list[int]:
    """SIGUSR1 to each process of the workload that catches it; their pids.

    Not to the whole group: SIGUSR1's default action is to terminate, and a
    checkpoint request must not kill a shell script that never asked for one.
    """
    asked = [pid for pid in procs.descendants(os.getpid()) if procs.catches(pid, signal.SIGUSR1)]
    for pid in asked:
        try:
            os.kill(pid, signal.SIGUSR1)
        except (ProcessLookupError, PermissionError):
            pass
    return asked


def checkpoint_version(progress_path: str) -> int | None:
    try:
        document = records.read_json(progress_path)
    except (OSError, ValueError):
        return None
    version = document.get("checkpoint_version") if isinstance(document, dict) else None
    return version if isinstance(version, int) else None


class StopSequence:
    """The steps of one stop; `step(now)` (monotonic seconds) takes those that are due."""

    def __init__(
        self, relay: SignalRelay, grace: float, progress_path: str, log: Callable[[str], None], now: float
    ) -> None:
        self.relay = relay
        self.progress_path = progress_path
        self.log = log
        self.kill_at = now + grace
        self.term_at: float | None = None  # set while a checkpoint is awaited
        self.version_before: int | None = None
        if not relay.planned:
            return
        self.version_before = checkpoint_version(progress_path)
        asked = request_checkpoint()
        if not asked:
            self.log(f"planned stop: no process of the workload catches SIGUSR1; SIGTERM now, {grace:g}s to exit")
            relay.send(signal.SIGTERM)
            return
        self.term_at = now + grace * CHECKPOINT_SHARE
        self.log(
            f"planned stop: SIGUSR1 (checkpoint now) to pids {asked}; SIGTERM once a newer checkpoint_version is "
            f"reported or after {grace * CHECKPOINT_SHARE:g}s, SIGKILL after {grace:g}s"
        )

    def step(self, now: float) -> bool:
        """Send SIGTERM if its time has come; True when the grace is over and the workload must be killed."""
        if self.term_at is not None:
            version = checkpoint_version(self.progress_path)
            checkpointed = version is not None and (self.version_before is None or version > self.version_before)
            if checkpointed or now >= self.term_at:
                why = f"checkpoint_version {version} reported" if checkpointed else "no new checkpoint in time"
                self.log(f"planned stop: {why}; SIGTERM")
                self.relay.send(signal.SIGTERM)
                self.term_at = None
        return now >= self.kill_at

    def next_wake(self, now: float) -> float:
        """Seconds until `step` has something to do (or to look at)."""
        if self.term_at is not None:
            return max(0.0, min(POLL_SEC, self.kill_at - now))
        return max(0.0, self.kill_at - now)
