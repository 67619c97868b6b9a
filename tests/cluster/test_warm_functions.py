"""Function runs on the local backend forked from a warm worker (fray.warm.daemon_side, fray.wrapper.forked).

The same calls give the same records warm as cold (`"warm_functions": false`): the value, the exception and
its traceback, what the function printed, its retries, its exit record. A workload killed mid-function ends
its attempt as a kill by that signal, and the policy retries it. A warm worker that died is started again.
Real daemons, real processes; waiting is `result(timeout)` or `wait_until`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

import fray
from conftest import start_daemon, stop_daemon, wait_until
from fray.warm import daemon_side as warm
from fray.state import store
from fray.state.layout import Home
from fray.wrapper import procs

import cloudpickle  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the jobs cannot import this module

pytestmark = pytest.mark.slow


def shout(text: str) -> str:
    print(f"shouting {text!r}", flush=True)
    return text.upper()


def refuses(word: str) -> None:
    raise ValueError(f"no {word!r} here")


def fails_first(_: int) -> int:
    if os.environ["FRAY_ATTEMPT"] == "1":
        raise RuntimeError("first attempt fails")
    return int(os.environ["FRAY_ATTEMPT"])


def waits_unless_retried(path: str) -> str:
    while os.environ["FRAY_ATTEMPT"] == "1" and not os.path.exists(path):
        pass  # spins: killed from outside before the file ever appears
    return f"attempt {os.environ['FRAY_ATTEMPT']}"


def warm_processes(home: Home) -> list[int]:
    """Pids of this home's warm worker processes and of what they forked (function hosts, their guardians)."""
    found = []
    for name in os.listdir("/proc"):
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if warm.MODULE.encode() in argv and str(home.root).encode() in argv:
            found.append(int(name))
    return found


def warm_workers(home: Home) -> list[int]:
    """Pids of this home's warm workers: not the function hosts they forked, nor those hosts' guardians."""
    found = warm_processes(home)
    return [pid for pid in found if procs.parent_of(pid) not in found]


def _calls(home: Home) -> list[dict]:
    """Run the same calls; what a user can see of each: result, records, logs (times and hosts left out)."""
    futures = [fray.submit(shout, "hello"), fray.submit(refuses, "fish"),
               *fray.map(fails_first, [0, 1], max_retries=1)]
    seen = []
    for future in futures:
        try:
            value: object = future.result(timeout=120)
        except Exception as exc:  # noqa: BLE001  the call's own exception, compared below
            value = f"{type(exc).__name__}: {exc} / {exc.__cause__}"
        meta = store.read_json(home.meta_file(future.run_id), "meta")
        attempts = []
        for attempt in meta["attempts"]:
            files = home.run(future.run_id).attempt(attempt["number"])
            record = json.loads(files.call_record.read_text()) if files.call_record.exists() else {}
            exit_record = json.loads(files.exit.read_text())
            attempts.append({
                "cause": attempt["cause"], "stdout": files.stdout.read_text(),
                "record": {k: v for k, v in record.items() if k != "finished_at"},
                "exit": {k: v for k, v in exit_record.items() if k not in ("started_at", "ended_at", "run_id")},
            })
        seen.append({"value": value, "status": meta["end"]["status"], "attempts": attempts})
    return seen


def test_warm_and_cold_function_runs_leave_the_same_records(tmp_path, monkeypatch):
    results = {}
    for mode in ("cold", "warm"):
        home = Home(tmp_path / mode)
        store.ensure_home(home)
        home.config.write_text(json.dumps({"local": {"warm_functions": mode == "warm"}}))
        monkeypatch.setenv("FRAY_HOME", str(home.root))
        daemon = start_daemon(home)
        try:
            results[mode] = _calls(home)
            assert bool(warm_workers(home)) == (mode == "warm")
        finally:
            stop_daemon(daemon)
    assert results["warm"] == results["cold"]
    assert [r["status"] for r in results["warm"]] == ["completed_success", "failed", "completed_success",
                                                      "completed_success"]
    assert results["warm"][0]["value"] == "HELLO" and "shouting 'hello'" in results["warm"][0]["attempts"][0]["stdout"]
    assert "no 'fish' here" in results["warm"][1]["attempts"][0]["record"]["traceback"]
    assert [len(r["attempts"]) for r in results["warm"][2:]] == [2, 2]


