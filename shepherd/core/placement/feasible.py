"""Could any worker ever take this job? For backends that queue by themselves (Slurm) (pure).

Slurm places work itself, so fray does not assign nodes there; but a run whose
constraints no node meets (`feature:ib` on a cluster without InfiniBand), or
that asks more of one node than any node has, would only be refused by sbatch
or wait in the queue forever. Against the cluster's nodes as `sinfo` lists
them, with their total resources (what is free is Slurm's business), this
says why such a run cannot start, in the same words `find_assignments` uses,
so it waits with that reason (and, past --scheduling-timeout, ends).
"""

from __future__ import annotations

from fray.core.placement.attributes import Resources
from fray.core.placement.constraints import Constraint
from fray.core.placement.placement import amount
from fray.core.placement.posting import WorkerIndex


def why_never(index: WorkerIndex, constraints: tuple[Constraint, ...], tolerations: tuple[str, ...],
              per_task: Resources, tasks: int) -> str:
    """Empty when at least `tasks` distinct workers meet the constraints and each has `per_task`
    in total; otherwise why not."""
    found = index.candidates(constraints + index.implicit(tolerations))
    if not found.workers:
        return found.reason
    # Distinct machines: Slurm lists a node once per partition it is in.
    big_enough = {index.workers[p].attributes.get("hostname", index.workers[p].worker_id) for p in found.workers
                  if _holds(index.workers[p].free, per_task)}
    if len(big_enough) >= tasks:
        return ""
    where = " with " + " and ".join(str(c) for c in constraints) if constraints else ""
    what = amount(per_task)
    if tasks == 1:
        return f"no worker{where} has {what} in all ({len(found.workers)} match)"
    return f"only {len(big_enough)} workers{where} have {what} in all; {tasks} are needed"


def _holds(total: Resources, need: Resources) -> bool:
    return (total.cpus >= need.cpus and total.gpus >= need.gpus
            and (total.mem_mb is None or total.mem_mb >= (need.mem_mb or 0)))
