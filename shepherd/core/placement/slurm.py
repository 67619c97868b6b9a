"""Constraints and replicas as sbatch options: what Slurm can be asked for (pure).

Slurm places work itself, so fray does not run `find_assignments` for it; it
translates instead, and refuses at submit time what sbatch cannot express:

    feature:<name>  (or feature:<name>=1)        --constraint=<name>   (several: joined by &)
    partition=<p>, partition in (a, b)           --partition (the partitions to try)
    hostname=<node>                              --nodelist=<node>
    hostname!=<node>                             --exclude=<node>
    gpu-type=<type>                              --gres=gpu:<type>:<gpus>
    --replicas N (coscheduled or not)            --nodes=N --ntasks-per-node=1: one allocation,
                                                 one task per node, ended together (srun --kill-on-bad-exit)

Taints are a fray notion for workers fray places on; Slurm has none, so
tolerations change nothing here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from fray.core.placement.constraints import Constraint, Op
from fray.errors import UsageError

FEATURE_PREFIX = "feature:"


@dataclass(frozen=True)
class SlurmPlacement:
    constraint: str = ""  # --constraint expression ("ib&nvme"); empty: none
    partitions: tuple[str, ...] = ()
    nodelist: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    gpu_type: str | None = None


def to_slurm(constraints: Sequence[Constraint]) -> SlurmPlacement:
    """Raises UsageError naming the first constraint sbatch cannot express, and what it can."""
    features: list[str] = []
    partitions: list[str] = []
    nodelist: list[str] = []
    exclude: list[str] = []
    gpu_type: str | None = None
    for c in constraints:
        if c.key.startswith(FEATURE_PREFIX) and (c.op is Op.EXISTS or (c.op is Op.EQ and c.value == 1)):
            features.append(c.key[len(FEATURE_PREFIX):])
        elif c.key == "partition" and c.op in (Op.EQ, Op.IN):
            partitions += [str(v) for v in (c.value if isinstance(c.value, tuple) else (c.value,))]
        elif c.key == "hostname" and c.op is Op.EQ:
            nodelist.append(str(c.value))
        elif c.key == "hostname" and c.op is Op.NE:
            exclude.append(str(c.value))
        elif c.key == "gpu-type" and c.op is Op.EQ and gpu_type in (None, c.value):
            gpu_type = str(c.value)
        else:
            raise UsageError(
                f"the slurm backend cannot place on constraint {c}: sbatch can express feature:<name>, "
                "partition=<p>, partition in (a, b), hostname=<node>, hostname!=<node> and gpu-type=<type>; "
                "use one of those, or #SBATCH lines for anything else")
    return SlurmPlacement("&".join(features), tuple(partitions), tuple(nodelist), tuple(exclude), gpu_type)
