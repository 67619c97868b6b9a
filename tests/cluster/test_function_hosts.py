"""Function hosts (fray.warm.function_host): many function attempts in one process, each as if it were alone.

A host runs attempt after attempt in itself, so each function must find the host as a new Python would have
started: no environment, working folder, sys.path, module or stale copy of the user's code left by the
function before it; and whatever cannot be put back (fray's own process-wide state: a cluster handle, an actor
connection) retires the host. Real daemons, real processes; the same host is checked by the pid that
started.json names.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import fray
from conftest import wait_until
from fray.warm import host_pool
from fray.state.layout import Home
from fray.wrapper.options import parse

import cloudpickle  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the jobs cannot import this module

pytestmark = pytest.mark.slow


def leaves_traces(folder: str) -> str:
    os.environ["LEFT_BY_THE_FIRST"] = "yes"
    os.chdir(folder)
    sys.path.insert(0, folder)
    sys.modules["left_by_the_first"] = sys  # a module only this function imported
    return "left"


def looks_around(_: int) -> dict:
    return {"env": os.environ.get("LEFT_BY_THE_FIRST"), "cwd": os.getcwd(),
            "in_path": any("left-here" in entry for entry in sys.path), "module": "left_by_the_first" in sys.modules}


def takes_a_cluster_handle() -> str:
    return type(fray.current_cluster()).__name__


def host_of(home: Home, future: fray.Future) -> int:
    return json.loads(home.run(future.run_id).attempt(1).started.read_text())["pid"]


def test_a_function_finds_nothing_the_function_before_it_left_in_their_host(home, daemon, tmp_path, monkeypatch):
    folder = tmp_path / "left-here"
    folder.mkdir()
    first = fray.submit(leaves_traces, str(folder))
    assert first.result(timeout=60) == "left"
    second = fray.submit(looks_around, 0)
    seen = second.result(timeout=60)
    assert host_of(home, first) == host_of(home, second), "the second function ran in another host: nothing shown"
    assert seen == {"env": None, "cwd": os.getcwd(), "in_path": False, "module": False}


def test_a_users_module_changed_between_two_functions_is_imported_again(home, daemon, tmp_path, monkeypatch):
    project = tmp_path / "project"
    project.mkdir()
    module = project / "release.py"
    module.write_text("NAME = 'first'\ndef name(_):\n    return NAME\n")
    monkeypatch.syspath_prepend(str(project))
    monkeypatch.chdir(project)
    import release

    first = fray.submit(release.name, 0)
    assert first.result(timeout=60) == "first"
    module.write_text("NAME = 'second'\ndef name(_):\n    return NAME\n")
    second = fray.submit(release.name, 0)
    assert second.result(timeout=60) == "second"
    assert host_of(home, first) == host_of(home, second)


def test_a_function_that_took_a_cluster_handle_retires_its_host(home, daemon):
    first = fray.submit(takes_a_cluster_handle)
    assert first.result(timeout=60)
    second = fray.submit(looks_around, 0)
    second.result(timeout=60)
    # The handle names the first attempt's namespace: a later function in that host would use it.
    assert host_of(home, first) != host_of(home, second)
    retired = host_of(home, first)
    wait_until(lambda: not os.path.exists(f"/proc/{retired}"), what="the retired host to exit")


def imports_a_compiled_extension(_: int) -> str:
    import bcrypt  # paramiko's: a compiled module, which no process can import twice

    return bcrypt.gensalt(4).decode()[:7]


def test_a_function_that_loaded_a_compiled_extension_retires_its_host(home, daemon):
    first = fray.submit(imports_a_compiled_extension, 0)
    assert first.result(timeout=60) == "$2b$04$"
    second = fray.submit(looks_around, 0)
    second.result(timeout=60)
    assert host_of(home, first) != host_of(home, second)


def test_a_stopped_host_that_outlives_its_grace_is_killed(tmp_path):
    # A function may ignore SIGTERM: the worker (HostPool) then SIGKILLs its host's group once the attempt's
    # --stop-grace is over, as a wrapper kills a workload that will not stop. The host here is a real process
    # in a session of its own that ignores SIGTERM.
    host = subprocess.Popen(["bash", "-c", "trap '' TERM; while :; do sleep 0.05; done"], start_new_session=True)
    wait_until(lambda: _ignores(host.pid, signal.SIGTERM), what="the shell to ignore SIGTERM")
    pool = host_pool.HostPool()
    folder = str(tmp_path / "attempts" / "1")
    options = parse(["run", "--run-id", "r", "--attempt", "1", "--attempt-dir", folder, "--script", "s.py",
                     "--stop-grace", "0.3"])
    pool.hosts[host.pid] = host_pool.Host(host.pid, -1, -1, host_pool.Serving(folder, options, time.time()))
    assert pool.stop(folder, signal.SIGUSR2) and not pool.stop(str(tmp_path / "other"), signal.SIGUSR2)
    assert host.poll() is None, "SIGTERM is ignored"
    deadline = pool.next_deadline()
    assert deadline is not None and deadline <= 0.3
    wait_until(lambda: (pool.enforce_grace(), host.poll())[1] is not None, timeout=5, what="the SIGKILL after the grace")
    assert host.returncode == -signal.SIGKILL
    assert pool.next_deadline() is None


def _ignores(pid: int, signum: int) -> bool:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def test_a_host_killed_while_idle_costs_the_next_function_nothing(home, daemon):
    first = fray.submit(looks_around, 0)
    first.result(timeout=60)
    idle = host_of(home, first)
    os.kill(idle, signal.SIGKILL)  # between two attempts: the worker may not have reaped it yet
    second = fray.submit(looks_around, 1)
    assert second.result(timeout=60)["env"] is None
    assert host_of(home, second) != idle
    meta = json.loads(home.run(second.run_id).meta.read_text())
    assert [a["cause"] for a in meta["attempts"]] == ["success"]
    assert not (home.run(first.run_id).attempt(1).dir / "failure.json").exists()


def reports_progress(steps: int) -> int:
    from fray import report

    for step in range(steps):
        report.progress(step=step, loss=1.0 / (step + 1))
    return steps


def test_a_function_that_reports_progress_has_it_written_and_keeps_its_host(home, daemon):
    first = fray.submit(reports_progress, 500)
    assert first.result(timeout=60) == 500
    progress = json.loads(home.run(first.run_id).attempt(1).dir.joinpath("progress.json").read_text())
    assert progress["step"] == 499  # written before the attempt's end: no atexit in a host
    second = fray.submit(looks_around, 0)
    second.result(timeout=60)
    assert host_of(home, first) == host_of(home, second), "the reporting thread retired the host"
