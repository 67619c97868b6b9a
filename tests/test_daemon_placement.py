"""The daemon places waiting local runs with the scheduler: band first, constraints on the machine's attributes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_fray, start_daemon, stop_daemon, wait_until
from fray.state import runs, store
from fray.state.layout import Home

pytestmark = pytest.mark.slow

SERVE = """#!/bin/bash
#FRAY --heartbeat-interval 0.5 --stop-grace 2
trap 'exit 0' TERM
while true; do sleep 0.1; done
"""


def submit(home: Home, script: Path, **overrides: object) -> str:
    return runs.create_run(home, runs.SubmitOptions(script=script, overrides=overrides,
                                                    workdir=str(script.parent))).run_id


def meta_of(home: Home, run_id: str) -> dict:
    return json.loads(home.run(run_id).meta.read_text())


def test_production_starts_before_older_batch_and_an_unmet_constraint_says_why(home: Home, tmp_path: Path) -> None:
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 1, "gpus": 0}}))
    serve = tmp_path / "serve.sh"
    serve.write_text(SERVE)
    daemon = start_daemon(home, wait=False)
    started: list[str] = []
    try:
        blocker = submit(home, serve)
        started.append(blocker)
        wait_until(lambda: home.run(blocker).attempt(1).started.exists(), what="the first run to take the CPU")
        batch = submit(home, serve, priority="batch")
        prod = submit(home, serve, priority="production")
        h100 = submit(home, serve, constraints={"gpu-type=h100": "gpu-type=h100"})
        started += [batch, prod, h100]
        wait_until(lambda: meta_of(home, h100)["wait_reason"] == "no worker with gpu-type=h100",
                   what="the constrained run to say why it waits")

        listing = json.loads(run_fray("list", "--json", home=home.root, check=True).stdout)
        bands = {row["run_id"]: row["priority"] for row in listing["runs"]}
        assert bands[prod] == "production" and bands[batch] == "batch" and bands[blocker] == "interactive"
        table = run_fray("list", home=home.root, check=True).stdout
        # TABLE_ASSERT

        runs.request(home, blocker, "stop")
        wait_until(lambda: home.run(prod).attempt(1).started.exists(), what="the production run to start first")
        assert not meta_of(home, batch)["attempts"]
        said = [json.loads(line)["reason"] for line in home.run(batch).events.read_text().splitlines()]
        assert any("runs of a higher priority band, or older ones, go first" in text for text in said), said
    finally:
        for run_id in started:
            if meta_of(home, run_id)["phase"] != "ended":
                runs.request(home, run_id, "stop")
        for run_id in started:
            wait_until(lambda: meta_of(home, run_id)["phase"] == "ended", what="the stops")
        stop_daemon(daemon)
