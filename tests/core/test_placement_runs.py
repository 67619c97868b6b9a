"""The scheduler meets runs: specs as jobs, the local machine as a worker, Slurm's options (pure)."""

from __future__ import annotations

import pytest

from fray.core.model import Applied, Counters, Meta, RunSpec
from fray.core.placement import Resources, Worker, parse
from fray.core.placement.attributes import local_attributes
from fray.core.placement.runs import job_for, place_on_machine
from fray.core.placement.slurm import to_slurm
from fray.core.capacity import Capacity, Request
from fray.core.scheduler import Ledger
from fray.errors import UsageError


def meta(run_id: str, created_at: float, **spec: object) -> Meta:
    return Meta(run_id=run_id, name=run_id, created_at=created_at, submitted_by={"user": "ann", "host": "h"},
                script={}, spec=RunSpec(**spec), phase="queued", attempts=[], counters=Counters(),  # type: ignore[arg-type]
                applied=Applied())


MACHINE = Worker("vm", local_attributes("vm", 8, 32768, 2, "NVIDIA H100 80GB HBM3"), Resources(8, 32768, 2))


def test_a_run_with_replicas_asks_for_all_of_them_on_one_machine() -> None:
    job = job_for(meta("r", 1.0, cpus=2, gpus=1, mem_mb=1024, replicas=3))
    assert job.resources == Resources(6, 3072, 3) and job.replicas == 1
    grouped = job_for(meta("g", 1.0, cpus=2, replicas=4, group_by="tpu-name"))
    assert grouped.resources == Resources(2, None, 0) and grouped.replicas == 4


def test_production_runs_go_first_on_the_machine_and_constraints_say_why_not() -> None:
    runs = [meta("old-batch", 1.0, cpus=8, priority="batch"), meta("new-prod", 2.0, cpus=8, priority="production"),
            meta("a100", 3.0, constraints=["gpu-type=a100"])]
    result = place_on_machine(runs, MACHINE, now=10.0)
    assert [a.task_id for a in result.assignments] == ["new-prod/0"]
    assert result.waiting["a100/0"] == "no worker with gpu-type=a100"
    assert result.waiting["old-batch/0"].startswith("waiting for resources")


def test_a_coscheduled_run_never_fits_one_machine() -> None:
    result = place_on_machine([meta("g", 1.0, replicas=2, group_by="hostname")], MACHINE, now=0.0)
    assert result.waiting == {"g/0": "no hostname group has 2 workers (the largest has 1)",
                              "g/1": "no hostname group has 2 workers (the largest has 1)"}


def test_ledger_explains_without_reserving() -> None:
    ledger = Ledger(Capacity(4, None, 0))
    assert ledger.explain(Request(4, None, 0)) == ""
    assert "can never start here" in ledger.explain(Request(16, None, 0))
    assert ledger.admit(Request(4, None, 0)).admitted  # explain took nothing


def test_constraints_as_sbatch_options() -> None:
    placed = to_slurm([parse(c) for c in ["feature:ib", "feature:nvme", "partition in (gpu, gpu-long)",
                                           "hostname!=bad1", "gpu-type=h100"]])
    assert placed.constraint == "ib&nvme" and placed.partitions == ("gpu", "gpu-long")
    assert placed.exclude == ("bad1",) and placed.gpu_type == "h100"
    assert to_slurm([parse("hostname=n3")]).nodelist == ("n3",)
    with pytest.raises(UsageError, match="cannot place on constraint memory-gb>=80: sbatch can express feature"):
        to_slurm([parse("memory-gb>=80")])


def test_credits_count_attempts_inside_the_window() -> None:
    from fray.core.model import Attempt
    from fray.core.placement.runs import credits_from

    used = meta("r", 0.0, cpus=1, gpus=1)
    used.attempts = [Attempt(number=1, state="ended", backend="local", submitted_at=0.0, started_at=0.0,
                             ended_at=3600.0),
                     Attempt(number=2, state="running", backend="local", submitted_at=7200.0, started_at=7200.0)]
    config = {"priority": {"credit_hours": 10.0, "window_sec": 7200.0}}
    credits = credits_from(config, [used], now=9000.0)  # window from 1800: half of attempt 1, 1800 s of attempt 2
    assert credits.remaining("ann") == pytest.approx(10.0 - 9 * (1800 + 1800) / 3600)
    assert credits_from({}, [used], now=9000.0).budget is None  # no section: credits are off


def test_local_replicas_stop_together() -> None:
    from fray.backends.local.replicas import gpu_share, task_index, to_stop

    assert to_stop(3, {0: 10, 1: 11, 2: 12}, {}) == []  # all running
    assert to_stop(3, {0: 10, 2: 12}, {1: 0}) == []  # task 1 finished well
    assert to_stop(3, {0: 10, 2: 12}, {1: 50}) == [0, 2]  # task 1 failed: the rest go
    assert to_stop(3, {2: 12}, {0: 0, 1: 0}) == []  # task 0 succeeded: task 2 may finish (the daemon waits)
    assert to_stop(3, {2: 12}, {0: 50, 1: 0}) == [2]  # task 0 (the attempt) failed
    assert to_stop(3, {1: 11, 2: 12}, {0: None}) == [1, 2]  # task 0 vanished without an exit record
    assert to_stop(3, {0: 10, 2: 12}, {1: None}) == [0, 2]  # task 1 vanished without an exit record
    assert gpu_share((4, 5, 6, 7), 1, 2) == (6, 7)
    assert task_index("/h/runs/r/attempts/3/tasks/2", 3) == 2 and task_index("/h/runs/r/attempts/3", 3) == 0


SINFO = """\
n1|cpu*|up|idle|4|2000|gpu:a100:2(S:0)|(null)
n3|cpu*|up|idle|4|2000|gpu:h100:4|ib,nvme
n3|h100|up|idle|4|2000|gpu:h100:4|ib,nvme
n4|h100|up|mixed|4|2000|gpu:h100:4|ib,nvme
"""


def test_slurm_nodes_from_sinfo_say_which_runs_no_node_could_ever_take() -> None:
    from fray.backends.slurm import node_workers, partitions
    from fray.core.placement.runs import never_placeable

    nodes = node_workers.workers(partitions.parse_sinfo(SINFO))
    assert nodes[1].attributes["feature:nvme"] == 1 and nodes[1].attributes["partition"] == "cpu"
    runs = [meta("ib", 0.0, constraints=["feature:ib"], gpus=4), meta("ssd", 0.0, constraints=["feature:ssd"]),
            meta("wide", 0.0, replicas=3, constraints=["feature:ib"]), meta("a100", 0.0, partitions=["h100"],
                                                                              constraints=["gpu-type=a100"]),
            meta("late", 0.0, cpus=8, scheduling_timeout_sec=60.0)]
    never = never_placeable(runs, nodes, now=30.0)
    assert "ib" not in never
    assert never["ssd"].reason == "no worker with feature:ssd" and not never["ssd"].timed_out
    # Three tasks need three machines; n3 is listed twice (two partitions) but is one.
    assert never["wide"].reason == "only 2 workers with feature:ib have 1 CPU in all; 3 are needed"
    assert never["a100"].reason == "no worker with gpu-type=a100 and partition in (h100) together"
    assert never["late"].reason == "no worker has 8 CPUs in all (4 match)" and not never["late"].timed_out
    assert never_placeable(runs, nodes, now=61.0)["late"].timed_out
    assert never_placeable(runs, nodes, now=61.0)["late"].reason == \
        "not placed within 1m: no worker has 8 CPUs in all (4 match)"
