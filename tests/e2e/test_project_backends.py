"""examples/project, unchanged, on the real Slurm test cluster and on the TPU simulator, in a Python without fray.

The same checks as the local run in test_project_code: the job imported its own
modules and its package, read its data file next to its code, reported progress
through `from fray import report` (the wrapper's job-side helpers: the job's
venv has no fray), checkpointed, and the attempt after a crash resumed.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fray.state import store
from fray.state.layout import Home
from tests.conftest import start_daemon, stop_daemon, wait_until
from tests.e2e.test_project_code import PROJECT, bare_python  # noqa: F401 - a fixture
from tests.backends.tpu.test_tpu_daemon import ZONE, ended, sim  # noqa: F401 - a fixture

pytestmark = pytest.mark.slow

SLURM_FAST = {"poll_interval_sec": 0.5, "min_snapshot_interval_sec": 0.3, "command_timeout_sec": 20, "sinfo_ttl_sec": 2}


def submit(home: Home, *flags: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "fray.cli.main", "submit", "--json", "train.py", *flags, "--",
                           "--steps", "12", "--crash-at", "7"], capture_output=True, text=True, cwd=PROJECT,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)["run_id"]


def assert_ran_the_project(home: Home, run_id: str, python: str, stdout_of_attempt) -> None:  # noqa: ANN001
    meta = wait_until(lambda: ended(home, run_id), timeout=180, what="the run to end")
    second = stdout_of_attempt(2)
    assert meta["end"]["status"] == "completed_success", (meta["end"], second)
    assert "40 points from points.csv" in second and "resuming at step 5" in second
    assert f"at {python}" in second
    result = store.read_json(home.run(run_id).attempt(2).result, "result")
    assert result["steps"] == 12


def test_the_example_project_runs_on_slurm(home, slurm_cluster, bare_python):  # noqa: F811
    store.ensure_home(home)
    home.config.write_text(json.dumps({"slurm": SLURM_FAST}))
    daemon = start_daemon(home)
    try:
        run_id = submit(home, "--backend", "slurm", "--python", str(bare_python), "--mem", "100M")
        assert_ran_the_project(home, run_id, str(bare_python),
                               lambda n: home.run(run_id).attempt(n).stdout.read_text())
    finally:
        stop_daemon(daemon)


def test_the_example_project_runs_on_a_tpu_slice(home, sim, bare_python):  # noqa: F811
    daemon = start_daemon(home)
    try:
        run_id = submit(home, "--backend", "tpu", "--tpu", "v4-8", "--zone", ZONE, "--runtime-version",
                        "tpu-ubuntu2204-base", "--spot", "--skip-probes", "tpu", "--python", str(bare_python))
        assert_ran_the_project(home, run_id, str(bare_python),
                               lambda n: home.run(run_id).attempt(n).stdout.read_text())
    finally:
        stop_daemon(daemon)
