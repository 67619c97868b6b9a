"""The kill matrix on the real Slurm test cluster: SIGKILL and SIGSTOP/SIGCONT of wrapper, workload and daemon.

Each fault, then `fray control stop`, asserting what a user relies on: at most
one attempt's processes alive at any instant (/proc sampled every 20 ms:
the cluster's nodes are processes on this machine, tests/slurm), no write by a
superseded attempt after its fence (its files' times and contents), the
run's final status, and nothing of the run left running. The job-side faults
run side by side, one run each, under one daemon: a fault in one run must not
touch another, and the matrix costs one run's time, not four. The daemon's
faults act on every run it serves, so they get a run of their own.
The local matrix is tests/backends/local/test_process_tree.py; state files corrupted on Slurm,
tests/backends/slurm/test_corrupt_slurm.py.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable

import pytest

from conftest import run_fray, running, start_daemon, stop_daemon, wait_until
from fray.state.layout import Home
from fray.wrapper import tags
from test_fence_slurm import files_of
from tests.backends.local.test_process_tree import TagWatch
from test_slurm_backend import attempt, ended, events, slurm_home, submit, write  # noqa: F401 (slurm_home: autouse)

pytestmark = pytest.mark.slow

# Reports progress (a job-side write the fence must stop), escapes its group twice (setsid, a double fork).
TRAINS = """#FRAY --backend slurm --heartbeat-interval 0.5 --heartbeat-timeout 4 --stop-grace 2 --backoff-base 0
#FRAY --max-retries 5
#SBATCH --time=5
import subprocess
import time
from fray import report
quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
subprocess.Popen(["setsid", "sleep", "300"], **quiet)
subprocess.Popen("(setsid sleep 301 &)", shell=True, **quiet)
step = 0
while True:
    step += 1
    report.progress(step=step)
    time.sleep(0.1)
