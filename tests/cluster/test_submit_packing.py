"""`fray.submit` of short functions in a loop packs its calls into runs (fray.cluster.submits), as fray.map does,
each call keeping its own future, result and exception; a lone call, `after=` and checkpointable callables stay a
run each; a daemon killed mid-burst loses no call and makes none twice; calls pending at exit are still written.

A real daemon on the local backend (2 CPUs), real wrappers and files; waiting is `result(timeout)` or `wait_until`.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import fray
from conftest import REPO, run_fray, start_daemon, stop_daemon, wait_until
from fray import RemoteTraceback
from fray.state import store

import cloudpickle  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the jobs cannot import this module

pytestmark = pytest.mark.slow
CALLS = 100


@pytest.fixture
def two_cpus(home):
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 2}}))
    return home


def power(x: int, exponent: int = 2) -> int:
    if exponent < 0:
        raise ValueError(f"no negative powers of {x}")
    return x ** exponent


def counted(ledger: str, number: int) -> int:
    """Appends its number to the ledger each time it is made (one write: lines never mix), slowly enough that
    the test can kill the daemon midway."""
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{number}\n".encode())
    finally:
        os.close(fd)
    import time

    time.sleep(0.02)
    return number * number


def made(ledger: Path) -> list[int]:
    return [int(line) for line in ledger.read_text().split()] if ledger.exists() else []


class Resumable:
    """A checkpointable callable: resumes a run, so it never shares one."""

    def __call__(self, x: int) -> int:
        return x + 1

    def checkpoint(self, x: int) -> object:
        return fray.Call(self, x)


def test_a_loop_of_submits_comes_back_right_in_fewer_runs_than_calls_each_call_with_its_own_exception(
        two_cpus, daemon):
    futures = [fray.submit(power, i, exponent=-1 if i % 10 == 3 else 2) for i in range(CALLS)]
    for i, future in enumerate(futures):
        if i % 10 == 3:
            with pytest.raises(ValueError, match=f"no negative powers of {i}$") as caught:
                future.result(timeout=120)
            assert isinstance(caught.value.__cause__, RemoteTraceback)
            assert "raise ValueError" in str(caught.value.__cause__)
        else:
            assert future.result(timeout=120) == i * i
    runs = {future.run_id for future in futures}
    assert len(runs) < CALLS / 2, len(runs)  # packed, not a run per call (4 runs a burst written at once)
    assert set(two_cpus.run_ids()) == runs
    listed = json.loads(run_fray("list", "--json", home=two_cpus.root, check=True).stdout)
    assert sum(listed["counts"].values()) == len(runs), listed["counts"]  # what `fray list` counts: the runs
    some = futures[42]
    assert fray.get_run(some.run_id, call=some.index).result(timeout=10) == 42 * 42  # from any process, by call


def test_submits_from_several_threads_each_get_their_own_result(two_cpus, daemon):
    futures: dict[int, fray.RunFuture] = {}

    def submit_some(start: int) -> None:
        for i in range(start, start + 25):
            futures[i] = fray.submit(power, i)

    threads = [threading.Thread(target=submit_some, args=(start,)) for start in range(0, CALLS, 25)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {i: f.result(timeout=120) for i, f in futures.items()} == {i: i * i for i in range(CALLS)}
    assert len({f.run_id for f in futures.values()}) < CALLS / 2


def test_a_single_submit_is_an_ordinary_run_named_after_its_function(two_cpus, daemon):
    future = fray.submit(power, 7)
    assert future.result(timeout=60) == 49
    meta = store.read_json(two_cpus.meta_file(future.run_id), "meta")
    assert meta["name"] == "power" and meta.get("group") is None and future.index is None
    assert two_cpus.run_ids() == [future.run_id]
    wait_until(lambda: not any(t.name == "fray-submit-linger" for t in threading.enumerate()), timeout=10,
               what="the linger thread to end once nothing is pending (a later os.fork finds no thread of ours)")


def test_after_and_checkpointable_callables_keep_a_run_each(two_cpus, daemon):
    first = fray.submit(power, 2)
    waiting = [fray.submit(power, i, after=[first]) for i in range(3)]
    resumable = [fray.submit(Resumable(), i) for i in range(3)]
    assert [f.result(timeout=120) for f in waiting] == [0, 1, 4]
    assert [f.result(timeout=120) for f in resumable] == [1, 2, 3]
    runs = [f.run_id for f in [first, *waiting, *resumable]]
    assert len(set(runs)) == 7 and sorted(two_cpus.run_ids()) == sorted(runs)
    assert all(store.read_json(two_cpus.meta_file(run), "meta").get("group") is None for run in runs)
    assert all(f.index is None for f in [first, *waiting, *resumable])  # each the call of a run of its own


def test_a_daemon_killed_mid_burst_loses_no_call_and_makes_none_twice(two_cpus, tmp_path):
    ledger = tmp_path / "ledger"
    daemon = start_daemon(two_cpus)
    try:
        fn = functools.partial(counted, str(ledger))
        futures = [fray.submit(fn, i) for i in range(CALLS)]
        assert len({f.run_id for f in futures}) < CALLS / 2
        wait_until(lambda: len(made(ledger)) >= 10, timeout=60, what="calls to be made")
        daemon.send_signal(signal.SIGKILL)  # crash-only: no chance to clean up
        daemon.wait()
        assert len(made(ledger)) < CALLS, "the calls ended before the kill: the test proves nothing"
        daemon = start_daemon(two_cpus)
        assert [f.result(timeout=180) for f in futures] == [n * n for n in range(CALLS)]
    finally:
        stop_daemon(daemon)
    calls = made(ledger)
    assert sorted(calls) == list(range(CALLS)), [n for n in set(calls) if calls.count(n) > 1]


def test_a_call_cancelled_in_a_shared_run_is_skipped_alone_and_its_run_does_not_fail(two_cpus, daemon, tmp_path,
                                                                                        monkeypatch):
    from concurrent.futures import CancelledError

    from fray.cluster import submit_batch

    monkeypatch.setattr(submit_batch, "LINGER_SEC", 60)  # one group of them all, however slow the loop here:
    monkeypatch.setattr(submit_batch, "LINGER_MAX_SEC", 60)  # written when a future is first asked
    ledger = tmp_path / "ledger"
    fn = functools.partial(counted, str(ledger))
    futures = [fray.submit(fn, i) for i in range(CALLS)]
    last = futures[-1]
    assert last.index == CALLS - 1 and len({f.run_id for f in futures}) == 4  # its run waits for a CPU meanwhile
    assert last.cancel() is True
    with pytest.raises(CancelledError, match="cancelled by its future before it began"):
        last.result(timeout=120)
    assert [f.result(timeout=120) for f in futures[:-1]] == [n * n for n in range(CALLS - 1)]
    assert sorted(made(ledger)) == list(range(CALLS - 1))  # never made
    assert fray.get_run(last.run_id).info().status is fray.JobStatus.SUCCEEDED  # the run did not fail for it
    assert last.cancel() is False  # it has ended


SCRIPT = """
import os, sys
import fray
from fray.cluster import submit_batch
from fray.errors import UsageError

