"""Sweeps on the real Slurm test cluster: one job array, `%K` concurrency, only failed points retried, group stop.

The daemon runs in this process with the real Slurm backend behind a runner
that counts (and keeps) every command it runs; the cluster is tests/slurm's
(4 nodes of 4 CPUs: without the throttle, 16 tasks could run at once).
"""

from __future__ import annotations

import json

import pytest

from conftest import run_fray, schema_validate, wait_until
from fray.backends import external
from fray.backends.slurm.backend import SlurmBackend
from fray.backends.slurm.parse import parse_squeue
from fray.daemon.loop import Daemon
from fray.ops import control, sweeps as sweeping
from fray.state import runs, store
from fray.state.layout import Home
from tests.slurm.fixture import SlurmCluster

pytestmark = pytest.mark.slow

FAST = {"poll_interval_sec": 0.5, "min_snapshot_interval_sec": 0.0, "command_timeout_sec": 20, "sinfo_ttl_sec": 2}
POINT = """#!/bin/bash
#FRAY --backend slurm --heartbeat-interval 0.5 --stop-grace 2 --backoff-base 0
#SBATCH --time=5
echo "point $FRAY_SWEEP_INDEX of $FRAY_SWEEP_SIZE: $* $FRAY_SWEEP_PARAMS"
sleep 1.5
if [ "$FRAY_SWEEP_INDEX" = 7 ] && [ "$FRAY_ATTEMPT" = 1 ]; then echo "point 7 fails once" >&2; exit 3; fi
"""
SERVE = """#!/bin/bash
#FRAY --backend slurm --heartbeat-interval 0.5 --stop-grace 2
#SBATCH --time=5
trap 'echo stopping; exit 0' TERM
while true; do sleep 0.1; done
"""


