"""The pure scheduler: the checkpoints of the controller and coscheduling designs, and properties.

Checkpoints: FIFO order, skip non-pending, constraint filter, atomic coscheduling,
waits when too few workers, sibling kill, priority bands, timeouts. Properties
(hypothesis): capacity is never over-committed, a coscheduled job is all or
nothing, the output is deterministic, and posting lists answer as a linear scan.
"""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from fray.core.placement import (Band, Credits, Job, Resources, Task, TaskEnd, Worker, find_assignments, parse,
                                 reporting_task, siblings_finishing)
from fray.core.placement.attributes import taint, tpu_host_attributes


def worker(name: str, cpus: int = 4, gpus: int = 0, mem_mb: int | None = None, **attributes: object) -> Worker:
    return Worker(name, {k.replace("_", "-"): v for k, v in attributes.items()}, Resources(cpus, mem_mb, gpus))  # type: ignore[misc]


def job(job_id: str, cpus: int = 1, gpus: int = 0, constraints: tuple[str, ...] = (), **fields: object) -> Job:
    return Job(job_id, Resources(cpus, None, gpus), tuple(parse(c) for c in constraints), **fields)  # type: ignore[arg-type]


def place(tasks: list[Task], workers: list[Worker], jobs: list[Job], **kwargs: object) -> dict[str, str]:
    by_id = {j.job_id: j for j in jobs}
    result = find_assignments(tasks, workers, by_id.__getitem__, **kwargs)  # type: ignore[arg-type]
    return {a.task_id: a.worker_id for a in result.assignments}


def test_fifo_order_within_a_band() -> None:
    jobs = [job("new", cpus=4, submitted_at=2.0), job("old", cpus=4, submitted_at=1.0)]
    placed = place([Task("new-0", "new"), Task("old-0", "old")], [worker("w", cpus=4)], jobs)
    assert placed == {"old-0": "w"}  # the older job gets the only room


def test_skips_tasks_that_are_not_pending() -> None:
    jobs = [job("j", cpus=2)]
    tasks = [Task("j-0", "j", 0, state="running"), Task("j-1", "j", 1)]
    result = find_assignments(tasks, [worker("w", cpus=2)], {"j": jobs[0]}.__getitem__)
    assert {a.task_id for a in result.assignments} == {"j-1"}
    assert "j-0" not in result.waiting


def test_constraint_filter_and_the_reason_when_nothing_matches() -> None:
    workers = [worker("a100", gpus=8, gpu_type="a100"), worker("h100", gpus=8, gpu_type="h100")]
    jobs = [job("j", gpus=1, constraints=("gpu-type=h100",)), job("k", gpus=1, constraints=("gpu-type=v100",))]
    result = find_assignments([Task("j-0", "j"), Task("k-0", "k")], workers, {j.job_id: j for j in jobs}.__getitem__)
    assert [(a.task_id, a.worker_id) for a in result.assignments] == [("j-0", "h100")]
    assert result.waiting == {"k-0": "no worker with gpu-type=v100"}


def test_capacity_is_deducted_within_a_cycle() -> None:
    tasks = [Task(f"j-{i}", "j", i) for i in range(3)]
    result = find_assignments(tasks, [worker("w", cpus=4)], {"j": job("j", cpus=2)}.__getitem__)
    assert len(result.assignments) == 2
    assert result.waiting["j-2"] == "waiting for resources: no worker has 2 CPUs free (1 match)"


def test_taints_are_avoided_unless_tolerated() -> None:
    workers = [worker("spot", **{taint("spot"): 1})]
    result = find_assignments([Task("j-0", "j")], workers, {"j": job("j")}.__getitem__)
    assert not result.assignments and "tolerate it (--tolerate spot)" in result.waiting["j-0"]
    assert place([Task("j-0", "j")], workers, [job("j", tolerations=("spot",))]) == {"j-0": "spot"}