submit_batch.LINGER_SEC = submit_batch.LINGER_MAX_SEC = 60  # nothing written by the linger: only by what is tested

def counted(ledger, number):
    with open(ledger, "a") as out:
        out.write(f"{{number}}\\n")
    return number

futures = [fray.submit(counted, {ledger!r}, i) for i in range(20)]
{then}
"""


def run_script(home: Path, ledger: Path, then: str) -> subprocess.CompletedProcess[str]:
    source = SCRIPT.format(ledger=str(ledger), then=textwrap.dedent(then))
    return subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=60, cwd=REPO,
                          env={**os.environ, "FRAY_HOME": str(home.root)})


def test_calls_pending_when_the_script_exits_are_still_written_and_made(two_cpus, daemon, tmp_path):
    ledger = tmp_path / "ledger"
    proc = run_script(two_cpus, ledger, "sys.exit(0)  # without waiting for any of them")
    assert proc.returncode == 0, proc.stderr
    wait_until(lambda: len(made(ledger)) == 20, timeout=120, what="the calls written at exit to be made")
    assert len(two_cpus.run_ids()) < 20


def test_a_forked_child_never_writes_its_parents_pending_calls(two_cpus, daemon, tmp_path):
    ledger = tmp_path / "ledger"
    proc = run_script(two_cpus, ledger, """
        pid = os.fork()
        if pid == 0:  # the child: its copies of the futures are not its own to write, even at its exit
            try:
                futures[0].result(timeout=5)
            except UsageError as exc:
                print("child:", "submitted by process" in str(exc), flush=True)
            sys.exit(0)
        os.waitpid(pid, 0)
        print("parent:", [f.result(timeout=120) for f in futures] == list(range(20)), flush=True)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["child: True", "parent: True"], proc.stdout + proc.stderr
    assert sorted(made(ledger)) == list(range(20))  # each call made once: the child wrote none of them
