"""The local backend's queue of functions on its warm worker (fray.warm.daemon_side, fray.warm.queueing).

On a machine configured with one CPU, function runs are submitted beyond it and wait in the warm worker's
queue: `fray status` says they are queued on the machine, no heartbeat clock runs for them, only one function
runs at a time, and the next starts when the one before it ends. A cancel takes a queued attempt out of the
queue (it never starts); a warm worker killed with attempts queued leaves them gone, and the policy retries
them. Real daemons, real processes; waiting is `result(timeout)` or `wait_until`.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import fray
from conftest import start_daemon, stop_daemon, wait_until
from fray.warm import daemon_side as warm
from fray.state import runs, store
from fray.state.layout import Home
from test_warm_functions import warm_workers

import cloudpickle  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the jobs cannot import this module

pytestmark = pytest.mark.slow


def holds(folder: str, index: int) -> int:
    """Says when it starts and ends (in `folder`), and holds its CPU until `folder`/release exists."""
    import os
    import time

    began = time.time()
    open(os.path.join(folder, f"running-{index}"), "w").close()
    while not os.path.exists(os.path.join(folder, "release")):
        time.sleep(0.02)
    with open(os.path.join(folder, f"span-{index}"), "w") as handle:
        handle.write(f"{began} {time.time()}")
    return index * index


@pytest.fixture
def one_cpu(home: Home):
    """A daemon for `home`, whose local backend has one CPU."""
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 1}}))
    daemon = start_daemon(home)
    yield daemon
    stop_daemon(daemon)


def status(run_id: str) -> dict:
    done = subprocess.run(["fray", "status", run_id, "--json"], capture_output=True, text=True, check=True,
                          env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    return json.loads(done.stdout)["run"]


def assert_one_at_a_time(folder: Path, count: int) -> None:
    """The `count` functions' spans (from their start to their end) never overlap."""
    spans = sorted(tuple(map(float, (folder / f"span-{i}").read_text().split())) for i in range(count))
    assert all(ended <= began for (_, ended), (began, _) in zip(spans, spans[1:])), spans


def parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2:].split()[1])


def queued(home: Home, run_id: str) -> bool:
    """The run's attempt is with the warm worker, waiting for a CPU (as its meta.json and `fray status` say)."""
    meta = store.read_json(home.meta_file(run_id), "meta")
    attempt = meta["attempts"][-1] if meta["attempts"] else None
    return attempt is not None and attempt["state"] == "submitted" and bool(attempt["backend_ref"].get("queued"))


def test_functions_past_the_cpus_wait_queued_on_the_machine_and_run_one_at_a_time(home, one_cpu, tmp_path):
    futures = fray.map(functools.partial(holds, str(tmp_path)), range(4), chunk=1)
    wait_until(lambda: (tmp_path / "running-0").exists(), timeout=60, what="the first function to run")
    wait_until(lambda: all(queued(home, f.run_id) for f in futures[1:]), timeout=60,
               what="the other functions queued on the warm worker")
    for future in futures[1:]:
        shown = status(future.run_id)
        assert shown["status"] == "pending"
        assert "queued on the machine" in shown["reason"]
        assert not home.run(future.run_id).attempt(1).started.exists()  # no start, so no heartbeat clock
        # No node yet, as a Slurm job PENDING: it is written with the start.
        assert store.read_json(home.meta_file(future.run_id), "meta")["attempts"][0]["node"] is None
    assert sorted(p.name for p in tmp_path.glob("running-*")) == ["running-0"]  # one CPU: one runs
    (tmp_path / "release").touch()
    assert [f.result(timeout=120) for f in futures] == [0, 1, 4, 9]
    assert_one_at_a_time(tmp_path, 4)
    for future in futures:
        meta = store.read_json(home.meta_file(future.run_id), "meta")
        assert [(a["cause"], a["node"]) for a in meta["attempts"]] == [("success", socket.gethostname())]


def test_a_cancelled_queued_function_leaves_the_queue_and_never_starts(home, one_cpu, tmp_path):
    first = fray.submit(holds, str(tmp_path), 0)
    wait_until(lambda: (tmp_path / "running-0").exists(), timeout=60, what="the first function to run")
    second = fray.submit(holds, str(tmp_path), 1)
    wait_until(lambda: queued(home, second.run_id), timeout=60, what="the second function queued")
    assert second.cancel()
    wait_until(lambda: status(second.run_id)["status"] == "stopped_manual", timeout=60, what="the cancel")
    (tmp_path / "release").touch()
    assert first.result(timeout=60) == 0
    third = fray.submit(holds, str(tmp_path), 2)  # the CPU it held is free again
    assert third.result(timeout=60) == 4
    attempt = home.run(second.run_id).attempt(1)
    assert not (tmp_path / "running-1").exists() and not attempt.started.exists() and not attempt.exit.exists()


