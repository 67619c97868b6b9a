"""A script run's wrapper is forked from the local backend's warm worker (fray.warm.daemon_side), not started
as a new Python, while its workload is still a new process of the run's own interpreter; a stop and a SIGKILL
of that wrapper end its workload as they do a cold wrapper's (the fence and kill tests of
test_process_tree.py run on this path too). A real daemon, real wrappers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import running, wait_until
from fray.state import runs
from fray.state.layout import Home

pytestmark = pytest.mark.slow

WAITS_FOR_GO = """import os, time
print("workload under", os.environ.get("SHIM_MARK"), flush=True)
while not os.path.exists(GO):
    time.sleep(0.05)
print("done", flush=True)
"""


def _interpreter(tmp_path: Path) -> Path:
    """The run's own interpreter: a shim that says so in the environment, then execs this Python."""
    shim = tmp_path / "my-python"
    shim.write_text(f"#!/bin/sh\nSHIM_MARK=the-runs-own-python exec {sys.executable} \"$@\"\n")
    shim.chmod(0o755)
    return shim


def _started(home: Home, tmp_path: Path, go: Path) -> tuple[str, dict]:
    """A run of WAITS_FOR_GO under the shim interpreter, once its first attempt has started: (run id, started.json)."""
    script = tmp_path / "wait_for_go.py"
    script.write_text(f"GO = {str(go)!r}\n" + WAITS_FOR_GO)
    run_id = runs.create_run(home, runs.SubmitOptions(script=script, overrides={"python": str(_interpreter(tmp_path))},
                                                      workdir=str(tmp_path))).run_id
    attempt = home.run(run_id).attempt(1)
    return run_id, wait_until(lambda: attempt.started.exists() and json.loads(attempt.started.read_text()),
                              timeout=30, what="the attempt to start")


def _meta(home: Home, run_id: str) -> dict:
    return json.loads(home.run(run_id).meta.read_text())


def _parent_cmdline(pid: int) -> bytes:
    with open(f"/proc/{pid}/stat") as handle:
        ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
    with open(f"/proc/{ppid}/cmdline", "rb") as handle:
        return handle.read()


def test_a_scripts_wrapper_is_forked_warm_and_its_workload_runs_under_the_runs_interpreter(home, tmp_path, daemon):
    go = tmp_path / "go"
    run_id, started = _started(home, tmp_path, go)
    attempt = home.run(run_id).attempt(1)
    assert b"fray.warm.worker" in _parent_cmdline(started["pid"])  # forked by the warm worker
    wait_until(lambda: b"workload under" in attempt.stdout.read_bytes() if attempt.stdout.exists() else False,
               what="the workload's first line")
    go.touch()
    wait_until(lambda: _meta(home, run_id)["phase"] == "ended", timeout=30, what="the run to end")
    assert _meta(home, run_id)["end"]["status"] == "completed_success"
    assert attempt.stdout.read_text() == "workload under the-runs-own-python\ndone\n"


def test_a_killed_warm_scripts_wrapper_takes_its_workload_with_it_and_is_retried(home, tmp_path, daemon):
    go = tmp_path / "go"
    run_id, started = _started(home, tmp_path, go)
    os.kill(started["pid"], signal.SIGKILL)
    wait_until(lambda: not running(started["workload_pid"]), timeout=10, what="the workload to die with its wrapper")
    second = home.run(run_id).attempt(2)
    wait_until(lambda: second.started.exists(), timeout=60, what="a second attempt")
    go.touch()
    wait_until(lambda: _meta(home, run_id)["phase"] == "ended", timeout=30, what="the run to end")
    assert _meta(home, run_id)["end"]["status"] == "completed_success"


FORKS_IN_ITS_FOLDER = """import os, sys, time
os.chdir(sys.argv[1])
child = os.fork()
if child == 0:
    time.sleep(60)  # a process the wrapper forked, not yet moved: a workload before its exec, a guardian
    os._exit(0)
print(child, flush=True)
time.sleep(60)
"""


def test_a_process_a_forked_wrapper_forks_in_its_folder_is_never_taken_for_that_wrapper(tmp_path):
    # The backend finds a warm wrapper by its command line (the warm worker's) and its working folder (the
    # attempt's), and so, for a moment, each process that wrapper forks. Taken for the wrapper, a script's
    # workload would get the attempt's stop itself: one that exits 0 on SIGTERM then passed for a success
    # (a restarted run ended `completed_success` under load).
    from fray.warm import daemon_side as warm

    home = tmp_path / "home"
    attempt = home / "runs" / "20261127-000000-job-0000" / "attempts" / "1"
    attempt.mkdir(parents=True)
    wrapper = subprocess.Popen([sys.executable, "-c", FORKS_IN_ITS_FOLDER, str(attempt), warm.MODULE, "--home",
                                str(home)], stdout=subprocess.PIPE, text=True)
    try:
        child = int(wrapper.stdout.readline())
        assert warm.forked_wrappers(home) == [wrapper.pid]
        assert warm.attempt_of(wrapper.pid, home) == ("20261127-000000-job-0000", 1)
        assert warm.attempt_of(child, home) is None
    finally:
        wrapper.kill()
        wrapper.wait()
        os.kill(child, signal.SIGKILL)
