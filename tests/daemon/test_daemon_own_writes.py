"""The daemon does not read back the meta.json it has just written, and still reads one changed by anyone else.

The cycle's group commit (fray.state.commit_batch) tells the daemon's writer
which files it put in place, and the index takes their new stat then
(fray.daemon.run_writes): the next cycle finds them unchanged. A meta.json
changed after that (by hand, or damaged) has another stat, and is read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import wait_until
from fray.daemon import run_index
from fray.daemon.loop import Daemon
from fray.state import runs, store
from fray.state.layout import Home

pytestmark = pytest.mark.slow

LONG_RUNNING = """#!/bin/bash
#FRAY --heartbeat-interval 0.5 --stop-grace 2
trap 'exit 0' TERM
while true; do sleep 0.1; done
"""


def test_a_cycle_reads_back_no_meta_json_it_wrote_but_one_changed_since(home: Home, tmp_path: Path, monkeypatch):
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"warm_functions": False}}))
    script = tmp_path / "serve.sh"
    script.write_text(LONG_RUNNING)
    run_id = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(tmp_path))).run_id
    reads: list[str] = []
    real_read = run_index.run_meta.read

    def counting_read(paths, on_restored=None):
        reads.append(paths.run_id)
        return real_read(paths, on_restored)

    monkeypatch.setattr(run_index.run_meta, "read", counting_read)
    daemon = Daemon(home)
    meta = home.run(run_id).meta

    def state() -> str:
        attempts = json.loads(meta.read_text())["attempts"]
        return attempts[-1]["state"] if attempts else "none"

    try:
        daemon.cycle(True)
        wait_until(lambda: daemon.cycle(False) is not None and state() == "running", timeout=30,
                   what="the attempt recorded running")  # that cycle wrote meta.json
        written = meta.read_bytes()
        reads.clear()
        daemon.cycle(False)
        assert run_id not in reads  # what it wrote is what it has
        assert meta.read_bytes() == written  # and nothing changed meanwhile: the next cycle had no reason to read it

        meta.write_text("{ damaged")  # by anyone but the daemon: another stat
        daemon.cycle(False)
        assert run_id in reads
        assert json.loads(meta.read_text()) == json.loads(home.run(run_id).meta_copy.read_text())  # restored
    finally:
        runs.request(home, run_id, "stop")
        wait_until(lambda: daemon.cycle(False) is not None and json.loads(meta.read_text())["phase"] == "ended",
                   timeout=30, what="the run to stop")
