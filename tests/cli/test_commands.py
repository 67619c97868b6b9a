"""Runtime commands: the CLI writes them (validated, audited, idempotent), the workload reads
and acknowledges them through fray.wrapper.report, `fray status` shows what is not acknowledged.
Real CLI processes and real files; every document is checked against its schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_fray, schema_validate
from fray.state import audit, runtime_commands as commands, runs
from fray.state.layout import Home
from fray.wrapper import contract, report


@pytest.fixture
def run_id(home: Home, tmp_path: Path) -> str:
    # Runs until killed: `fray control pause|unpause` start a daemon, which must not see the run end.
    script = tmp_path / "serve.sh"
    script.write_text("while true; do sleep 1; done\n")
    return runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(tmp_path))).run_id


def fray_json(home: Home, *args: str) -> dict:
    proc = run_fray(*args, "--json", home=home.root)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_tune_writes_an_audited_envelope_once(home: Home, run_id: str) -> None:
    data = fray_json(home, "control", "tune", run_id, "--set", "learning_rate=1e-4", "--set", "notes=after warmup",
                     "--id", "lr-1")
    schema_validate("cli-command", data)
    assert data["created"] is True and data["op"] == "tune"
    envelope = json.loads(home.run(run_id).command("lr-1").read_text())
    schema_validate("command", envelope)
    assert envelope["payload"] == {"learning_rate": 1e-4, "notes": "after warmup"}
    assert set(envelope) == {"id", "type", "issued_at", "actor", "payload"} and envelope["actor"]["type"] == "user"
    again = fray_json(home, "control", "tune", run_id, "--set", "learning_rate=1e-4", "--set", "notes=after warmup",
                      "--id", "lr-1")
    assert again["created"] is False and again["command"] == envelope
    assert "nothing new written" in again["effect"]
    assert [p.name for p in home.run(run_id).commands_dir.iterdir()] == ["lr-1.json"]
    other = run_fray("control", "tune", run_id, "--set", "learning_rate=0.5", "--id", "lr-1", home=home.root)
    assert other.returncode == 2 and "command id lr-1 was already used for another command" in other.stderr
    lines = [json.loads(line) for line in home.audit.read_text().splitlines()]
    assert [(line["action"], line["details"].get("duplicate")) for line in lines] == [("command.tune", None),
                                                                                      ("command.tune", True)]
    for line in lines:
        schema_validate("audit", line)
    assert audit.verify(home) == []


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["tune", "--set", "learning_rate=2", "--set", "entropy_coef=-0.1", "--set", "clip_epsilon=x", "--set", "lr=1"],
         ["learning_rate: must be a number with 0 < learning_rate <= 1, not 2.0",
          "entropy_coef: must be a number with 0 <= entropy_coef <= 0.1, not -0.1",
          "clip_epsilon: must be a number, not 'x'", "lr: not a tune field"]),
        (["tune"], ["tune needs at least one of learning_rate, entropy_coef, clip_epsilon"]),
        (["tune", "--set", "notes=only notes", "--id", "no spaces please"],
         ["id: 'no spaces please' must be", "tune needs at least one of"]),
        (["terminate"], ["reason: required"]),
        (["terminate", "--reason", "x" * 257], ["reason: at most 256 characters, not 257"]),
        (["pause", "--in-process", "--reason", "y" * 300], ["reason: at most 256 characters, not 300"]),
    ],
)
def test_an_invalid_command_exits_2_naming_every_violated_field(home: Home, run_id: str, args: list[str],
                                                                named: list[str]) -> None:
    proc = run_fray("control", args[0], run_id, *args[1:], home=home.root)
    assert proc.returncode == 2, proc.stdout
    for problem in named:
        assert problem in proc.stderr
    assert not home.run(run_id).commands_dir.exists()
    assert not home.audit.exists()


def test_the_two_pauses_and_resume(home: Home, run_id: str) -> None:
    in_process = fray_json(home, "control", "pause", run_id, "--in-process", "--reason", "eval")
    schema_validate("cli-command", in_process)
    assert in_process["command"]["type"] == "pause" and in_process["command"]["payload"] == {"reason": "eval"}
    assert runs.read_control(home, run_id).paused is False  # the workload pauses itself; fray does not
    stray = run_fray("control", "pause", run_id, "--reason", "eval", home=home.root)
    assert stray.returncode == 2 and "belong to `pause --in-process`" in stray.stderr
    shepherd_pause = fray_json(home, "control", "pause", run_id)
    schema_validate("cli-control", shepherd_pause)
    assert runs.read_control(home, run_id).paused is True
    refused = run_fray("control", "resume", run_id, home=home.root)
    assert refused.returncode == 2 and "control unpause" in refused.stderr
    fray_json(home, "control", "unpause", run_id)
    resumed = fray_json(home, "control", "resume", run_id)
    assert resumed["command"]["type"] == "resume"


def test_status_shows_unacknowledged_commands_and_their_age(home: Home, run_id: str) -> None:
    commands.issue(home, run_id, "tune", {"clip_epsilon": 0.1}, "first", now=1000.0)
    commands.issue(home, run_id, "terminate", {"reason": "done", "final_checkpoint": True}, "second")
    paths = home.run(run_id)
    paths.command_ack("first").write_text(json.dumps(
        {"id": "first", "acknowledged_at": 1001.0, "attempt": 1, "host": "n1", "pid": 7, "result": {}}))
    status = fray_json(home, "status", run_id)
    schema_validate("cli-status", status)
    assert status["commands"]["acknowledged"] == 1
    [waiting] = status["commands"]["unacknowledged"]
    assert waiting["id"] == "second" and waiting["delivered_at"] is None and 0 <= waiting["age_sec"] < 60
    human = run_fray("status", run_id, home=home.root, env={"COLUMNS": "200"})
    assert "Runtime commands (1 not acknowledged, 1 acknowledged)" in human.stdout
    assert "second" in human.stdout and "terminate" in human.stdout and "not yet" in human.stdout


def test_a_command_to_an_ended_run_is_refused(home: Home, run_id: str) -> None:
    from fray.core.model import End, Phase
    from fray.state import store

    meta = runs.read_meta(home, run_id)
    meta.phase, meta.end = Phase.ENDED.value, End("stopped_manual", "stopped", 1.0)
    store.write_json(home.run(run_id).meta, meta.to_dict(), "meta")
    proc = run_fray("control", "terminate", run_id, "--reason", "x", home=home.root)
    assert proc.returncode == 2 and "has ended" in proc.stderr


# -- the workload's side ------------------------------------------------------------


@pytest.fixture
def inbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "run's; commands"
    folder.mkdir()
    monkeypatch.setenv(contract.ENV_COMMANDS_DIR, str(folder))
    monkeypatch.setenv(contract.ENV_ATTEMPT, "2")
    monkeypatch.setattr(report, "_seen_commands", set())
    return folder


def envelope(folder: Path, command_id: str, kind: str, payload: dict, issued_at: float) -> None:
    document = {"id": command_id, "type": kind, "issued_at": issued_at, "actor": {"type": "user", "id": "me"},
                "payload": payload}
    schema_validate("command", document)
    (folder / f"{command_id}.json").write_text(json.dumps(document))


def test_commands_are_yielded_oldest_first_once_and_acknowledged(inbox: Path) -> None:
    envelope(inbox, "b", "terminate", {"reason": "done"}, 20.0)
    envelope(inbox, "a", "tune", {"learning_rate": 0.01}, 10.0)
    (inbox / "broken.json").write_text("{not json")
    seen = list(report.commands())
    assert [(c.id, c.type) for c in seen] == [("a", "tune"), ("b", "terminate")]
    assert seen[0].payload == {"learning_rate": 0.01}
    assert list(report.commands()) == []  # once per process
    delivered = json.loads((inbox / "a.delivered.json").read_text())
    schema_validate("command-delivered", delivered)
    assert delivered["attempt"] == 2 and delivered["pid"] == os.getpid()
    assert seen[0].ack(applied={"learning_rate": 0.01}) is True
    assert seen[0].ack() is False  # written once
    acked = json.loads((inbox / "a.ack.json").read_text())
    schema_validate("command-ack", acked)
    assert acked["result"] == {"applied": {"learning_rate": 0.01}}
    # Another process (the next attempt) gets what is not acknowledged, and the first delivery stamp stays.
    first_delivery = (inbox / "b.delivered.json").read_text()
    script = "from fray import report; print([c.id for c in report.commands()])"
    other = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
    assert other.stdout.strip() == "['b']"
    assert "ignoring the command" in other.stderr and "broken.json" in other.stderr
    assert (inbox / "b.delivered.json").read_text() == first_delivery


def test_the_command_line_twin_lists_and_acknowledges(inbox: Path) -> None:
    envelope(inbox, "p1", "pause", {}, 5.0)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    listed = subprocess.run([sys.executable, "-m", "fray.wrapper.report", "commands"], capture_output=True, text=True, env=env)
    assert listed.returncode == 0
    assert [json.loads(line)["id"] for line in listed.stdout.splitlines()] == ["p1"]
    acked = subprocess.run([sys.executable, "-m", "fray.wrapper.report", "ack", "p1", "--json", '{"paused": true}'],
                           capture_output=True, text=True, env=env)
    assert acked.returncode == 0, acked.stderr
    assert json.loads((inbox / "p1.ack.json").read_text())["result"] == {"paused": True}
    again = subprocess.run([sys.executable, "-m", "fray.wrapper.report", "ack", "p1"], capture_output=True, text=True, env=env)
    assert again.returncode == 1 and "no unacknowledged command 'p1'" in again.stderr


def test_outside_a_job_there_are_no_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(contract.ENV_COMMANDS_DIR, raising=False)
    assert list(report.commands()) == [] and report.ack("x") is None
