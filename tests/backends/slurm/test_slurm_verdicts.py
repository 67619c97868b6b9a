"""Every failure gets the right verdict, on the real 4-node Slurm test cluster (tests/slurm) with a real daemon:
what sbatch refuses ends a run on the first try (or is refused before a run exists), what it cannot take now is
retried apart from the node's faults, a request no node can meet is refused at submit, a pending reason that no
wait can change ends a wait, and a probe that fails the same way on two nodes blames the job, not the nodes.

Partitions: cpu (n1-n4, default), a100 (n1-n2, 2 x A100, MaxTime 1 day), h100 (n3-n4, 4 x H100, feature ib).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import run_fray, schema_validate, wait_until
from fray.state import blacklist, runs, store
from fray.state.layout import Home
from tests.backends.slurm.test_slurm_backend import (FAKES, FAST, events, job_state, meta_of, start_controller,
                                                     stop_controller, write)
from tests.slurm.fixture import SlurmCluster

pytestmark = pytest.mark.slow

HEADER = "#!/bin/bash\n#FRAY --backend slurm --heartbeat-interval 0.5 --stop-grace 2\n"


@pytest.fixture(autouse=True)
def slurm_home(slurm_cluster: SlurmCluster, home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A FRAY_HOME for the fast test cluster whose nodes' nvidia-smi cannot reach a driver (the fake one, failing
    the same way everywhere); its Slurm jobs are cancelled afterwards."""
    scenario = tmp_path / "no-driver.json"
    scenario.write_text(json.dumps({"fail": True}))
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_SCENARIO", str(scenario))
    store.ensure_home(home)
    home.config.write_text(json.dumps({"slurm": FAST}))
    yield home
    ours = {line.split("|")[0] for line in slurm_cluster.run("squeue", "-h", "-o", "%i|%j").stdout.splitlines()
            if any(f"fray-{run_id}-" in line for run_id in home.run_ids())}
    if ours:
        slurm_cluster.run("scancel", *sorted(ours), check=False)


def past_the_checks(home: Home, script: Path, **overrides) -> str:
    """A run written as `fray submit` writes it, without its submit-time checks: what the daemon's own sbatch
    then meets is what those checks could not know (a line changed by an older fray, a cluster changed since)."""
    return runs.create_run(home, runs.SubmitOptions(script=script, overrides=overrides,
                                                    workdir=str(script.parent))).run_id


def ended(home: Home, run_id: str) -> dict | None:
    meta = meta_of(home, run_id)
    return meta if meta["phase"] == "ended" else None


def refused(home: Home, *args: str) -> dict:
    """`fray submit ARGS --json` that must be refused: its error document, validated; nothing written."""
    proc = run_fray("submit", *args, "--json", home=home.root)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    error = json.loads(proc.stdout)
    schema_validate("cli-error", error)
    assert error["error"]["code"] == "submission_refused", error
    assert home.run_ids() == [], "a refused submission writes no run"
    return error["error"]


def test_a_typo_in_an_sbatch_line_is_refused_at_submit_with_sbatchs_words_and_the_line(home, tmp_path):
    script = write(tmp_path, "typo.sh", HEADER + "#SBATCH --tim=1:00:00\necho hi\n")
    error = refused(home, str(script))
    assert "option '--tim=1:00:00' is ambiguous; possibilities: '--time' '--time-min'" in error["message"]
    assert "typo.sh line 3: #SBATCH --tim=1:00:00" in error["message"]
    proc = run_fray("submit", str(script), home=home.root)
    assert proc.returncode == 2 and "sbatch --test-only refused it" in proc.stderr


