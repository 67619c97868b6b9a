"""Goodput from the steps, end to end: a real daemon runs a checkpointing loop that crashes once and resumes;
`fray status` and `fray usage` count the redone steps, and `fray plot` draws the two attempts."""

from __future__ import annotations

import json

import pytest

from conftest import run_fray, schema_validate, start_daemon, stop_daemon, wait_until
from fray.state import runs, store

TRAIN = '''#!/usr/bin/env python3
#FRAY --name steps --backoff-base 0.1 --heartbeat-interval 1
import json, math, os, sys, time
from fray import report

start = 0
latest = report.latest_checkpoint()
if latest is not None:
    start = json.loads((latest / "state.json").read_text())["step"]
for step in range(start + 1, 21):
    time.sleep(0.05)
    report.progress(step=step, loss=1.0 / step, lr=0.1, note="text is not a metric")
    if step % 5 == 0:
        with report.checkpoint(f"step-{step:04d}") as folder:
            (folder / "state.json").write_text(json.dumps({"step": step}))
    if step == 13 and os.environ["FRAY_ATTEMPT"] == "1":
        sys.exit("crash at step 13")
report.final()
'''


@pytest.fixture
def crashed_once(home, tmp_path) -> str:
    """A real run: attempt 1 reports steps 1..13 (checkpoints at 5 and 10) and crashes; attempt 2 resumes at 11."""
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    script.chmod(0o755)
    run_id = runs.create_run(home, runs.SubmitOptions(script=script, overrides={})).run_id
    daemon = start_daemon(home)
    try:
        wait_until(lambda: (store.read_json(home.meta_file(run_id), "meta") or {}).get("phase") == "ended",
                   timeout=90, what="the run to end")
    finally:
        stop_daemon(daemon)
    recorded = store.read_json(home.meta_file(run_id), "meta")
    assert recorded["end"]["status"] == "completed_success", recorded["end"]
    return run_id


def test_status_and_usage_count_the_steps_redone_after_the_crash(home, crashed_once: str) -> None:
    status = json.loads(run_fray("status", crashed_once, "--json", home=home.root, check=True).stdout)
    schema_validate("cli-status", status)
    figures = status["goodput"]
    assert figures["basis"] == "steps"
    assert (figures["redone_steps"], figures["restarts"]) == (3, 1)  # steps 11, 12, 13 done twice
    assert figures["lost_sec"]["redone"] > 0
    assert figures["lost_sec"]["backoff"] < 1.0  # it had made progress: restarted with no backoff, only the daemon's reaction
    assert 0 < figures["goodput"] < 1
    assert figures["useful_sec"] + sum(figures["lost_sec"].values()) == pytest.approx(figures["wall_sec"], abs=0.01)
    text = run_fray("status", crashed_once, home=home.root, check=True).stdout
    assert "goodput" in text and "from the steps" in text and "3 steps redone" in text

    usage = json.loads(run_fray("usage", "--json", home=home.root, check=True).stdout)
    schema_validate("cli-usage", usage)
    [row] = usage["rows"]
    assert row["basis"] == "steps" and row["lost_by_cause"]["redone"] > 0
    assert row["goodput"] == pytest.approx(figures["goodput"], abs=0.02)
    assert "redone" in run_fray("usage", home=home.root, check=True).stdout


def test_the_history_of_each_attempt_is_on_disk(home, crashed_once: str) -> None:
    first = [json.loads(line) for line in home.run(crashed_once).attempt(1).history.read_text().splitlines()]
    assert [r["step"] for r in first if "checkpoint" not in r] == list(range(1, 14))
    assert [(r["checkpoint"], r["step"]) for r in first if "checkpoint" in r] == [("step-0005", 5), ("step-0010", 10)]
    assert all(set(r.get("metrics", {})) <= {"loss", "lr"} for r in first)
