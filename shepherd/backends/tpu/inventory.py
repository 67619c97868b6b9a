"""The hosts of this home's TPU slices as nodes, for nodes.json and `fray nodes` (pure).

Slurm lists the nodes runs may go to; on Cloud TPU every attempt makes its own
slice, so what there is to show is the hosts of the slices that exist now: one
node per host (`networkEndpoints`, in worker-id order), named
`<slice>-w<worker>`, with the slice's state and health and the run it serves.
A slice still being created may have no endpoints yet, and then no hosts to
show; one that has them shows its hosts in state CREATING.
"""

from __future__ import annotations

from collections.abc import Iterable

from fray.backends.protocol import Node, TpuHost
from fray.backends.tpu.parse import Slice


def host_nodes(slices: Iterable[Slice]) -> list[Node]:
    """Every host of `slices`, by slice name then worker id."""
    return [Node(name=f"{s.name}-w{worker}", state=s.state, cpus=None, mem_mb=None, gpus=0,
                 tpu=TpuHost(slice=s.name, zone=s.zone, worker=worker, ip=ip, accelerator_type=s.accelerator_type,
                             health=s.health, run_id=s.run_id, attempt=s.attempt))
            for s in sorted(slices, key=lambda s: s.name) for worker, ip in enumerate(s.ips)]