"""
TREE = 3  # the workload and its two escaped sleeps


def started_tree(home: Home, run_id: str, watch: TagWatch, number: int = 1) -> dict:
    paths = home.run(run_id)
    return wait_until(lambda: attempt(home, run_id, number) and paths.attempt(number).progress.exists()
                      and len(watch.alive(run_id, number)) >= TREE
                      and json.loads(paths.attempt(number).started.read_text()),
                      timeout=60, what=f"attempt {number} of {run_id} and its escaped tree")


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return int(handle.read().rpartition(b")")[2].split()[1])


def closed_at(home: Home, run_id: str, number: int) -> float:
    return next(e["at"] for e in events(home, run_id) if e["kind"] == "attempt_ended" and e["attempt"] == number)


def late_writes(home: Home, run_id: str, number: int) -> dict[str, float]:
    """Files of attempt `number` written after its close (beyond a write whose check passed just before it)."""
    fence = closed_at(home, run_id, number)
    return {name: round(mtime / 1e9 - fence, 3) for name, (_size, mtime) in files_of(home.run(run_id).attempt(number).dir).items()
            if mtime / 1e9 > fence + 0.2 and name not in ("stderr.log", "stdout.log")}


def stop_by_cli(home: Home, run_id: str) -> dict:
    stop = run_fray("control", "stop", run_id, "--json", home=home.root)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    return wait_until(lambda: ended(home, run_id), timeout=40, what=f"{run_id} to stop")


# -- job-side faults: what happens to the attempt, and what must follow --------------------------------------


def _kill_wrapper(started: dict) -> None:
    os.kill(started["pid"], signal.SIGKILL)  # the batch shell dies: Slurm ends the job, its escapees live on


def _freeze_wrapper(started: dict) -> None:
    os.kill(started["pid"], signal.SIGSTOP)  # heartbeat stalls: the daemon closes the attempt, scancels the job


def _kill_workload(started: dict) -> None:
    os.kill(started["workload_pid"], signal.SIGKILL)  # a failure: retried; its escaped children must go too


def _freeze_and_thaw_workload(started: dict) -> None:
    os.kill(started["workload_pid"], signal.SIGSTOP)
    time.sleep(1.0)  # longer than two heartbeat intervals: the wrapper's beat must not depend on its workload
    os.kill(started["workload_pid"], signal.SIGCONT)


# fault -> (what it does, whether it ends attempt 1 and the daemon starts attempt 2)
JOB_FAULTS: dict[str, tuple[Callable[[dict], None], bool]] = {
    "wrapper SIGKILL": (_kill_wrapper, True),
    "wrapper SIGSTOP, SIGCONT after its attempt is closed": (_freeze_wrapper, True),
    "workload SIGKILL": (_kill_workload, True),
    "workload SIGSTOP+SIGCONT": (_freeze_and_thaw_workload, False),
}
FROZEN = "wrapper SIGSTOP, SIGCONT after its attempt is closed"


def test_job_side_faults_side_by_side_one_attempt_at_a_time_and_nothing_written_after_a_fence(home, daemon, tmp_path,
                                                                                                slurm_cluster):
    script = write(tmp_path, "train.py", TRAINS)
    run_ids = {fault: submit(home, script) for fault in JOB_FAULTS}
    frozen: list[int] = []
    with TagWatch(home) as watch:
        try:
            started = {fault: started_tree(home, run_id, watch) for fault, run_id in run_ids.items()}
            # The frozen wrapper's node is frozen too (its job's slurmstepd), so that Slurm cannot kill the job
            # when the daemon cancels it: only the fence stands between the thawed wrapper and its files.
            stepd = parent_of(started[FROZEN]["pid"])
            slurm_cluster.signal(stepd, signal.SIGSTOP)
            frozen.append(stepd)
            for fault, (act, _) in JOB_FAULTS.items():
                act(started[fault])
            frozen.append(started[FROZEN]["pid"])
            wait_until(lambda: attempt(home, run_ids[FROZEN], 1, "ended"), timeout=30,
                       what="the daemon to close the frozen wrapper's attempt")
            os.kill(started[FROZEN]["pid"], signal.SIGCONT)  # its heartbeat thread is due: the fence must stop it
            wait_until(lambda: not running(started[FROZEN]["pid"]), timeout=10, what="the thawed old wrapper to exit")
            slurm_cluster.signal(stepd, signal.SIGCONT)
            for fault, (_, replaced) in JOB_FAULTS.items():
                run_id = run_ids[fault]
                if replaced:
                    started_tree(home, run_id, watch, 2)
                    assert not watch.alive(run_id, 1), f"{fault}: attempt 1 still has processes beside attempt 2"
                else:
                    step = json.loads(home.run(run_id).attempt(1).progress.read_text())["step"]
                    wait_until(lambda: json.loads(home.run(run_id).attempt(1).progress.read_text())["step"] > step,
                               what=f"{fault}: the thawed workload to report again")
                    assert len(json.loads(home.run(run_id).meta.read_text())["attempts"]) == 1, fault
            before = {fault: files_of(home.run(run_ids[fault]).attempt(1).dir) for fault, (_, r) in JOB_FAULTS.items() if r}
            time.sleep(1.0)  # two heartbeat intervals for anything of attempt 1 still alive to write
            for fault, (_, replaced) in JOB_FAULTS.items():
                if replaced:
                    assert files_of(home.run(run_ids[fault]).attempt(1).dir) == before[fault], fault
                    assert not late_writes(home, run_ids[fault], 1), (fault, late_writes(home, run_ids[fault], 1))
            finals = {fault: stop_by_cli(home, run_id)["end"]["status"] for fault, run_id in run_ids.items()}
            wait_until(lambda: not tags.tagged(str(home.root)), timeout=20, what="every process of every run to die")
        finally:
            for pid in frozen:
                if running(pid):
                    slurm_cluster.signal(pid, signal.SIGCONT)
    assert finals == {fault: "stopped_manual" for fault in JOB_FAULTS}
    assert not watch.overlaps, watch.overlaps[:5]


# -- the daemon's faults: one run, frozen then killed under it ------------------------------------------------


def test_a_frozen_then_killed_daemon_loses_no_slurm_run_and_stop_still_works(home, tmp_path):
    daemon = start_daemon(home)
    try:
        run_id = submit(home, write(tmp_path, "train.py", TRAINS))
        with TagWatch(home) as watch:
            started = started_tree(home, run_id, watch)
            lease = json.loads(home.daemon_lease.read_text())
            os.kill(daemon.pid, signal.SIGSTOP)
            time.sleep(3.0)  # frozen for six of the job's heartbeat intervals and several of its own cycles
            os.kill(daemon.pid, signal.SIGCONT)
            wait_until(lambda: json.loads(home.daemon_lease.read_text())["cycles"] > lease["cycles"] + 2,
                       what="the thawed daemon to cycle again")
            os.kill(daemon.pid, signal.SIGKILL)
            daemon.wait()
            step = json.loads(home.run(run_id).attempt(1).progress.read_text())["step"]
            wait_until(lambda: json.loads(home.run(run_id).attempt(1).progress.read_text())["step"] > step,
                       what="the job to run on without a daemon")
            meta = stop_by_cli(home, run_id)  # starts a daemon, which adopts the job and stops it
            wait_until(lambda: not running(started["pid"]) and not tags.tagged(str(home.root)), timeout=20,
                       what="every process of the run to die")
        assert meta["end"]["status"] == "stopped_manual" and len(meta["attempts"]) == 1, meta["end"]
        assert not watch.overlaps, watch.overlaps[:5]
    finally:
        if daemon.poll() is None:
            os.kill(daemon.pid, signal.SIGCONT)
            stop_daemon(daemon)
        lease_now = json.loads(home.daemon_lease.read_text()) if home.daemon_lease.exists() else {}
        if lease_now.get("pid") and running(lease_now["pid"]):
            os.kill(lease_now["pid"], signal.SIGTERM)