def test_a_warm_worker_killed_with_functions_queued_has_them_retried(home, one_cpu, tmp_path):
    futures = fray.map(functools.partial(holds, str(tmp_path)), range(3), chunk=1)
    wait_until(lambda: (tmp_path / "running-0").exists(), timeout=60, what="the first function to run")
    wait_until(lambda: all(queued(home, f.run_id) for f in futures[1:]), timeout=60, what="the others queued")
    forks = warm_workers(home)  # the worker, and the wrapper (and its workload) forked from it
    [worker] = [pid for pid in forks if parent(pid) == one_cpu.pid]
    os.kill(worker, signal.SIGKILL)
    for future in futures[1:]:
        wait_until(lambda: len(store.read_json(home.meta_file(future.run_id), "meta")["attempts"]) == 2,
                   timeout=60, what="the queued attempt retried")
    # The new worker counts the CPU the old one's wrapper still holds: the retries wait in its queue.
    wait_until(lambda: all(queued(home, f.run_id) for f in futures[1:]), timeout=60, what="the retries queued")
    assert sorted(p.name for p in tmp_path.glob("running-*")) == ["running-0"]
    (tmp_path / "release").touch()
    assert [f.result(timeout=120) for f in futures] == [0, 1, 4]
    assert_one_at_a_time(tmp_path, 3)
    first = store.read_json(home.meta_file(futures[0].run_id), "meta")
    assert [a["cause"] for a in first["attempts"]] == ["success"]  # its wrapper outlived the worker
    for future in futures[1:]:
        meta = store.read_json(home.meta_file(future.run_id), "meta")
        assert [a["cause"] for a in meta["attempts"]] == ["lost", "success"]
        assert meta["attempts"][0]["detail"] == warm.GONE_FROM_QUEUE
        assert not home.run(future.run_id).attempt(1).started.exists()


def test_a_daemon_restarted_with_functions_queued_runs_each_once_more(home, tmp_path):
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 1}}))
    daemon = start_daemon(home)
    try:
        futures = fray.map(functools.partial(holds, str(tmp_path)), range(3), chunk=1)
        wait_until(lambda: (tmp_path / "running-0").exists(), timeout=60, what="the first function to run")
        wait_until(lambda: all(queued(home, f.run_id) for f in futures[1:]), timeout=60, what="functions queued")
        stop_daemon(daemon)
        daemon = start_daemon(home)
        wait_until(lambda: all(len(store.read_json(home.meta_file(f.run_id), "meta")["attempts"]) == 2
                               and queued(home, f.run_id) for f in futures[1:]), timeout=60,
                   what="the queued attempts retried, and queued behind the one still running")
        assert sorted(p.name for p in tmp_path.glob("running-*")) == ["running-0"]
        (tmp_path / "release").touch()
        assert [f.result(timeout=120) for f in futures] == [0, 1, 4]
        assert_one_at_a_time(tmp_path, 3)
    finally:
        stop_daemon(daemon)
    for future in futures[1:]:
        meta = store.read_json(home.meta_file(future.run_id), "meta")
        assert [a["cause"] for a in meta["attempts"]] == ["lost", "success"]


def test_a_script_waiting_for_the_cpu_is_not_overtaken_by_functions_queued_after_it(home, one_cpu, tmp_path):
    first = fray.submit(holds, str(tmp_path), 0)
    wait_until(lambda: (tmp_path / "running-0").exists(), timeout=60, what="the first function to run")
    script = tmp_path / "script.sh"
    script.write_text(f"#!/bin/bash\ntouch {tmp_path}/script-ran\n")
    script_run = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(tmp_path))).run_id
    wait_until(lambda: (store.read_json(home.meta_file(script_run), "meta")["wait_reason"] or "").startswith(
        "waiting for resources"), timeout=60, what="the script waiting for the CPU")
    later = fray.map(functools.partial(holds, str(tmp_path)), range(1, 3), chunk=1)
    def decided(run_id: str) -> bool:
        meta = store.read_json(home.meta_file(run_id), "meta")
        return bool(meta["attempts"]) or (meta["wait_reason"] or "").startswith("waiting for resources")

    wait_until(lambda: all(decided(f.run_id) for f in later), timeout=60, what="the later functions decided")
    assert all(not store.read_json(home.meta_file(f.run_id), "meta")["attempts"] for f in later)  # not queued
    (tmp_path / "release").touch()
    assert first.result(timeout=60) == 0
    assert [f.result(timeout=120) for f in later] == [1, 4]
    script_started = store.read_json(home.meta_file(script_run), "meta")["attempts"][0]["started_at"]
    assert all(script_started < float((tmp_path / f"span-{i}").read_text().split()[0]) for i in (1, 2))