def test_a_workload_killed_mid_function_ends_its_attempt_killed_and_is_retried(home, daemon, tmp_path):
    future = fray.submit(waits_unless_retried, str(tmp_path / "never"), max_retries=1)
    started = home.run(future.run_id).attempt(1).started
    wait_until(started.exists, timeout=60, what="the function to start")
    os.kill(json.loads(started.read_text())["workload_pid"], signal.SIGKILL)
    assert future.result(timeout=60) == "attempt 2"
    first = json.loads(home.run(future.run_id).attempt(1).exit.read_text())
    assert first["workload_signal"] == "SIGKILL" and first["workload_exit_code"] is None
    meta = store.read_json(home.meta_file(future.run_id), "meta")
    assert [a["cause"] for a in meta["attempts"]] == ["workload_failure", "success"]


def test_a_warm_worker_that_died_is_started_again(home, daemon):
    assert fray.submit(shout, "one").result(timeout=60) == "ONE"
    [first] = warm_workers(home)
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: first not in warm_workers(home), what="the warm worker gone")
    assert fray.submit(shout, "two").result(timeout=60) == "TWO"
    assert [pid for pid in warm_workers(home) if pid != first], "no new warm worker"


def sleeps_long() -> None:
    import time

    time.sleep(600)


def test_a_stopped_warm_function_dies_of_the_stop_not_after_the_grace_period(home, daemon):
    # A fork keeps its parent's signal handlers: the workload must die of the wrapper's SIGTERM as a new
    # Python would, not run the wrapper's handler and live on until the grace period's SIGKILL (30 s).
    future = fray.submit(sleeps_long)
    started = home.run(future.run_id).attempt(1).started
    wait_until(started.exists, timeout=60, what="the function to start")
    pid = json.loads(started.read_text())["workload_pid"]
    assert future.cancel()
    wait_until(lambda: not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z",
               timeout=20, what="the stopped workload to die")
    exit_file = home.run(future.run_id).attempt(1).exit
    wait_until(exit_file.exists, timeout=20, what="the exit record")
    assert json.loads(exit_file.read_text())["workload_signal"] == "SIGTERM"


def leaves_a_child(marker: str) -> None:
    import subprocess
    import time

    child = subprocess.Popen(["sleep", "600"], start_new_session=True)  # escapes the workload's group
    Path(marker).write_text(str(child.pid))
    time.sleep(600)


