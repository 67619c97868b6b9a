"""Hangs on the TPU backend, against the gcloud simulator (tests/fakes/gcloud): the same wrapper watch on each
host, so a workload that stops itself is ended, named, and the run resumes on a new attempt."""

from __future__ import annotations

import sys

import pytest

from conftest import start_daemon, stop_daemon, wait_until
from tests.backends.local.test_hang_local import stops_itself
from test_tpu_daemon import ended, sim, submit  # noqa: F401 (sim: a fixture)

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the hang watch reads Linux's /proc")]


def test_a_workload_that_stops_itself_on_a_tpu_host_is_ended_named_and_restarted(home, sim, tmp_path):
    script = tmp_path / "job.py"
    body, where = stops_itself()
    script.write_text(body)
    run_id = submit(home, script)
    daemon = start_daemon(home)
    try:
        meta = wait_until(lambda: ended(home, run_id), timeout=90, what="the run to end")
    finally:
        stop_daemon(daemon)
    assert meta["end"]["status"] == "completed_success", meta["attempts"]
    first = meta["attempts"][0]
    assert first["cause"] == "hang_stopped" and where in first["detail"]
    assert (home.run(run_id).attempt(1).dir / "stacks.txt").read_text().count("wait_for_the_operator") >= 1
