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
