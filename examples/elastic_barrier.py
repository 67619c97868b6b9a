#!/usr/bin/env python3
#FRAY --name elastic-barrier
# The driver only waits on the jobs it launches: it holds no core (--cpus 0).
#FRAY --cpus 0 --heartbeat-interval 2
"""Use case 5: an elastic barrier across slices.

The coordinator hosts a barrier actor; slices are launched as one job group
(all start together or none does). Every step, each slice waits at the
barrier until every member still in the job has arrived. One slice leaves
after step 2 (as a preempted slice would): the barrier shrinks and the others
go on without waiting for it.

    python examples/elastic_barrier.py
    fray submit examples/elastic_barrier.py --wait
"""

import threading

from fray import (ActorServer, ClusterResolver, Entrypoint, JobGroupConfig, JobRequest, ResourceConfig,
                      current_cluster)

# These jobs do almost no computing (they wait on each other), so they reserve no
# core and the example runs on a 2-core laptop; a real job asks for what it uses.
DEMO_RESOURCES = ResourceConfig(cpus=0)

SLICES = 3
STEPS = 4


class ElasticBarrier:
    """Members join and leave; `wait(step)` returns once every current member reached `step`."""

    def __init__(self) -> None:
        self.members: set[int] = set()
        self.arrived: dict[int, set[int]] = {}
        self.released: dict[int, int] = {}  # step -> how many members it released
        self.changed = threading.Condition()

    def join(self, ctx, member: int) -> int:
        with self.changed:
            self.members.add(member)
            self.changed.notify_all()
            return len(self.members)

    def leave(self, ctx, member: int) -> int:
        with self.changed:
            self.members.discard(member)
            self.changed.notify_all()
            return len(self.members)

    def wait(self, ctx, step: int, member: int, timeout: float = 60.0) -> int:
        with self.changed:
            self.arrived.setdefault(step, set()).add(member)
            self.changed.notify_all()
            if not self.changed.wait_for(lambda: self._is_released(step), timeout):
                raise TimeoutError(f"step {step}: still waiting for {sorted(self.members - self.arrived[step])}")
            return self.released[step]

    def _is_released(self, step: int) -> bool:
        # The size is taken the moment the step releases, not when each waiter wakes:
        # a member may leave between the two, and every waiter must report the same size.
        if step not in self.released and self.members <= self.arrived[step]:
            self.released[step] = len(self.members)
        return step in self.released


def slice_job(member: int) -> list[int]:
    """One slice: join, then step in lockstep with the others; slice 0 leaves after step 2."""
    barrier = ClusterResolver(current_cluster()).lookup("barrier")
    barrier.wait_for_size(1, timeout=120)
    barrier.call().join(member)
    barrier.call().wait(0, member)  # everyone has joined
    sizes = []
    for step in range(1, STEPS + 1):
        if member == 0 and step == 3:
            barrier.call().leave(member)
            break
        sizes.append(barrier.call().wait(step, member))
    return sizes


def main() -> None:
    cluster = current_cluster()
    server = ActorServer(cluster)
    barrier = ElasticBarrier()
    barrier.members = set(range(SLICES))  # the slices of the group, before any has joined
    server.register("barrier", barrier, max_concurrency=SLICES + 1)  # waits block: serve them side by side
    server.serve_background()
    group = JobGroupConfig("slices", [JobRequest(f"slice-{i}", Entrypoint.from_callable(slice_job, (i,)),
                                                 resources=DEMO_RESOURCES) for i in range(SLICES)])
    jobs = cluster.launch_group(group)
    for i, info in enumerate(cluster.wait(jobs, raise_on_failure=True, timeout=300)):
        print(f"slice {i}: barrier sizes per step {info.result}", flush=True)
    print("coordinator: all slices finished", flush=True)
    server.shutdown(grace=1.0)


if __name__ == "__main__":
    main()
