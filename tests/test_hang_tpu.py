"""Hangs on the TPU backend, against the gcloud simulator (tests/fakes/gcloud): the same wrapper watch on each
host, so a workload that stops itself is ended, named, and the run resumes on a new attempt."""

from __future__ import annotations

import sys

import pytest

from conftest import start_daemon, stop_daemon, wait_until
from test_tpu_daemon import ended, sim, submit  # noqa: F401 (sim: a fixture)

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the hang watch reads Linux's /proc")]

STOPS_ITSELF = f"""#!{sys.executable}
import os, signal
from fray import report

def wait_for_the_operator():
    os.kill(os.getpid(), signal.SIGSTOP)

if os.environ["FRAY_ATTEMPT"] == "1":
    wait_for_the_operator()
report.final(ok=True)
"""


def test_a_workload_that_stops_itself_on_a_tpu_host_is_ended_named_and_restarted(home, sim, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(STOPS_ITSELF)
    run_id = submit(home, script)
    daemon = start_daemon(home)
    try:
        meta = wait_until(lambda: ended(home, run_id), timeout=90, what="the run to end")
    finally:
        stop_daemon(daemon)
    assert meta["end"]["status"] == "completed_success", meta["attempts"]
    first = meta["attempts"][0]
    assert first["cause"] == "hang_stopped" and "hung in wait_for_the_operator, train.py:6" in first["detail"]
    assert (home.run(run_id).attempt(1).dir / "stacks.txt").read_text().count("wait_for_the_operator") >= 1
