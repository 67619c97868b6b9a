"""Function runs on the real Slurm test cluster (tests/slurm): a round trip, and a checkpointable call preempted.

Preemption is what Slurm does to a job: SIGUSR1 to the batch shell (the
wrapper) first, as `--signal=B:USR1@...` does before a time limit, then
`scancel`, which sends SIGTERM to the job's processes and ends the job
CANCELLED, a preemption to fray.
"""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

import fray
from conftest import wait_until
from fray import report
from fray.state import store
from fray.state.layout import Home
from tests.slurm.fixture import SlurmCluster

import cloudpickle  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the jobs cannot import this module

pytestmark = pytest.mark.slow

FAST = {"poll_interval_sec": 0.5, "min_snapshot_interval_sec": 0.3, "command_timeout_sec": 20, "sinfo_ttl_sec": 2}


@pytest.fixture(autouse=True)
def slurm_home(slurm_cluster: SlurmCluster, home: Home):
    """A FRAY_HOME polling the test cluster fast; its Slurm jobs are cancelled afterwards."""
    store.ensure_home(home)
    home.config.write_text(json.dumps({"slurm": FAST}))
    yield home
    ours = [line.split("|")[0] for line in slurm_cluster.run("squeue", "-h", "-o", "%i|%j").stdout.splitlines()
            if any(f"fray-{run_id}-" in line for run_id in home.run_ids())]
    if ours:
        slurm_cluster.run("scancel", *ours, check=False)


def meta_of(home: Home, run_id: str) -> dict:
    return json.loads(home.run(run_id).meta.read_text())


def total_on_a_node(numbers: list[int]) -> tuple[str, str, int]:
    return os.environ["SLURMD_NODENAME"], os.environ["SLURM_JOB_ID"], sum(numbers)


def test_a_function_round_trips_on_slurm(home, daemon, slurm_cluster):
    future = fray.submit(total_on_a_node, [1, 2, 3], backend="slurm",
                         resources={"cpus": 2, "mem": "100M", "time": "5m"})
    node, job_id, total = future.result(timeout=120)
    assert node in slurm_cluster.nodes and total == 6
    meta = meta_of(home, future.run_id)
    assert meta["spec"]["backend"] == "slurm" and meta["attempts"][0]["backend_ref"]["job_id"] == job_id
    assert "#SBATCH --time=5\n" in home.run(future.run_id).attempt(1).slurm_script.read_text()


class Train:
    """Counts steps; checkpointable: its checkpoint is itself, at the step it has reached."""

    def __init__(self) -> None:
        self.step = 0
        self.starts: list[int] = []

    def __call__(self, steps: int) -> dict:
        self.starts = [*self.starts, self.step]
        while self.step < steps:
            self.step += 1
            report.progress(step=self.step)
            time.sleep(0.05)  # the job's own pace
        return {"step": self.step, "starts": self.starts, "attempt": int(os.environ["FRAY_ATTEMPT"])}

    def checkpoint(self, steps: int) -> fray.Call:
        return fray.Call(self, steps)


def step_of(home: Home, run_id: str, attempt: int) -> int:
    try:
        return json.loads(home.run(run_id).attempt(attempt).progress.read_text())["step"] or 0
    except (OSError, ValueError):
        return 0


def test_a_checkpointable_function_preempted_by_scancel_resumes_from_its_checkpoint(home, daemon, slurm_cluster):
    future = fray.submit(Train(), 400, backend="slurm", max_retries_preemption=2)
    wait_until(lambda: step_of(home, future.run_id, 1) >= 20, timeout=60, what="attempt 1 to train 20 steps")
    job_id = meta_of(home, future.run_id)["attempts"][0]["backend_ref"]["job_id"]
    first = home.run(future.run_id).attempt(1)
    slurm_cluster.run("scancel", "--signal=USR1", "--batch", job_id)  # the warning before a time limit
    wait_until(first.resume_call.exists, timeout=15, what="the checkpoint on SIGUSR1")
    assert not future.done()  # a warning: the call goes on
    slurm_cluster.run("scancel", job_id)  # the preemption itself
    result = future.result(timeout=180)
    assert result["attempt"] == 2 and result["step"] == 400
    assert result["starts"][0] == 0 and result["starts"][1] >= 20, result  # attempt 2 went on from the checkpoint
    stderr = first.stderr.read_text()
    assert "SIGUSR1: checkpoint 1 saved" in stderr and "SIGTERM: checkpoint 2 saved" in stderr, stderr
    meta = meta_of(home, future.run_id)
    assert meta["attempts"][0]["cause"] == "preempted" and meta["counters"]["workload_failures"] == 0
    assert "resuming the call checkpointed by attempt 1" in home.run(future.run_id).attempt(2).stderr.read_text()


def where_it_ran(x: int) -> tuple[str, str, int, int]:
    return os.environ["SLURM_ARRAY_JOB_ID"], os.environ["SLURM_ARRAY_TASK_ID"], os.getpid(), x * x


def test_a_chunked_map_runs_each_chunk_as_one_task_of_one_job_array(home, daemon, slurm_cluster):
    futures = fray.map(where_it_ran, range(7), backend="slurm", chunk=3, resources={"cpus": 1, "mem": "100M"})
    said = [f.result(timeout=180) for f in futures]
    assert [s[3] for s in said] == [x * x for x in range(7)]
    assert len({s[0] for s in said}) == 1  # one array
    by_chunk = [said[0:3], said[3:6], said[6:]]
    assert [{(s[1], s[2]) for s in chunk} for chunk in by_chunk] == [{(str(i), chunk[0][2])} for i, chunk in
                                                                     enumerate(by_chunk)]  # one task, one process each
    runs = sorted({f.run_id for f in futures})
    refs = [meta_of(home, run_id)["attempts"][0]["backend_ref"] for run_id in runs]
    assert [r["array_index"] for r in refs] == [0, 1, 2] and {r["array_job_id"] for r in refs} == {said[0][0]}