def test_a_request_no_node_can_ever_meet_is_refused_at_submit_and_one_that_fits_gets_slurms_estimate(home,
                                                                                                  tmp_path):
    script = write(tmp_path, "job.sh", HEADER + "echo hi\n")
    too_many = refused(home, str(script), "--gpus", "8")
    assert "it asks for 8 GPUs on one node, and the most any node of any partition has is 4 (n3, n4)" in \
        too_many["message"]
    assert "the most any node of partition cpu (Slurm's default) has is 4 (n1, n2, n3, n4)" in \
        refused(home, str(script), "--cpus", "64")["message"]
    assert "it asks for 102400 MB of memory on one node" in refused(home, str(script), "--mem", "100G")["message"]
    assert "no node of any partition has such GPUs (its GPUs: a100 40 GB, h100 80 GB)" in \
        refused(home, str(script), "--gpus", "2", "--min-vram", "100")["message"]
    assert "no worker with feature:nvme" in refused(home, str(script), "--constraint", "feature:nvme")["message"]
    long = write(tmp_path, "long.sh", HEADER + "#SBATCH --partition=a100\n#SBATCH --time=2-00:00:00\necho hi\n")
    assert "its #SBATCH --time asks for 2d, more than any partition it may use allows (a100 allows 1d)" in \
        refused(home, str(long))["message"]
    # One that fits: Slurm's own estimate of where and when, as sbatch --test-only gave it.
    proc = run_fray("submit", str(script), "--partitions", "h100", "--json", home=home.root, check=True)
    submitted = json.loads(proc.stdout)
    schema_validate("cli-submit", submitted)
    estimate = submitted["slurm_estimate"]
    assert estimate["partition"] == "h100" and estimate["nodes"] in ("n3", "n4") and estimate["start_at"] > 0
    run_fray("control", "stop", submitted["run_id"], home=home.root)  # it may have run already


def test_an_sbatch_refusal_after_submit_ends_the_run_failed_config_on_the_first_try(home, daemon, tmp_path):
    script = write(tmp_path, "typo.sh", HEADER + "#SBATCH --tim=1:00:00\necho hi\n")
    run_id = past_the_checks(home, script)
    meta = wait_until(lambda: ended(home, run_id), timeout=30, what="the run to end")
    assert meta["end"]["status"] == "failed_config"
    assert [a["cause"] for a in meta["attempts"]] == ["config_refused"], "one sbatch, no retries"
    assert "option '--tim=1:00:00' is ambiguous" in meta["end"]["reason"]
    assert "typo.sh line 3: #SBATCH --tim=1:00:00" in meta["end"]["reason"]
    assert meta["counters"]["node_failures"] == 0, "a refusal is no node's fault"
    status = json.loads(run_fray("status", run_id, "--json", home=home.root, check=True).stdout)
    schema_validate("cli-status", status)
    assert not any("--stderr" in step for step in status["next_steps"]), status["next_steps"]
    assert not json.loads(home.daemon_lease.read_text()).get("failing_commands"), "sbatch answered: it works"
    logs = json.loads(run_fray("logs", run_id, "--json", home=home.root, check=True).stdout)
    schema_validate("cli-logs", logs)
    assert logs["lines"] == [] and "never started, so it has no output (config_refused" in logs["note"]


def test_an_unreachable_controller_is_retried_with_backoff_apart_from_the_nodes_budget(home, daemon, tmp_path,
                                                                                       slurm_cluster):
    script = write(tmp_path, "ok.sh", HEADER + "#FRAY --backoff-base 1 --backoff-max 2\necho hi\n")
    stop_controller(slurm_cluster)
    try:
        run_id = past_the_checks(home, script, max_retries_preemption=1)
        meta = wait_until(lambda: (m if len((m := meta_of(home, run_id))["attempts"]) >= 3 else None), timeout=60,
                          what="three submissions while the controller is down")
        assert {a["cause"] for a in meta["attempts"][:2]} == {"submit_failed"}
        assert all(a["counted_as"] == "submit" for a in meta["attempts"][:2]), meta["attempts"]
        assert "Unable to contact slurm controller" in meta["attempts"][0]["detail"]
        row = json.loads(run_fray("status", run_id, "--json", home=home.root, check=True).stdout)["run"]
        assert row["status"] == "pending" and "submission failed" in row["reason"], row
        assert meta["phase"] != "ended", "more failed submissions than --max-retries-preemption end nothing"
    finally:
        start_controller(slurm_cluster)
    meta = wait_until(lambda: ended(home, run_id), timeout=60, what="the run to succeed once Slurm is back")
    assert meta["end"]["status"] == "completed_success", meta["end"]
    assert meta["counters"]["node_failures"] == 0


