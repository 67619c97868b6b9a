"""The Slurm cluster's nodes as placement workers, from the rows of one `sinfo --Node` (pure).

One worker per row, that is per node and partition (`n3@h100`), because a
node's partition is an attribute constraints test (`partition in (a, b)`).
Attributes come from `fray.core.placement.attributes.slurm_node_attributes`:
hostname, partition, cpu-count, memory-gb, gpu-count, gpu-type (from GRES)
and `feature:<name>` for each available feature. Resources are the node's
totals: Slurm queues work itself, so these workers only answer whether some
node could ever take a run (`fray.core.placement.feasible`).
"""

from __future__ import annotations

from fray.backends.slurm.partitions import NodeRow
from fray.core.placement.attributes import Resources, Worker, slurm_node_attributes


def workers(rows: list[NodeRow]) -> list[Worker]:
    return [Worker(f"{row.node}@{row.partition}",
                   slurm_node_attributes(row.node, row.partition, row.cpus, row.mem_mb, _gres(row), row.features),
                   Resources(row.cpus, row.mem_mb, sum(g.count for g in row.gpus)))
            for row in rows]


def _gres(row: NodeRow) -> str:
    """The row's GPUs back in GRES words, which slurm_node_attributes reads."""
    return ",".join(f"gpu:{g.type}:{g.count}" if g.type else f"gpu:{g.count}" for g in row.gpus)
