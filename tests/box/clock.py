"""A host's clock offset: the environment that makes a process's wall clock run off (tests/box/c/clockshift.c).

Why a preloaded shim on the host's processes, not a faked clock for the whole host: slurmd and slurmstepd
exchange munge credentials, which are checked against the clock, and a shared kernel has one clock.
So only the processes a test cares about are skewed: a job's tasks (the box's TaskProlog) and what a
test runs in the host. The monotonic clock and file times stay true, as on a machine whose clock is off
(files get their times from the file server). The shim, not libfaketime: clockshift.c says why.
"""

from __future__ import annotations

from pathlib import Path

VARIABLE = "FRAY_BOX_CLOCK_OFFSET"


def environment(offset: float, shim: Path) -> dict[str, str]:
    """What a process needs to see a wall clock `offset` seconds off (negative: behind)."""
    return {"LD_PRELOAD": str(shim), VARIABLE: f"{offset:+g}"}
