"""Placement on the real Slurm test cluster: node attributes from sinfo, and --scheduling-timeout.

The cluster (tests/slurm): n1, n2 in partitions cpu and a100 (2 x A100 each);
n3, n4 in cpu and h100 (4 x H100 each, feature `ib`). The daemon checks a
run's constraints against the nodes `sinfo` lists before it asks sbatch, so a
run no node could take waits with the reason instead of failing to submit,
and --scheduling-timeout ends a run that was not placed in time, whether fray
held it back or Slurm kept it pending.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_fray, wait_until
from fray.backends.slurm import node_workers, partitions
from fray.backends.slurm.sinfo import TIMEOUT_SEC
from fray.backends import external
from fray.state import store
from fray.state.layout import Home
from tests.slurm.fixture import SlurmCluster

pytestmark = pytest.mark.slow

FAST = {"poll_interval_sec": 0.5, "min_snapshot_interval_sec": 0.3, "command_timeout_sec": 20, "sinfo_ttl_sec": 2}
HEADER = "#!/bin/bash\n#FRAY --backend slurm --heartbeat-interval 0.5 --stop-grace 2\n"


@pytest.fixture(autouse=True)
def slurm_home(slurm_cluster: SlurmCluster, home: Home):
    store.ensure_home(home)
    home.config.write_text(json.dumps({"slurm": FAST}))
    yield home
    ours = [line.split("|")[0] for line in slurm_cluster.run("squeue", "-h", "-o", "%i|%j").stdout.splitlines()
            if any(f"fray-{run_id}-" in line for run_id in home.run_ids())]
    if ours:
        slurm_cluster.run("scancel", *ours, check=False)


def fray_submit(home: Home, tmp_path: Path, name: str, body: str) -> str:
    script = tmp_path / name
    script.write_text(HEADER + body)
    return json.loads(run_fray("submit", str(script), "--json", home=home.root, check=True).stdout)["run_id"]


def meta_of(home: Home, run_id: str) -> dict:
    return json.loads(home.run(run_id).meta.read_text())


def ended(home: Home, run_id: str) -> dict | None:
    meta = meta_of(home, run_id)
    return meta if meta["phase"] == "ended" else None


def test_sinfo_rows_become_workers_with_partition_features_and_gpus(slurm_cluster):
    result = external.run(["sinfo", "--noheader", "--Node", f"--format={partitions.SINFO_FORMAT}"], TIMEOUT_SEC)
    assert result.ok, result.describe()
    found = {w.worker_id: w for w in node_workers.workers(partitions.parse_sinfo(result.stdout))}
    assert set(found) == {"n1@cpu", "n2@cpu", "n3@cpu", "n4@cpu", "n1@a100", "n2@a100", "n3@h100", "n4@h100"}
    n3 = found["n3@h100"].attributes
    assert (n3["hostname"], n3["partition"], n3["gpu-type"], n3["gpu-count"], n3["feature:ib"]) == \
        ("n3", "h100", "h100", 4, 1)
    assert "feature:ib" not in found["n1@a100"].attributes and found["n1@a100"].attributes["gpu-type"] == "a100"
    assert found["n3@h100"].free.gpus == 4 and found["n3@h100"].free.cpus == 4


def test_a_constraint_the_nodes_meet_runs_there_and_one_they_cannot_waits_then_ends_at_its_timeout(
        home, daemon, tmp_path):
    on_ib = fray_submit(home, tmp_path, "ib.sh", "#FRAY --constraint feature:ib\necho \"on $SLURMD_NODENAME\"\n")
    # `fray submit` refuses what no node meets, writing nothing (fray.core.never_fit)...
    for name, body, said in (("nvme.sh", "#FRAY --constraint feature:nvme\n", "no worker with feature:nvme"),
                             ("big.sh", "#FRAY --cpus 16\n", "it asks for 16 CPUs on one node")):
        (tmp_path / name).write_text(HEADER + body + "echo never\n")
        proc = run_fray("submit", str(tmp_path / name), "--json", home=home.root)
        assert proc.returncode == 2 and said in json.loads(proc.stdout)["error"]["message"], proc.stdout
    # ... and the daemon holds back one written past that check (the cluster changed since), saying why.
    nvme = past_the_checks(home, tmp_path, "nvme.sh", scheduling_timeout_sec=4.0)
    too_big = past_the_checks(home, tmp_path, "big.sh")
    meta = wait_until(lambda: ended(home, on_ib), timeout=60, what="the feature:ib run to end")
    assert meta["end"]["status"] == "completed_success", meta
    assert meta["attempts"][0]["node"] in ("n3", "n4")
    # Held back by fray with the reason (sbatch was never asked), then ended at its timeout.
    wait_until(lambda: meta_of(home, too_big)["wait_reason"] == "no worker has 16 CPUs in all (8 match)",
               what="the 16-CPU run waiting with why")
    meta = wait_until(lambda: ended(home, nvme), timeout=30, what="the feature:nvme run to end at its timeout")
    assert meta["attempts"] == []
    assert (meta["end"]["status"], meta["end"]["reason"]) == (
        "failed", "unschedulable: not placed within 4s: no worker with feature:nvme")
    row = {r["run_id"]: r for r in json.loads(run_fray("list", "--json", home=home.root, check=True).stdout)["runs"]}
    assert row[nvme]["status"] == "failed" and row[nvme]["reason"].startswith("unschedulable:")
    assert row[too_big]["status"] == "pending" and "16 CPUs" in row[too_big]["reason"]
    assert not meta_of(home, too_big)["attempts"]


def past_the_checks(home: Home, tmp_path: Path, name: str, **overrides) -> str:
    """A run written as `fray submit` writes it, without its submit-time checks."""
    from fray.state import runs

    script = tmp_path / name
    return runs.create_run(home, runs.SubmitOptions(script=script, overrides=overrides,
                                                    workdir=str(tmp_path))).run_id


def test_a_run_slurm_keeps_pending_past_its_scheduling_timeout_is_cancelled_and_ends_unschedulable(
        home, daemon, tmp_path, slurm_cluster):
    run_id = fray_submit(home, tmp_path, "later.sh", "#FRAY --scheduling-timeout 3s\n#SBATCH --begin=now+3600\n"
                                                     "echo never\n")
    first = wait_until(lambda: (a := meta_of(home, run_id)["attempts"]) and a[0].get("backend_ref") and a[0],
                       timeout=30, what="the job submitted")
    job_id = first["backend_ref"]["job_id"]
    assert slurm_cluster.job(job_id)["JobState"] == "PENDING"
    meta = wait_until(lambda: ended(home, run_id), timeout=60, what="the run to end at its scheduling timeout")
    assert meta["end"]["status"] == "failed", meta["end"]
    assert meta["end"]["reason"].startswith("unschedulable: not placed within 3s: still pending"), meta["end"]
    assert [a["cause"] for a in meta["attempts"]] == ["unschedulable"]
    wait_until(lambda: slurm_cluster.job(job_id).get("JobState", "") in ("CANCELLED", ""),
               what="the pending job cancelled")


def test_one_replica_failing_ends_the_allocation_and_the_group_is_retried_under_max_retries(home, daemon, tmp_path):
    # One allocation of 3 nodes, one task each; task 1 fails while 0 and 2 sleep, in every attempt.
    run_id = fray_submit(home, tmp_path, "group.sh", "#FRAY --replicas 3 --max-retries 1 --backoff-base 0\n"
                         'if [ "$FRAY_TASK_INDEX" = 1 ]; then echo "replica 1 lost its shard" >&2; exit 3; fi\n'
                         "exec sleep 300\n")
    meta = wait_until(lambda: ended(home, run_id), timeout=90, what="the run to end")
    assert [a["number"] for a in meta["attempts"]] == [1, 2]
    first = home.run(run_id).attempt(1)
    failed_at = json.loads(first.task(1).exit.read_text())["ended_at"]
    # srun --kill-on-bad-exit ended the sleepers at once: those that wrote an exit record did so within
    # seconds, and attempt 2 (3 of the 4 nodes: only once attempt 1's were free) started (or was submitted) soon after.
    stopped = [json.loads(first.task(i).exit.read_text())["ended_at"] for i in (0, 2) if first.task(i).exit.exists()]
    second = meta["attempts"][1]  # never seen started when its task 0 was ended before it could say so
    assert all(at - failed_at < 15 for at in stopped)
    assert (second["started_at"] or second["submitted_at"]) - failed_at < 15
    for attempt in meta["attempts"]:
        # Task 0 was terminated by srun (at times before it could write a word), yet the attempt is
        # task 1's workload failure, not a preemption or a lost job.
        assert (attempt["cause"], attempt["counted_as"]) == ("workload_failure", "workload"), attempt
        assert attempt["detail"].startswith("task 1 of 3: exit 3: replica 1 lost its shard"), attempt
    assert meta["end"]["status"] == "failed" and "more than --max-retries 1" in meta["end"]["reason"]
    assert "task 1 of 3: exit 3" in meta["end"]["reason"]
