"""Constraints, replicas and groups on a TPU slice: its hosts as the scheduler's workers (pure).

A TPU run gets a slice of its own each attempt, so placement there is not a
choice among many machines but a check and a mapping, done by the same
`find_assignments` that places local work. The slice's hosts are the workers
(`tpu_host_attributes`: hostname, tpu-name, tpu-worker-id, tpu-type,
tpu-vm-count); the run's tasks are one per host, because every host of a
slice must run the program for JAX to start; `--group-by tpu-name` (the only
grouping a slice can honour: all its hosts share it) puts task i on the host
with tpu-worker-id i, which is the FRAY_TASK_INDEX the launch gives host i.

`fray submit` refuses what a slice cannot give: `--replicas N` other than
the slice's host count, another `--group-by`, a constraint no host meets
(`tpu-vm-count>=8` on a 4-host v4-32), each with the scheduler's reason.
"""

from __future__ import annotations

from fray.core.model import RunSpec
from fray.core.placement.attributes import Resources, Worker, tpu_host_attributes
from fray.core.placement.constraints import parse
from fray.core.placement.placement import Job, Task, find_assignments
from fray.core.tpu_topology import shape

GROUP = "tpu-name"  # what all hosts of one slice share
SLICE = "the-slice"  # the slice's name is known only per attempt; placement needs just one


def slice_hosts(accelerator_type: str, name: str = SLICE) -> list[Worker]:
    """The hosts of one slice of `accelerator_type` as workers (ValueError for an unknown type)."""
    hosts = shape(accelerator_type).hosts
    return [Worker(f"{name}-w{i}", tpu_host_attributes(name, i, "", hosts, accelerator_type), Resources(1, None, 0))
            for i in range(hosts)]


def place_on_slice(spec: RunSpec) -> tuple[int, ...]:
    """The tpu-worker-id of the host each task runs on (task i -> entry i); ValueError saying why
    the slice cannot take the run."""
    assert spec.tpu is not None
    workers = slice_hosts(spec.tpu)
    count = len(workers)
    if spec.replicas not in (1, count):
        raise ValueError(f"--replicas {spec.replicas}: a {spec.tpu} slice runs one task on each of its {count} "
                         f"host{'s' if count != 1 else ''}; use --replicas {count} or leave it out")
    if spec.group_by not in (None, GROUP):
        raise ValueError(f"--group-by {spec.group_by}: the hosts of a TPU slice are grouped by {GROUP} only")
    job = Job("run", Resources(1, None, 0), tuple(parse(text) for text in spec.constraints),
              tuple(spec.tolerations), GROUP if count > 1 else None, count)
    tasks = [Task(f"run/{i}", "run", i) for i in range(count)]
    result = find_assignments(tasks, workers, lambda _job_id: job)
    if len(result.assignments) != count:
        why = next(iter(result.waiting.values()), "no room")
        raise ValueError(f"a {spec.tpu} slice cannot take this run: {why}")
    host_of = {a.task_id: int(a.worker_id.rsplit("-w", 1)[1]) for a in result.assignments}
    return tuple(host_of[task.task_id] for task in tasks)
