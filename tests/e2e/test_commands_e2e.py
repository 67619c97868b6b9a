"""examples/train_loop.py through a real daemon, local backend and CLI: progress, tune, the
workload's own pause and resume, a planned restart that checkpoints (SIGUSR1) and resumes,
and terminate with a final checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO, run_fray, schema_validate, wait_until
from fray.state import runs
from fray.state.layout import Home

pytestmark = pytest.mark.slow


def fray(home: Home, *args: str) -> dict:
    proc = run_fray(*args, "--json", home=home.root)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def progress(home: Home, run_id: str, attempt: int) -> dict:
    try:
        return json.loads(home.run(run_id).attempt(attempt).progress.read_text())
    except (FileNotFoundError, ValueError):
        return {}


def acked(home: Home, run_id: str, command_id: str) -> dict | None:
    path = home.run(run_id).command_ack(command_id)
    if not path.exists():
        return None
    document = json.loads(path.read_text())
    schema_validate("command-ack", document)
    return document


def test_the_training_loop_obeys_commands_checkpoints_and_resumes(home: Home, daemon) -> None:
    meta = runs.create_run(home, runs.SubmitOptions(
        script=REPO / "examples" / "train_loop.py", workdir=str(REPO),
        overrides={"env": {"TRAIN_STEPS": "100000", "TRAIN_STEP_SEC": "0.02"}}))
    run_id = meta.run_id
    wait_until(lambda: (progress(home, run_id, 1).get("step") or 0) > 3, timeout=30, what="training steps")

    fray(home, "control", "tune", run_id, "--set", "learning_rate=3e-4", "--set", "notes=warmup over", "--id", "lr")
    ack = wait_until(lambda: acked(home, run_id, "lr"), what="the tune to be acknowledged")
    assert ack["result"] == {"applied": {"learning_rate": 3e-4}} and ack["attempt"] == 1
    wait_until(lambda: progress(home, run_id, 1).get("extra", {}).get("learning_rate") == 3e-4, what="the new rate")

    fray(home, "control", "pause", run_id, "--in-process", "--id", "hold")
    wait_until(lambda: acked(home, run_id, "hold"), what="the pause to be acknowledged")
    wait_until(lambda: progress(home, run_id, 1).get("extra", {}).get("paused") is True, what="the loop to pause")
    status = fray(home, "status", run_id)
    schema_validate("cli-status", status)
    assert status["run"]["status"] == "healthy_running"  # paused in process, still beating
    fray(home, "control", "resume", run_id, "--id", "go")
    wait_until(lambda: acked(home, run_id, "go"), what="the resume to be acknowledged")
    wait_until(lambda: progress(home, run_id, 1).get("extra", {}).get("paused") is False, what="the loop to step again")

    # A restart is a planned stop: SIGUSR1 (checkpoint now), then SIGTERM; attempt 2 resumes from it.
    fray(home, "control", "restart", run_id)
    wait_until(lambda: home.run(run_id).attempt(2).stdout.exists()
               and "resuming from step" in home.run(run_id).attempt(2).stdout.read_text(), timeout=30,
               what="attempt 2 to resume")
    log = home.run(run_id).attempt(1).wrapper_log.read_text()
    assert "SIGUSR1 (checkpoint now)" in log and "reported; SIGTERM" in log
    saved = progress(home, run_id, 1)["checkpoint_version"]
    assert f"(checkpoint {saved})" in home.run(run_id).attempt(2).stdout.read_text()

    fray(home, "control", "terminate", run_id, "--reason", "good enough", "--final-checkpoint", "--id", "end")
    ended = wait_until(lambda: (m := json.loads(home.run(run_id).meta.read_text()))["phase"] == "ended" and m,
                       timeout=30, what="the run to end")
    assert ended["end"]["status"] == "completed_success"
    # The daemon writes meta.json, then ended.json: wait for the second.
    record = wait_until(lambda: home.run(run_id).ended.exists() and json.loads(home.run(run_id).ended.read_text()),
                        what="ended.json")
    schema_validate("ended", record)
    assert record["result"]["terminated"] == "good enough"
    assert acked(home, run_id, "end")["attempt"] == 2
    status = fray(home, "status", run_id)
    assert status["commands"] == {"unacknowledged": [], "acknowledged": 4}
    assert [a["cause"] for a in status["attempts"]] == ["restarted", "success"]


def test_status_shows_a_command_nobody_reads(home: Home, daemon, tmp_path: Path) -> None:
    script = tmp_path / "deaf.sh"
    script.write_text("#!/bin/bash\n#FRAY --stop-grace 1\nwhile true; do sleep 0.1; done\n")
    run_id = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(tmp_path))).run_id
    wait_until(lambda: home.run(run_id).attempt(1).started.exists(), what="the attempt")
    fray(home, "control", "terminate", run_id, "--reason", "please")
    status = fray(home, "status", run_id)
    [waiting] = status["commands"]["unacknowledged"]
    assert waiting["type"] == "terminate" and waiting["delivered_at"] is None
    human = run_fray("status", run_id, home=home.root, env={"COLUMNS": "160"}).stdout
    assert "Runtime commands (1 not acknowledged, 0 acknowledged)" in human
    runs.request(home, run_id, "stop")
    wait_until(lambda: json.loads(home.run(run_id).meta.read_text())["phase"] == "ended", what="the stop")
