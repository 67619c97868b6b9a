"""Hangs on the real Slurm test cluster (tests/slurm): with default settings a workload that stops itself is
restarted within 10 s, and a deadlocked one is named in `fray status`, as on the local backend."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import run_fray, wait_until
from tests.backends.local.test_hang_local import stops_itself
from test_slurm_backend import ended, slurm_home, submit, write  # noqa: F401 (slurm_home: autouse)
from fray.state.layout import Home

pytestmark = pytest.mark.slow


DEADLOCKS = f"""#!{sys.executable}
#FRAY --backend slurm --heartbeat-interval 0.5 --idle-timeout 2s --max-retries 0
#SBATCH --time=5
import threading
import fray

lock = threading.Lock()

def all_reduce():
    with lock:
        with lock:
            pass

all_reduce()
"""


def test_a_workload_that_stops_itself_on_slurm_is_restarted_within_ten_seconds_by_default(home: Home, daemon,
                                                                                          tmp_path):
    script, where = stops_itself("#FRAY --backend slurm", "#SBATCH --time=5")
    run_id = submit(home, write(tmp_path, "job.py", script))
    meta = wait_until(lambda: ended(home, run_id), timeout=90, what="the run to end")
    assert meta["end"]["status"] == "completed_success", meta["attempts"]
    first, second = meta["attempts"]
    assert first["cause"] == "hang_stopped" and where in first["detail"]
    stopped_at = float((home.run(run_id).attempt(1).dir / "stopped_at").read_text())
    took = second["started_at"] - stopped_at
    print(f"slurm: attempt 2 started {took:.1f}s after attempt 1's workload stopped itself")
    assert took <= 10.0, f"restarted {took:.1f}s after the stop"


def test_status_names_where_a_deadlocked_workload_hung_on_slurm(home: Home, daemon, tmp_path):
    run_id = submit(home, write(tmp_path, "job.py", DEADLOCKS))
    meta = wait_until(lambda: ended(home, run_id), timeout=90, what="the run to end")
    assert meta["attempts"][0]["cause"] == "hang_idle"
    shown = run_fray("status", run_id, home=home.root, check=True).stdout
    assert "all_reduce, job.py:11 (attempt 1, hang_idle" in shown
    data = json.loads(run_fray("status", run_id, "--json", home=home.root, check=True).stdout)
    assert data["attempts"][0]["watch"]["stacks"]["hung_in"] == "all_reduce, job.py:11"
