"""`--remote` to a login node whose scheduler is the suite's real Slurm: one run end to end.

The laptop side runs the real CLI; the sshd on 127.0.0.1 plays the login node
(its sessions carry SLURM_CONF, as a cluster's environment would) and the
remote daemon submits the synced script to the test cluster with sbatch.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import _kill_everything_of, run_fray
from tests.remote_support import remote_host, sshd  # noqa: F401
from tests.backends.slurm.test_slurm_backend import FAST

pytestmark = pytest.mark.slow

SCRIPT = """#!/bin/bash
#FRAY --backend slurm --heartbeat-interval 0.5 --backoff-base 0
#SBATCH --time=5
echo "hello from $SLURMD_NODENAME, job $SLURM_JOB_ID"
"""


def test_a_run_submitted_from_the_laptop_runs_on_the_remote_slurm(slurm_cluster, remote_host, tmp_path, monkeypatch):
    remote_home = tmp_path / "login node home"
    remote_home.mkdir()
    (remote_home / "config.json").write_text(json.dumps({"slurm": FAST}))
    monkeypatch.setenv("FRAY_REMOTE_HOME", str(remote_home))
    monkeypatch.setenv("FRAY_REMOTE_NO_MASTER", "1")
    monkeypatch.setenv("FRAY_HOME", str(tmp_path / "laptop home"))
    project = tmp_path / "experiment"
    project.mkdir()
    (project / "job.sh").write_text(SCRIPT)
    monkeypatch.chdir(project)
    try:
        submitted = run_fray("submit", "job.sh", "--wait", "--json", "--remote", remote_host.alias, timeout=300)
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        run_id = json.loads(submitted.stdout.splitlines()[-1])["run_id"]

        status = json.loads(run_fray("status", run_id, "--json", "--remote", remote_host.alias, check=True).stdout)
        attempt = status["attempts"][-1]
        assert status["run"]["status"] == "completed_success" and attempt["node"] in {"n1", "n2", "n3", "n4"}
        logs = run_fray("logs", run_id, "--remote", remote_host.alias, check=True).stdout
        assert logs.startswith(f"hello from {attempt['node']}, job ")
        assert logs == run_fray("logs", run_id, home=remote_home, check=True).stdout
    finally:
        _kill_everything_of(remote_home)
