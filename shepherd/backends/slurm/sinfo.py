"""The cluster's partitions as Slurm reports them now: one bounded `sinfo`, read by `partitions`.

The daemon's backend keeps its own cached `sinfo` per cycle; this is for a
person asking outside a cycle (`fray partitions`, through fray.ops.partitions).
The command goes through fray.backends.external like every other Slurm call.
"""

from __future__ import annotations

from fray.backends import external
from fray.backends.slurm import partitions
from fray.errors import BackendError

TIMEOUT_SEC = 30.0


def read_partitions(run_command: external.Runner = external.run,
                    timeout: float = TIMEOUT_SEC) -> list[partitions.Partition]:
    """Every partition with its nodes, states and GPUs; BackendError when `sinfo` fails."""
    result = run_command(["sinfo", "--noheader", "--Node", f"--format={partitions.SINFO_FORMAT}"], timeout)
    if not result.ok:
        raise BackendError(result.describe())
    return partitions.summarize(partitions.parse_sinfo(result.stdout))