def test_priority_bands_come_before_age_and_spent_credits_demote() -> None:
    jobs = [job("batch", cpus=4, band=Band.BATCH, submitted_at=1.0, user="ann"),
            job("prod", cpus=4, band=Band.PRODUCTION, submitted_at=9.0, user="bob")]
    tasks = [Task("batch-0", "batch"), Task("prod-0", "prod")]
    assert place(tasks, [worker("w", cpus=4)], jobs) == {"prod-0": "w"}
    spent = Credits(budget=1.0, usage={"bob": 5.0})  # bob's production work is placed as batch, after ann's
    result = find_assignments(tasks, [worker("w", cpus=4)], {j.job_id: j for j in jobs}.__getitem__, credits=spent)
    assert [a.task_id for a in result.assignments] == ["batch-0"] and result.bands["prod"] is Band.BATCH


def test_scheduling_timeout_makes_a_task_unschedulable_with_its_reason() -> None:
    jobs = [job("j", constraints=("gpu-type=h100",), scheduling_timeout_sec=60)]
    tasks = [Task("j-0", "j", pending_since=0.0)]
    early = find_assignments(tasks, [worker("w")], {"j": jobs[0]}.__getitem__, now=30.0)
    assert not early.timed_out and early.waiting == {"j-0": "no worker with gpu-type=h100"}
    late = find_assignments(tasks, [worker("w")], {"j": jobs[0]}.__getitem__, now=61.0)
    assert [(u.task_id, u.reason) for u in late.timed_out] == [("j-0", "not placed within 1m: no worker with gpu-type=h100")]


def slices(*sizes: int) -> list[Worker]:
    return [Worker(f"s{n}-w{i}", tpu_host_attributes(f"s{n}", i, "2x2", size), Resources(8, None, 0))
            for n, size in enumerate(sizes) for i in reversed(range(size))]


def test_atomic_coscheduling_task_i_on_the_ith_worker_of_one_slice() -> None:
    tasks = [Task(f"j-{i}", "j", i) for i in range(4)]
    placed = place(tasks, slices(2, 4), [job("j", group_by="tpu-name", replicas=4)])
    assert placed == {f"j-{i}": f"s1-w{i}" for i in range(4)}  # the 2-host slice is too small


def test_coscheduled_job_waits_when_too_few_workers() -> None:
    tasks = [Task(f"j-{i}", "j", i) for i in range(4)]
    jobs = [job("j", group_by="tpu-name", replicas=4)]
    result = find_assignments(tasks, slices(2, 3), {"j": jobs[0]}.__getitem__)
    assert not result.assignments
    assert set(result.waiting.values()) == {"no tpu-name group has 4 workers (the largest has 3)"}


def test_coscheduled_job_waits_for_all_its_tasks_to_be_pending() -> None:
    tasks = [Task("j-0", "j", 0), Task("j-1", "j", 1, state="running")]
    result = find_assignments(tasks, slices(2), {"j": job("j", group_by="tpu-name", replicas=2)}.__getitem__)
    assert not result.assignments and "waiting for all 2 tasks" in result.waiting["j-0"]


def test_a_failed_group_is_reported_by_the_task_that_failed_not_the_siblings_killed_with_it() -> None:
    def end(index: int, code: int, at: float, **more: object) -> TaskEnd:
        return TaskEnd(index, {"exit_code": code, "ended_at": at, **more}, {"message": f"task {index}"})

    killed0 = end(0, 50, 12.0, workload_signal="SIGKILL")
    failed1, killed2 = end(1, 50, 11.0, workload_exit_code=3), end(2, 50, 11.5, workload_signal="SIGKILL")
    assert reporting_task(killed0, [killed2, failed1], 3) == (failed1, "task 1 of 3: ")
    # Slurm's srun --kill-on-bad-exit terminates task 0's wrapper: still task 1's failure, never a preemption.
    terminated0 = end(0, 143, 10.0, received_signal="SIGTERM")
    assert reporting_task(terminated0, [failed1], 2)[0] == failed1
    # Only killed tasks (out of memory, say): the first one killed.
    assert reporting_task(killed0, [killed2], 3) == (killed2, "task 2 of 3: ")
    assert reporting_task(end(0, 50, 9.0), [failed1], 3) == (end(0, 50, 9.0), "task 0 of 3: ")
    # Task 0 succeeded: a sibling stopped after it is no failure of the group; one task needs no prefix.
    assert reporting_task(end(0, 0, 12.0), [failed1], 3) == (end(0, 0, 12.0), "")
    assert reporting_task(killed0, [], 1) == (killed0, "")
    # Task 0 killed before it wrote its record (srun ended it during startup): task 1 still speaks, a
    # task that was only killed does not (the backend's reading stands).
    assert reporting_task(None, [killed2, failed1], 3) == (failed1, "task 1 of 3: ")
    assert reporting_task(None, [killed2], 3) == (None, "")


