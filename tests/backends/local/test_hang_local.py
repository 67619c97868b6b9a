"""Hangs end to end on the local backend: a real daemon, real wrappers, real hung workloads, the real CLI.

With default settings a workload that stops itself is restarted within 10 s,
and a deadlocked one (a small --idle-timeout here) is named in `fray status`
(human and --json) and its stacks are printed by `fray logs --stacks`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import run_fray, schema_validate, wait_until
from fray.state import runs
from fray.state.layout import Home

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the hang watch reads Linux's /proc")]


def stops_itself(*directives: str) -> tuple[str, str]:
    """A workload whose first attempt stops itself (recording when in stopped_at) and whose second succeeds;
    and where its stack will say it hung."""
    head = [f"#!{sys.executable}", *directives, "import os, signal, time", "from fray import report", "",
            "def wait_for_the_operator():", "    os.kill(os.getpid(), signal.SIGSTOP)"]
    body = """
if os.environ["FRAY_ATTEMPT"] == "1":
    with open(os.path.join(os.environ["FRAY_ATTEMPT_DIR"], "stopped_at"), "w") as handle:
        handle.write(repr(time.time()))
    wait_for_the_operator()
report.final(ok=True)
"""
    return "\n".join(head) + "\n" + body, f"hung in wait_for_the_operator, job.py:{len(head)}"


DEADLOCKS = f"""#!{sys.executable}
#FRAY --heartbeat-interval 0.5 --idle-timeout 2s --max-retries 0
import threading
from fray import report

report.progress(step=1)
lock = threading.Lock()

def all_reduce():
    with lock:
        with lock:  # not reentrant: waits for itself for ever
            pass

all_reduce()
"""

SPINS = f"""#!{sys.executable}
#FRAY --heartbeat-interval 0.5 --progress-timeout 8s --max-retries 0
from fray import report

def spin():
    while True:
        pass

report.progress(step=1)
spin()
"""


def submit(home: Home, tmp_path: Path, body: str) -> str:
    script = tmp_path / "job.py"
    script.write_text(body)
    return runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(tmp_path))).run_id


def meta_of(home: Home, run_id: str) -> dict:
    return json.loads(home.run(run_id).meta.read_text())


def test_a_workload_that_stops_itself_is_restarted_within_ten_seconds_by_default(home, daemon, tmp_path):
    script, where = stops_itself()
    run_id = submit(home, tmp_path, script)
    meta = wait_until(lambda: (m := meta_of(home, run_id))["phase"] == "ended" and m, timeout=60,
                      what="the run to end")
    assert meta["end"]["status"] == "completed_success", meta["end"]
    first, second = meta["attempts"]
    assert first["cause"] == "hang_stopped" and first["counted_as"] == "workload"
    assert where in first["detail"]
    stopped_at = float((home.run(run_id).attempt(1).dir / "stopped_at").read_text())
    took = second["started_at"] - stopped_at
    assert took <= 10.0, f"restarted {took:.1f}s after the stop"


def test_status_names_the_function_a_deadlocked_workload_hung_in_and_logs_prints_its_stacks(home, daemon, tmp_path):
    run_id = submit(home, tmp_path, DEADLOCKS)
    wait_until(lambda: meta_of(home, run_id)["phase"] == "ended", timeout=60, what="the run to end")
    shown = run_fray("status", run_id, home=home.root, check=True).stdout
    assert "hung in" in shown and "all_reduce, job.py:11 (attempt 1, hang_idle" in shown
    data = json.loads(run_fray("status", run_id, "--json", home=home.root, check=True).stdout)
    schema_validate("cli-status", data)
    attempt = data["attempts"][0]
    assert attempt["cause"] == "hang_idle" and attempt["watch"]["stacks"]["hung_in"] == "all_reduce, job.py:11"
    assert attempt["failure"]["stacks"]["hung_in"] == "all_reduce, job.py:11"
    stacks = run_fray("logs", run_id, "--stacks", home=home.root, check=True).stdout
    assert "=== attempt 1:" in stacks and "# hung in all_reduce, job.py:11" in stacks
    assert "<module> (job.py:14)" in stacks or 'job.py", line 14 in <module>' in stacks  # py-spy, or faulthandler
    data = json.loads(run_fray("logs", run_id, "--stacks", "--json", home=home.root, check=True).stdout)
    schema_validate("cli-logs", data)
    assert data["stream"] == "stacks" and any("all_reduce" in line for line in data["lines"])
    refused = run_fray("logs", run_id, "--stacks", "--stderr", home=home.root)
    assert refused.returncode == 2 and "does not go with --stderr" in refused.stderr


def test_a_progress_stall_the_daemon_ends_still_says_where_the_workload_spun(home, daemon, tmp_path):
    run_id = submit(home, tmp_path, SPINS)
    meta = wait_until(lambda: (m := meta_of(home, run_id))["phase"] == "ended" and m, timeout=60,
                      what="the run to end")
    assert meta["attempts"][0]["cause"] == "progress_stall"  # busy all along: the stall, not the idle check, ended it
    data = json.loads(run_fray("status", run_id, "--json", home=home.root, check=True).stdout)
    assert data["attempts"][0]["watch"]["stacks"]["hung_in"].startswith("spin, job.py:")
    shown = run_fray("status", run_id, home=home.root, check=True).stdout
    assert "spin, job.py:" in shown and "(attempt 1, progress_stall; all stacks: fray logs --stacks)" in shown
