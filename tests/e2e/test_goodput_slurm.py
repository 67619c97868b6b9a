"""Goodput from the steps on the real Slurm test cluster (tests/slurm): a checkpointing loop crashes once in
its first job and resumes in the next; `fray status` and `fray usage --by partition` count the steps redone."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import run_fray, schema_validate, start_daemon, stop_daemon, wait_until
from fray.state import runs, store
from fray.state.layout import Home
from test_goodput_e2e import TRAIN
from tests.slurm.fixture import SlurmCluster

pytestmark = pytest.mark.slow

FAST = {"poll_interval_sec": 0.5, "min_snapshot_interval_sec": 0.3, "command_timeout_sec": 20, "sinfo_ttl_sec": 2}


def test_a_slurm_run_that_crashed_once_counts_its_redone_steps(slurm_cluster: SlurmCluster, home: Home, tmp_path):
    store.ensure_home(home)
    home.config.write_text(json.dumps({"slurm": FAST}))
    code = tmp_path / "code"
    code.mkdir()
    script = code / "train.py"
    # A backoff base that would show: the crashed attempt made progress (13 steps), so none is waited.
    script.write_text(TRAIN.replace("#!/usr/bin/env python3", f"#!{sys.executable}")
                      .replace("#FRAY --name steps", "#FRAY --backend slurm --name steps")
                      .replace("--backoff-base 0.1", "--backoff-base 20"))
    script.chmod(0o755)
    run_id = runs.create_run(home, runs.SubmitOptions(script=script, overrides={})).run_id
    daemon = start_daemon(home)
    try:
        wait_until(lambda: (store.read_json(home.meta_file(run_id), "meta") or {}).get("phase") == "ended",
                   timeout=150, what="the Slurm run to end")
    finally:
        stop_daemon(daemon)
        ours = [line.split("|")[0] for line in slurm_cluster.run("squeue", "-h", "-o", "%i|%j").stdout.splitlines()
                if f"fray-{run_id}-" in line]
        if ours:
            slurm_cluster.run("scancel", *ours, check=False)
    meta = store.read_json(home.meta_file(run_id), "meta")
    assert meta["end"]["status"] == "completed_success", meta["end"]
    assert [a["partition"] for a in meta["attempts"]] and all(a["backend"] == "slurm" for a in meta["attempts"])
    status = json.loads(run_fray("status", run_id, "--json", home=home.root, check=True).stdout)
    schema_validate("cli-status", status)
    assert status["goodput"]["basis"] == "steps"
    assert (status["goodput"]["redone_steps"], status["goodput"]["restarts"]) == (3, 1)
    assert [e["data"]["delay_sec"] for e in status["events"] if e["kind"] == "backoff"] == [0.0]
    assert status["goodput"]["lost_sec"].get("backoff", 0.0) < 5, status["goodput"]
    usage = json.loads(run_fray("usage", "--json", "--by", "partition", home=home.root, check=True).stdout)
    schema_validate("cli-usage", usage)
    [row] = usage["rows"]
    assert row["basis"] == "steps" and row["lost_by_cause"]["redone"] > 0 and row["attempts"] == 2
