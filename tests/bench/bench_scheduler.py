"""Benchmark: one scheduling cycle, 10,000 workers x 50,000 pending tasks (target: median <= 1 s).

`find_assignments` with posting lists, printed beside the same cycle with every
constraint checked by a linear scan, measured in the same run on the same input,
taken in turn. The input is mixed: GPU nodes of four types in eight zones and
200 racks, TPU slices of four hosts, 5% of nodes tainted `spot`; jobs ask for a
GPU type, a zone list, a rack, a host, memory above a size, or nothing; a tenth
are coscheduled over `tpu-name`; three priority bands, two users; tasks of the first 1,400 jobs
have waited past their one-hour scheduling timeout.

    python tests/bench/bench_scheduler.py [--workers 10000] [--tasks 50000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import report  # noqa: E402

from fray.core.placement import Band, Job, Resources, Task, Worker, find_assignments, parse  # noqa: E402
from fray.core.placement.attributes import taint, tpu_host_attributes  # noqa: E402

GPU_TYPES = ["a100", "h100", "l4", "v100"]
ZONES = [f"zone-{z}" for z in "abcdefgh"]


def build(workers: int, tasks: int, seed: int = 7) -> tuple[list[Worker], list[Task], Callable[[str], Job]]:
    rng = random.Random(seed)
    tpu_hosts = workers // 5 // 4 * 4
    fleet: list[Worker] = []
    for i in range(tpu_hosts):
        fleet.append(Worker(f"tpu-{i}", {**tpu_host_attributes(f"slice-{i // 4}", i % 4, "2x2", 4, "v5p-16"),
                                         "zone": rng.choice(ZONES)}, Resources(96, 400_000, 0)))
    for i in range(workers - tpu_hosts):
        attributes: dict[str, str | int | float] = {
            "hostname": f"node{i:05d}", "zone": rng.choice(ZONES), "rack": i % 200, "cpu-count": 64,
            "memory-gb": rng.choice([256, 512, 1024]), "gpu-count": 8, "gpu-type": rng.choice(GPU_TYPES)}
        if rng.random() < 0.05:
            attributes[taint("spot")] = 1
        fleet.append(Worker(f"node{i:05d}", attributes, Resources(64, 1024 * int(attributes["memory-gb"]), 8)))
    rng.shuffle(fleet)
    nodes = [w for w in fleet if "hostname" in w.attributes and "tpu-name" not in w.attributes]
    jobs: dict[str, Job] = {}
    pending: list[Task] = []
    j = 0
    while len(pending) < tasks:
        kind = rng.random()
        replicas, group_by, constraints, tolerations = rng.choice([1, 2, 5, 8]), None, [], ()
        need = Resources(rng.choice([1, 4, 8]), rng.choice([None, 16_384, 65_536]), rng.choice([0, 1, 2, 8]))
        if kind < 0.10:
            replicas, group_by, need = 4, "tpu-name", Resources(8, None, 0)
            constraints = ["tpu-type=v5p-16"]
        elif kind < 0.35:
            constraints = [f"gpu-type={rng.choice(GPU_TYPES + ['b200'])}"]
        elif kind < 0.50:
            constraints = [f"zone in ({', '.join(rng.sample(ZONES, 2))})", "gpu-type=h100"]
        elif kind < 0.65:
            constraints = [f"rack={rng.randrange(200)}"]
        elif kind < 0.70:
            constraints = [f"hostname={rng.choice(nodes).worker_id}"]
        elif kind < 0.85:
            constraints = [f"memory-gb>={rng.choice([256, 512, 1024])}", f"zone={rng.choice(ZONES)}"]
        if rng.random() < 0.05:
            tolerations = ("spot",)
        if len(pending) + replicas > tasks:  # exactly `tasks` in all: the last job is cut to fit
            replicas, group_by, constraints, need = tasks - len(pending), None, [], Resources(1, None, 0)
        job_id = f"job{j:05d}"
        jobs[job_id] = Job(job_id, need, tuple(parse(c) for c in constraints), tolerations, group_by, replicas,
                           rng.choice(list(Band)), rng.choice(["ann", "bob"]), float(j), 3600.0)
        pending += [Task(f"{job_id}-{i}", job_id, i, pending_since=float(j)) for i in range(replicas)]
        j += 1
    return fleet, pending, jobs.__getitem__


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=10_000)
    parser.add_argument("--tasks", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=5, help="cycles with posting lists")
    parser.add_argument("--baseline-repeats", type=int, default=1, help="cycles with the linear scan (~30 s each)")
    args = parser.parse_args()
    workers, tasks, get_job = build(args.workers, args.tasks)
    print(f"one scheduling cycle: {len(workers)} workers, {len(tasks)} pending tasks ({sys.version.split()[0]})")
    labels = {"linear": "linear scan (baseline), wall", "posting": "posting lists, wall"}
    wall: dict[str, list[float]] = {index: [] for index in labels}
    cpu: dict[str, list[float]] = {index: [] for index in labels}
    results = {}
    for turn in range(max(args.repeats, args.baseline_repeats)):  # in turn, so both see the same machine
        for index in labels:
            if turn >= (args.repeats if index == "posting" else args.baseline_repeats):
                continue
            start, start_cpu = time.perf_counter(), time.process_time()
            results[index] = find_assignments(tasks, workers, get_job, now=5000.0, index=index)  # type: ignore[arg-type]
            wall[index].append(time.perf_counter() - start)
            cpu[index].append(time.process_time() - start_cpu)
    for index, label in labels.items():
        report(label, wall[index], target_ms=1000 if index == "posting" else None)
        report(label.replace("wall", "CPU time"), cpu[index])
    fast, slow = results["posting"], results["linear"]
    if fast != slow:
        raise SystemExit("posting lists and the linear scan disagree")
    print(f"placed {len(fast.assignments)}, waiting {len(fast.waiting)}, timed out {len(fast.timed_out)} "
          "(the same answer from both)")


if __name__ == "__main__":
    main()