def test_a_killed_warm_wrappers_guardian_is_a_fork_and_kills_what_its_function_left(home, tmp_path):
    # The guardian of a wrapper forked from the warm worker is a fork too, not a new Python (its start would
    # cost a short function more than the function), and it still does its job: with no daemon left to
    # sweep, it kills what the function left running once the wrapper is SIGKILLed, and says so.
    daemon = start_daemon(home)
    marker = tmp_path / "child"
    future = fray.submit(leaves_a_child, str(marker))
    started = home.run(future.run_id).attempt(1).started
    wait_until(lambda: started.exists() and marker.exists(), timeout=60, what="the function and its child")
    exec_d = [name for name in os.listdir("/proc") if name.isdigit() and b"fray.wrapper.guardian" in
              _cmdline(name) and future.run_id.encode() in _cmdline(name)]
    assert exec_d == []
    stop_daemon(daemon)  # the warm worker goes with it; the wrapper, its guardian and the function live on
    child = int(marker.read_text())
    os.kill(json.loads(started.read_text())["pid"], signal.SIGKILL)
    wait_until(lambda: not Path(f"/proc/{child}").exists(), timeout=10, what="the guardian to kill the child")
    log = home.run(future.run_id).attempt(1).wrapper_log
    wait_until(lambda: f"guardian: killed pids" in log.read_text() and str(child) in log.read_text(),
               what="the guardian's line in wrapper.log")


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _maps(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def test_the_warm_worker_imports_once_the_standard_modules_a_function_needed_never_the_users_own(
        home, daemon, tmp_path, monkeypatch):
    # A function's module is imported again by every workload (unpickling it): the standard-library modules
    # it needs (here `decimal`, a C extension the worker has not loaded) are imported by the warm worker
    # after the first call, so later forks have them; the user's own module (which says who imports it)
    # never is: it may change on disk while the worker lives.
    project = tmp_path / "project"
    project.mkdir()
    imported_by = tmp_path / "imported-by"
    (project / "shapes.py").write_text(
        "import decimal\nimport os\n"
        f"with open({str(imported_by)!r}, 'a') as log:\n    log.write(f'{{os.getpid()}}\\n')\n"
        "def area(side):\n    return str(decimal.Decimal(side) ** 2)\n")
    monkeypatch.syspath_prepend(str(project))
    monkeypatch.chdir(project)
    import shapes

    assert fray.submit(shapes.area, "1.5").result(timeout=60) == "2.25"
    [worker] = warm_workers(home)
    wait_until(lambda: "_decimal" in _maps(worker), what="the warm worker to import decimal")
    assert [f.result(timeout=60) for f in fray.map(shapes.area, ["2", "3"])] == ["4", "9"]
    assert str(worker) not in imported_by.read_text().split() and len(imported_by.read_text().split()) == 4


def test_a_projects_own_module_named_like_a_learned_standard_one_is_the_one_its_functions_import(
        home, daemon, tmp_path, monkeypatch):
    # The warm worker has learned the standard `statistics` from one project's function; another project
    # has its own statistics.py beside its code, which a new Python would import instead: so must its
    # functions, forked from that worker.
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
    (first / "averages.py").write_text("import statistics\ndef mean(xs):\n    return statistics.mean(xs)\n")
    (second / "statistics.py").write_text("MARK = 'the project s own'\n")
    (second / "which.py").write_text("import statistics\ndef mark(_):\n    return getattr(statistics, 'MARK', 'standard')\n")
    monkeypatch.syspath_prepend(str(first))
    monkeypatch.chdir(first)
    import averages

    assert fray.submit(averages.mean, [1, 2, 3]).result(timeout=60) == 2
    [worker] = warm_workers(home)
    wait_until(lambda: "_statistics" in _maps(worker), what="the warm worker to learn statistics")
    monkeypatch.syspath_prepend(str(second))
    monkeypatch.chdir(second)
    import which

    assert [f.result(timeout=60) for f in fray.map(which.mark, [0, 1])] == ["the project s own"] * 2


def test_function_hosts_stay_one_per_cpu_at_most_and_keep_nothing_of_their_functions(home, daemon):
    # Functions run in hosts forked once (fray.warm.function_host), not in a wrapper, guardian and
    # workload forked each: after a map, what the worker forked is at most a host per CPU, each with its
    # guardian only (its own child, which the clean-up after each function must leave out: signalled, it
    # would ignore the SIGTERM and hold that clean-up for its grace period before a SIGKILL).
    futures = fray.map(shout, list("abcdef"))
    assert [f.result(timeout=60) for f in futures] == list("ABCDEF")
    # A result is there before its attempt's last record (exit.json, once the host has cleaned up after it).
    wait_until(lambda: all(home.run(f.run_id).attempt(1).exit.exists() for f in futures), timeout=30,
               what="every attempt's exit record")
    [worker] = warm_workers(home)
    hosts = [pid for pid in warm_processes(home) if procs.parent_of(pid) == worker]
    assert 1 <= len(hosts) <= (os.cpu_count() or 1)
    for host in hosts:
        [guardian] = procs.descendants(host)  # nothing any function started
        assert os.readlink(f"/proc/{guardian}/cwd") == "/" and os.getsid(guardian) == guardian
    served = {json.loads(home.run(f.run_id).attempt(1).started.read_text())["pid"] for f in futures}
    assert served <= set(hosts)
    for future in futures:
        exit_record = json.loads(home.run(future.run_id).attempt(1).exit.read_text())
        started = json.loads(home.run(future.run_id).attempt(1).started.read_text())
        assert exit_record["ended_at"] - started["started_at"] < 5, "the clean-up waited for something"