def test_a_pending_reason_no_wait_can_change_is_told_in_words_and_ends_a_wait_with_exit_3(home, daemon, tmp_path,
                                                                                          slurm_cluster):
    # Past the submit check (which refuses it now): Slurm takes a job over a partition's MaxTime and keeps it.
    script = write(tmp_path, "long.sh", HEADER + "#SBATCH --partition=a100\n#SBATCH --time=2-00:00:00\necho hi\n")
    run_id = past_the_checks(home, script)
    proc = run_fray("wait", run_id, home=home.root, timeout=60)
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    # Slurm names it either way, by when it looked: PartitionTimeLimit, or PartitionConfig.
    assert "pending: Slurm: can never start as it is: " in proc.stderr, proc.stderr
    assert "(PartitionTimeLimit)" in proc.stderr or "(PartitionConfig)" in proc.stderr, proc.stderr
    job = meta_of(home, run_id)["attempts"][0]["backend_ref"]["job_id"]
    assert job_state(slurm_cluster, job) == "PENDING", "the wait gives up; the run is left as it is"


def test_a_probe_failing_the_same_way_on_two_nodes_ends_the_run_naming_them_and_bans_neither(home, daemon,
                                                                                             tmp_path):
    # The Slurm page's own example on nodes whose nvidia-smi cannot reach a driver: every h100 node fails.
    script = write(tmp_path, "train.sh", HEADER + "#FRAY --gpus 2 --min-vram 60\necho training\n")
    proc = run_fray("submit", str(script), "--json", home=home.root, check=True)
    run_id = json.loads(proc.stdout)["run_id"]
    meta = wait_until(lambda: ended(home, run_id), timeout=60, what="the run to end")
    assert meta["end"]["status"] == "failed_config"
    reason = meta["end"]["reason"]
    assert reason.startswith("preflight probe gpu failed the same way on 2 nodes (n3 and n4)") or \
        reason.startswith("preflight probe gpu failed the same way on 2 nodes (n4 and n3)"), reason
    assert "couldn't communicate with the NVIDIA driver" in reason and "--skip-probes gpu" in reason
    assert [a["probe"] for a in meta["attempts"]] == ["gpu", "gpu"], "two attempts, then the verdict"
    assert blacklist.load(home).nodes == {}, "neither node is banned for the job's fault"
    kinds = [e["kind"] for e in events(home, run_id)]
    assert "unbanned" in kinds
    status = json.loads(run_fray("status", run_id, "--json", home=home.root, check=True).stdout)
    schema_validate("cli-status", status)
    assert status["next_steps"][0].startswith("fray nodes") and "--skip-probes gpu" in status["next_steps"][1]


def test_one_run_bans_at_most_half_of_a_partition_and_each_ban_says_what_struck_it(home, daemon, tmp_path):
    # The workload itself blames its node (exit 42) wherever it runs: no probe to compare, so nodes are struck.
    script = write(tmp_path, "blame.sh", HEADER + "#FRAY --max-retries-preemption 2 --backoff-base 0\n"
                   "#SBATCH --partition=h100\nexit 42\n")
    run_id = past_the_checks(home, script)
    wait_until(lambda: home.nodes.exists(), timeout=30, what="the daemon's node inventory")
    meta = wait_until(lambda: ended(home, run_id), timeout=60, what="the run to spend its node budget")
    assert meta["end"]["status"] == "failed" and len(meta["attempts"]) == 3
    banned = blacklist.load(home).nodes
    assert len(banned) == 1, f"h100 has two nodes: one run may ban one of them, not both ({banned})"
    [(node, entry)] = banned.items()
    assert entry.cause == "node_fault" and entry.runs == [run_id] and entry.probe is None
    refusals = [e for e in events(home, run_id) if e["kind"] == "suspect_node" and "not banned" in e["reason"]]
    assert refusals and "partition h100's 2 nodes" in refusals[0]["reason"]
    listed = json.loads(run_fray("nodes", "list", "--json", home=home.root, check=True).stdout)
    schema_validate("cli-nodes", listed)
    [row] = [n for n in listed["nodes"] if n["name"] == node and n["blacklist"]]
    assert row["blacklist"]["runs"] == [run_id]