def test_a_group_whose_task_0_succeeded_waits_for_its_other_tasks_within_the_stop_grace() -> None:
    done0, done1 = TaskEnd(0, {"exit_code": 0, "ended_at": 100.0}), TaskEnd(1, {"exit_code": 0, "ended_at": 101.0})
    assert siblings_finishing(done0, [], 3, gone=False, now=105.0, grace_sec=30.0)
    assert siblings_finishing(done0, [done1], 3, gone=False, now=105.0, grace_sec=30.0)  # task 2 still runs
    assert not siblings_finishing(done0, [done1, TaskEnd(2, {"exit_code": 50})], 3, False, 105.0, 30.0)
    assert not siblings_finishing(done0, [done1], 3, gone=False, now=130.0, grace_sec=30.0)  # the grace is up
    assert not siblings_finishing(done0, [], 3, gone=True, now=105.0, grace_sec=30.0)  # the backend says all ended
    assert not siblings_finishing(done0, [], 1, gone=False, now=105.0, grace_sec=30.0)  # one task: nothing to wait
    assert not siblings_finishing(TaskEnd(0, {"exit_code": 50, "ended_at": 100.0}), [], 3, False, 105.0, 30.0)


# ---- properties ---------------------------------------------------------------------------------

GPU_TYPES = ["a100", "h100"]
ZONES = ["a", "b", "c"]
CONSTRAINTS = ["gpu-type=h100", "gpu-type!=a100", "zone in (a, b)", "memory-gb>=64", "memory-gb<64",
               "tpu-name", "!tpu-name", "cpu-count>2", "zone=c"]


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Worker], list[Job], list[Task]]:
    workers = []
    for i in range(draw(st.integers(0, 12))):
        # memory-gb is sometimes a float or (misconfigured) a string: the scan, and its type errors, get exercised
        attributes: dict[str, object] = {"cpu-count": draw(st.integers(1, 8)), "zone": draw(st.sampled_from(ZONES)),
                                         "memory-gb": draw(st.sampled_from([32, 64, 128, 64.0, "64"]))}
        if draw(st.booleans()):
            attributes["gpu-type"] = draw(st.sampled_from(GPU_TYPES))
        if draw(st.booleans()):
            attributes["tpu-name"] = draw(st.sampled_from(["s0", "s1"]))
            attributes["tpu-worker-id"] = i
        if draw(st.integers(0, 5)) == 0:
            attributes[taint("spot")] = 1
        cpus = int(attributes["cpu-count"])  # type: ignore[call-overload]
        workers.append(Worker(f"w{i}", attributes, Resources(cpus, draw(st.sampled_from([None, 4096, 8192])),
                                                             draw(st.integers(0, 4)))))  # type: ignore[arg-type]
    jobs, tasks = [], []
    for j in range(draw(st.integers(0, 8))):
        grouped = draw(st.booleans())
        replicas = draw(st.integers(1, 4))
        jobs.append(Job(f"j{j}", Resources(draw(st.integers(1, 4)), draw(st.sampled_from([None, 2048, 4096])),
                                           draw(st.integers(0, 2))),
                        tuple(parse(c) for c in draw(st.lists(st.sampled_from(CONSTRAINTS), max_size=2))),
                        ("spot",) if draw(st.booleans()) else (), "tpu-name" if grouped else None, replicas,
                        draw(st.sampled_from(list(Band))), draw(st.sampled_from(["ann", "bob"])),
                        draw(st.floats(0, 100))))
        tasks += [Task(f"j{j}-{i}", f"j{j}", i, draw(st.sampled_from(["pending"] * 4 + ["running"])))
                  for i in range(replicas)]
    return workers, jobs, draw(st.permutations(tasks))


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_properties(cluster: tuple[list[Worker], list[Job], list[Task]]) -> None:
    workers, jobs, tasks = cluster
    by_id = {j.job_id: j for j in jobs}
    before = copy.deepcopy((workers, jobs, tasks))
    result = find_assignments(tasks, workers, by_id.__getitem__)
    assert (workers, jobs, tasks) == before  # never mutates its input

    # capacity is never over-committed
    job_of = {t.task_id: by_id[t.job_id] for t in tasks}
    free = {w.worker_id: w.free for w in workers}
    used: dict[str, list[int]] = {w.worker_id: [0, 0, 0] for w in workers}
    for a in result.assignments:
        need = job_of[a.task_id].resources
        used[a.worker_id][0] += need.cpus
        used[a.worker_id][1] += need.mem_mb or 0
        used[a.worker_id][2] += need.gpus
    for name, (cpus, mem, gpus) in used.items():
        assert cpus <= free[name].cpus and gpus <= free[name].gpus
        assert free[name].mem_mb is None or mem <= free[name].mem_mb

    # constraints and taints hold on every assignment; only pending tasks are placed, once each
    attrs = {w.worker_id: w.attributes for w in workers}
    state = {t.task_id: t.state for t in tasks}
    assert len({a.task_id for a in result.assignments}) == len(result.assignments)
    for a in result.assignments:
        assert state[a.task_id] == "pending"
        spec = job_of[a.task_id]
        assert all(c.matches(attrs[a.worker_id]) for c in spec.constraints if c.key != "memory-gb"
                   or not isinstance(attrs[a.worker_id].get("memory-gb"), str))
        assert taint("spot") not in attrs[a.worker_id] or "spot" in spec.tolerations

    # a coscheduled job is all or nothing, on one group, one task per worker, task i on the i-th worker id
    for spec in jobs:
        if not spec.group_by:
            continue
        mine = sorted((t.index, a.worker_id) for a in result.assignments for t in tasks
                      if t.task_id == a.task_id and t.job_id == spec.job_id)
        assert len(mine) in (0, spec.replicas)
        if mine:
            assert len({attrs[w]["tpu-name"] for _, w in mine}) == 1
            ids = [attrs[w]["tpu-worker-id"] for _, w in mine]
            assert ids == sorted(ids) and len(set(ids)) == len(ids)

    # a worker whose memory-gb is a string never takes a job comparing it with a number
    for a in result.assignments:
        if isinstance(attrs[a.worker_id].get("memory-gb"), str):
            assert not any(c.key == "memory-gb" and c.op.name in ("GE", "LT") for c in job_of[a.task_id].constraints)

    # every pending task is placed or has a reason; deterministic; posting lists answer as a linear scan
    placed = {a.task_id for a in result.assignments}
    for t in tasks:
        if t.state == "pending":
            assert (t.task_id in placed) != (t.task_id in result.waiting)
    assert find_assignments(list(tasks), list(workers), by_id.__getitem__) == result
    assert find_assignments(tasks, workers, by_id.__getitem__, index="linear") == result


def test_a_type_mismatch_is_the_reason_not_a_crash() -> None:
    workers = [worker("w", **{"memory-gb": "eighty"})]
    result = find_assignments([Task("j-0", "j")], workers, {"j": job("j", constraints=("memory-gb>=64",))}.__getitem__)
    assert not result.assignments
    assert "compares a number with w's memory-gb='eighty'" in result.waiting["j-0"]
