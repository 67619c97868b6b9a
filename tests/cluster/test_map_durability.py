"""fray.map without chunk= packs its calls into runs, and each call is still made once: a daemon killed
(SIGKILL) mid-map and started again loses no call and makes none twice."""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
from pathlib import Path

import pytest

import fray
from conftest import start_daemon, stop_daemon, wait_until
from fray.state import store

import cloudpickle  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the jobs cannot import this module

pytestmark = pytest.mark.slow
CALLS = 120


def counted(ledger: str, number: int) -> int:
    """Appends its number to the ledger each time it is made (one write: lines never mix), at a pace that
    lets the test kill the daemon midway."""
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{number}\n".encode())
    finally:
        os.close(fd)
    import time

    time.sleep(0.02)  # the job's own pace
    return number * number


def made(ledger: Path) -> list[int]:
    return [int(line) for line in ledger.read_text().split()] if ledger.exists() else []


def test_a_daemon_killed_mid_map_loses_no_call_and_makes_none_twice(home, tmp_path):
    ledger = tmp_path / "ledger"
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 2}}))
    daemon = start_daemon(home)
    try:
        futures = fray.map(functools.partial(counted, str(ledger)), range(CALLS))
        assert len({f.run_id for f in futures}) == 4  # never measured: two runs per CPU, not one per call
        wait_until(lambda: len(made(ledger)) >= 10, timeout=60, what="calls to be made")
        daemon.send_signal(signal.SIGKILL)  # crash-only: no chance to clean up
        daemon.wait()
        assert len(made(ledger)) < CALLS, "the map ended before the kill: the test proves nothing"
        daemon = start_daemon(home)
        assert [f.result(timeout=180) for f in futures] == [n * n for n in range(CALLS)]
    finally:
        stop_daemon(daemon)
    calls = made(ledger)
    assert sorted(calls) == list(range(CALLS)), [n for n in set(calls) if calls.count(n) > 1]


def test_a_host_killed_mid_chunk_has_its_run_retried_making_only_the_calls_without_a_durable_result(home, daemon,
                                                                                                     tmp_path):
    from fray.cluster.call_book import CallBook

    ledger = tmp_path / "ledger"
    futures = fray.map(functools.partial(counted, str(ledger)), range(CALLS), max_retries=1)
    first = futures[0].run_id
    book = CallBook(home.run(first), home.root)
    wait_until(lambda: book.returned(0) and book.returned(5), timeout=60, what="the first calls committed")
    host = json.loads(home.run(first).attempt(1).started.read_text())["pid"]
    os.kill(host, signal.SIGKILL)  # as the OOM killer would: no chance to commit what it had staged
    wait_until(lambda: not Path(f"/proc/{host}").exists() or "Z" in Path(f"/proc/{host}/stat").read_text(),
               timeout=30, what="the host to die")
    ours = [f.index for f in futures if f.run_id == first]
    durable = [n for n in ours if (record := book.record(n)) is not None and record["attempt"] == 1]
    assert [f.result(timeout=180) for f in futures] == [n * n for n in range(CALLS)]
    calls = made(ledger)
    assert len(store.read_json(home.meta_file(first), "meta")["attempts"]) == 2  # the killed run was retried
    assert durable and all(calls.count(n) == 1 for n in durable), [n for n in durable if calls.count(n) > 1]
    assert sorted(set(calls)) == list(range(CALLS))  # none lost
    others = [n for n in range(CALLS) if n not in ours]
    assert all(calls.count(n) == 1 for n in others)  # the other runs' calls, untouched by the kill
