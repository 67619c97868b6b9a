"""The real daemon running TPU runs against the gcloud simulator (tests/fakes/gcloud).

The simulator's `ssh --worker=all` runs one local process per host, so the real
wrapper runs on every "host" and writes into the shared FRAY_HOME.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import start_daemon, stop_daemon, wait_until
from fray.backends.tpu import parse
from fray.state import runs
from fray.state.layout import Home

FAKES = Path(__file__).parent / "fakes" / "gcloud"
ZONE = "us-west4-a"


@pytest.fixture
def sim(tmp_path, monkeypatch, home):
    state = tmp_path / "gcloud-state"
    state.mkdir()
    (state / "config.json").write_text(json.dumps({"ready_after_sec": 0.3, "quota_zones": ["us-east1-d"]}))
    monkeypatch.setenv("FRAY_GCLOUD_SIM", str(state))
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    home.root.mkdir(parents=True, exist_ok=True)
    home.config.write_text(json.dumps({"tpu": {"poll_interval_sec": 0.3, "zones": [ZONE]}}))
    return state


def submit(home: Home, script: Path, **overrides) -> str:
    overrides = {"backend": "tpu", "tpu": "v4-8", "zones": [ZONE], "runtime_version": "tpu-ubuntu2204-base",
                 "spot": True, "heartbeat_interval_sec": 0.5, "backoff_base_sec": 0.0, **overrides}
    meta = runs.create_run(home, runs.SubmitOptions(script=script, overrides=overrides, workdir=str(script.parent)))
    return meta.run_id


def meta_of(home: Home, run_id: str) -> dict:
    return json.loads(home.run(run_id).meta.read_text())


def ended(home: Home, run_id: str) -> dict | None:
    meta = meta_of(home, run_id)
    return meta if meta["phase"] == "ended" else None


def slices(state: Path, zone: str = ZONE) -> dict[str, dict]:
    folder = state / "nodes" / zone
    return {p.stem: json.loads(p.read_text()) for p in folder.glob("*.json")} if folder.exists() else {}


def script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "train.sh"
    path.write_text("#!/bin/sh\n" + body)
    return path


def test_a_run_creates_a_slice_runs_on_it_and_the_slice_is_deleted_after(home, sim, tmp_path):
    run_id = submit(home, script(tmp_path, 'echo "task $FRAY_TASK_INDEX of $FRAY_NUM_TASKS at $JAX_COORDINATOR_ADDRESS"\n'))
    daemon = start_daemon(home)
    try:
        meta = wait_until(lambda: ended(home, run_id), timeout=60, what="the run to end")
        assert meta["end"]["status"] == "completed_success", meta
        assert "task 0 of 1 at 10." in home.run(run_id).attempt(1).stdout.read_text()
        wait_until(lambda: not slices(sim), what="the finished run's slice to be deleted")
    finally:
        stop_daemon(daemon)