class Recording:
    """The real commands; each call kept with its result."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[str, ...], external.CommandResult]] = []

    def __call__(self, argv, timeout) -> external.CommandResult:
        result = external.run(argv, timeout)
        self.calls.append((tuple(argv), result))
        return result

    def argvs(self, name: str) -> list[tuple[str, ...]]:
        return [argv for argv, _ in self.calls if argv[0] == name]

    def most_running(self, array_job: str) -> int:
        """The most tasks of that array that any squeue saw running at once."""
        return max((sum(1 for row in parse_squeue(result.stdout)
                        if row.job_id.startswith(f"{array_job}_") and row.state == "RUNNING")
                    for argv, result in self.calls if argv[0] == "squeue"), default=0)


@pytest.fixture
def slurm_home(slurm_cluster: SlurmCluster, home: Home):
    store.ensure_home(home)
    home.config.write_text(json.dumps({"slurm": FAST}))
    yield home
    ours = [line.split("|")[0] for line in slurm_cluster.run("squeue", "-h", "-r", "-o", "%i|%j").stdout.splitlines()
            if "|fray-" in line]
    if ours:
        slurm_cluster.run("scancel", *ours, check=False)


def metas(home: Home, run_ids: list[str]) -> list[dict]:
    return [json.loads(home.run(run_id).meta.read_text()) for run_id in run_ids]


def cycle_until(daemon: Daemon, predicate, timeout: float, what: str):
    return wait_until(lambda: (daemon.cycle(), predicate())[1], timeout=timeout, interval=0.2, what=what)


def test_a_20_point_sweep_is_one_array_of_4_at_a_time_and_only_the_failed_point_is_retried(slurm_home, tmp_path):
    home = slurm_home
    script = tmp_path / "point.sh"
    script.write_text(POINT)
    runner = Recording()
    daemon = Daemon(home, backends={"slurm": SlurmBackend(home, config=FAST, runner=runner)})
    created = sweeping.submit_sweep(home, script, ["lr=1e-3,3e-4", "seed=0..9"], ["--epochs", "1"],
                                    name="lr-sweep", max_parallel=4)
    run_ids = [m.run_id for m in created]
    assert len(run_ids) == 20
    daemon.cycle()
    sbatches = runner.argvs("sbatch")
    assert len(sbatches) == 1, sbatches  # the whole sweep: one sbatch
    assert "--array=0-19%4" in sbatches[0]
    first = metas(home, run_ids)
    array_job = first[0]["attempts"][0]["backend_ref"]["array_job_id"]
    assert [m["attempts"][0]["backend_ref"]["job_id"] for m in first] == [f"{array_job}_{i}" for i in range(20)]

    ended = cycle_until(daemon, lambda: all(m["phase"] == "ended" for m in metas(home, run_ids)), timeout=150,
                        what="every point to end")
    assert ended and [m["end"]["status"] for m in metas(home, run_ids)] == ["completed_success"] * 20
    attempts = [len(m["attempts"]) for m in metas(home, run_ids)]
    assert attempts == [1] * 7 + [2] + [1] * 12  # only point 7 ran again
    retry = metas(home, [run_ids[7]])[0]["attempts"]
    assert retry[0]["cause"] == "workload_failure" and retry[1]["cause"] == "success"
    sbatches = runner.argvs("sbatch")
    assert len(sbatches) == 2, sbatches  # the array, then point 7's second attempt alone
    assert f"--job-name=fray-{run_ids[7]}-2" in sbatches[1] and not any(a.startswith("--array") for a in sbatches[1])
    assert 2 <= runner.most_running(array_job) <= 4
    out = home.run(run_ids[13]).attempt(1).stdout.read_text()
    assert out == 'point 13 of 20: --epochs 1 --lr 3e-4 --seed 3 {"lr":0.0003,"seed":3}\n'
    # squeue saw the tasks by their array ids: one squeue per cycle, whatever the sweep's size.
    assert len(runner.argvs("squeue")) <= daemon.cycles


def test_stop_group_ends_every_point_of_a_slurm_sweep_running_or_pending(slurm_home, slurm_cluster, tmp_path):
    home = slurm_home
    script = tmp_path / "serve.sh"
    script.write_text(SERVE)
    runner = Recording()
    daemon = Daemon(home, backends={"slurm": SlurmBackend(home, config=FAST, runner=runner)})
    run_ids = [m.run_id for m in sweeping.submit_sweep(home, script, ["seed=0..5"], name="serving", max_parallel=2)]
    cycle_until(daemon, lambda: sum(m["attempts"][0]["state"] == "running" for m in metas(home, run_ids)
                                    if m["attempts"]) == 2, timeout=60, what="two points running")
    asked = control.request_group(home, "serving", "stop")  # what `fray control stop --group serving` asks
    assert [r.run_id for r in asked.requested] == run_ids and asked.skipped == []
    cycle_until(daemon, lambda: all(m["phase"] == "ended" for m in metas(home, run_ids)), timeout=60,
                what="every point to stop")
    assert {m["end"]["status"] for m in metas(home, run_ids)} == {"stopped_manual"}
    assert len(runner.argvs("scancel")) <= 2  # the running ones politely, the pending ones at once: two calls
    left = slurm_cluster.run("squeue", "-h", "-r", "-o", "%i|%j|%T").stdout
    assert "fray-array-" not in left, (left, runner.argvs("scancel"), [m["attempts"] for m in metas(home, run_ids)])
    listed = json.loads(run_fray("list", "--json", home=home.root, check=True).stdout)
    schema_validate("cli-list", listed)
    (row,) = listed["runs"]
    assert row["kind"] == "group" and row["counts"] == {"stopped_manual": 6} and row["name"] == "serving"


def test_a_slurm_sweep_stopped_before_the_daemon_launched_it_submits_nothing(slurm_home, tmp_path):
    home = slurm_home
    script = tmp_path / "serve.sh"
    script.write_text(SERVE)
    run_ids = [m.run_id for m in sweeping.submit_sweep(home, script, ["seed=0..3"], name="unwanted")]
    asked = control.request_group(home, "unwanted", "stop")  # before any daemon saw the sweep
    assert [r.run_id for r in asked.requested] == run_ids and asked.skipped == []
    runner = Recording()
    daemon = Daemon(home, backends={"slurm": SlurmBackend(home, config=FAST, runner=runner)})
    cycle_until(daemon, lambda: all(m["phase"] == "ended" for m in metas(home, run_ids)), timeout=60,
                what="every point to end")
    assert all(m["end"]["status"] == "stopped_manual" and m["attempts"] == [] for m in metas(home, run_ids))
    assert runner.argvs("sbatch") == []


class AskedDuringSbatch(Recording):
    """The real commands; a person pauses the sweep while its array's sbatch runs, before its runs exist."""

    def __init__(self, home: Home, group: str) -> None:
        super().__init__()
        self.home, self.group, self.asked = home, group, None

    def __call__(self, argv, timeout):
        result = super().__call__(argv, timeout)
        if argv[0] == "sbatch" and self.asked is None:
            self.asked = control.request_group(self.home, self.group, "pause")
        return result


def test_a_pause_that_arrives_while_the_array_is_submitted_reaches_every_point_and_cancels_its_tasks(
        slurm_home, slurm_cluster, tmp_path):
    home = slurm_home
    script = tmp_path / "serve.sh"
    script.write_text(SERVE)
    run_ids = [m.run_id for m in sweeping.submit_sweep(home, script, ["seed=0..3"], name="paused")]
    runner = AskedDuringSbatch(home, "paused")
    daemon = Daemon(home, backends={"slurm": SlurmBackend(home, config=FAST, runner=runner)})
    daemon.cycle()
    assert len(runner.argvs("sbatch")) == 1 and "--array=0-3" in " ".join(runner.argvs("sbatch")[0])
    assert runner.asked is not None and [r.run_id for r in runner.asked.requested] == run_ids
    # The runs were written after the request: each starts out paused, and its array task is stopped.
    cycle_until(daemon, lambda: all(m["attempts"][0]["state"] == "ended" for m in metas(home, run_ids)),
                timeout=60, what="every array task to be stopped")
    assert all(runs.read_control(home, run_id).paused for run_id in run_ids)
    assert all(m["phase"] == "queued" and len(m["attempts"]) == 1 for m in metas(home, run_ids))
    left = slurm_cluster.run("squeue", "-h", "-r", "-o", "%i|%j|%T").stdout
    assert "fray-array-" not in left, left
