"""The wrapper's pieces on their own: launch argv, environment, command line,
outcome table, log tails, atomic records, the heartbeat thread."""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from fray.wrapper import contract, jobside, options, outcome, records
from fray.wrapper.heartbeat import Heartbeat
from fray.wrapper.tail import tail_lines
from fray.wrapper.workload import launch_argv, shebang_command, workload_env

SCHEMAS = Path(__file__).parents[2] / "schemas"


def validate(document: Any, schema: str) -> None:
    schema_doc = json.loads((SCHEMAS / f"{schema}.json").read_text())
    errors = list(Draft202012Validator(schema_doc).iter_errors(document))
    assert not errors, f"{schema}.json: " + "; ".join(e.message for e in errors)


# -- launch_argv -------------------------------------------------------------

SCRIPT = "/runs/r 1/it's; a script"


@pytest.mark.parametrize(
    "first_line, script, expected",
    [
        ("#!/usr/bin/env python3", SCRIPT, ["python3", SCRIPT, "a"]),
        ("#!/usr/bin/env -S python3 -u -X dev", SCRIPT, ["python3", "-u", "-X", "dev", SCRIPT, "a"]),
        ("#!/usr/bin/env -S bash -c 'echo hi; exit'", SCRIPT, ["bash", "-c", "echo hi; exit", SCRIPT, "a"]),
        ("#!/usr/bin/env -Sbash -e", SCRIPT, ["bash", "-e", SCRIPT, "a"]),
        ("#!/usr/bin/env --split-string=bash -e", SCRIPT, ["bash", "-e", SCRIPT, "a"]),
        ("#!/usr/bin/env python3 -u", SCRIPT, ["python3", "-u", SCRIPT, "a"]),
        ("#! /bin/bash -eu ", SCRIPT, ["/bin/bash", "-eu", SCRIPT, "a"]),
        ("#!/bin/bash\r", SCRIPT, ["/bin/bash", SCRIPT, "a"]),
        ("#!/opt/py/bin/python", "x.sh", ["/opt/py/bin/python", "x.sh", "a"]),
        # env doing more than a PATH lookup is left to env itself.
        ("#!/usr/bin/env -i python3", SCRIPT, ["/usr/bin/env", "-i", "python3", SCRIPT, "a"]),
        ("#!/usr/bin/env FOO=1 python3", SCRIPT, ["/usr/bin/env", "FOO=1", "python3", SCRIPT, "a"]),
        ("#!/usr/bin/env -S bash -c 'unbalanced", SCRIPT, ["/usr/bin/env", "-S", "bash", "-c", "'unbalanced", SCRIPT, "a"]),
        ("#!/usr/bin/env", "t.sh", ["/usr/bin/env", "t.sh", "a"]),
    ],
)
def test_launch_argv_from_a_shebang(first_line: str, script: str, expected: list[str]) -> None:
    assert launch_argv(script, first_line.rstrip("\r"), ["a"]) == expected


@pytest.mark.parametrize(
    "script, first_line, expected",
    [
        ("train.py", "import torch", ["/py", "train.py"]),
        ("TRAIN.PY", "", ["/py", "TRAIN.PY"]),
        ("job.sh", "set -e", ["bash", "job.sh"]),
        ("job.bash", None, ["bash", "job.bash"]),
        ("job", "echo hi", ["bash", "job"]),
        ("train.py", "#!", ["/py", "train.py"]),  # an empty shebang says nothing
        ("train.py", "# !/usr/bin/env bash", ["/py", "train.py"]),
    ],
)
def test_launch_argv_from_the_extension(script: str, first_line: str | None, expected: list[str]) -> None:
    assert launch_argv(script, first_line, [], python="/py") == expected


def test_launch_argv_defaults_to_this_python_and_keeps_arguments_whole() -> None:
    args = ["--lr", "0.1", "a b", "; rm -rf /", ""]
    assert launch_argv("t.py", None, args) == [sys.executable, "t.py", *args]


def test_no_shebang() -> None:
    assert shebang_command("import os") is None
    assert shebang_command("#!   ") is None


# -- environment ---------------------------------------------------------------


def make_options(**changes: Any) -> options.Options:
    values: dict[str, Any] = dict(run_id="r1", attempt=1, attempt_dir="/h/runs/r1/attempts/1", script="/h/s.sh")
    values.update(changes)
    return options.Options(**values)


def test_workload_env_first_attempt() -> None:
    env = workload_env({"PATH": "/bin", "FRAY_CHECKPOINT_DIR": "/parent"}, make_options())
    assert env == {
        "PATH": "/bin",
        "FRAY_RUN_ID": "r1",
        "FRAY_JOB_ID": "r1",
        "FRAY_JOB_NAME": "r1",
        "FRAY_ATTEMPT": "1",
        "FRAY_ATTEMPT_DIR": "/h/runs/r1/attempts/1",
        "FRAY_RESUME": "0",
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": jobside.helpers_path(),  # `from fray import report` in any Python
    }


def test_workload_env_with_everything() -> None:
    base = {"FRAY_CLUSTER_SPEC": "local", "PYTHONUNBUFFERED": "", "FRAY_PARENT_JOB_ID": "p"}
    env = workload_env(
        base,
        make_options(attempt=3, home="/h", job_name="n", namespace="ns", checkpoint_dir="/h/ck"),
    )
    assert env[contract.ENV_RESUME] == "1" and env[contract.ENV_ATTEMPT] == "3"
    assert env[contract.ENV_HOME] == "/h" and env[contract.ENV_CHECKPOINT_DIR] == "/h/ck"
    assert env[contract.ENV_NAMESPACE] == "ns" and env[contract.ENV_JOB_NAME] == "n"
    assert env[contract.ENV_CLUSTER_SPEC] == "local"  # already set: kept
    assert env["PYTHONUNBUFFERED"] == "" and env[contract.ENV_PARENT_JOB_ID] == "p"
    assert base == {"FRAY_CLUSTER_SPEC": "local", "PYTHONUNBUFFERED": "", "FRAY_PARENT_JOB_ID": "p"}
    assert workload_env({}, make_options(home="/h"))[contract.ENV_CLUSTER_SPEC] == "fray"


# -- the command line ----------------------------------------------------------


def test_parse_the_full_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    parsed = options.parse(
        [
            "run", "--run-id", "r1", "--attempt", "4", "--attempt-dir", "a", "--script", "s.py",
            "--home", "h", "--job-name", "j", "--workdir", "w", "--checkpoint-dir", "c",
            "--namespace", "ns", "--heartbeat-interval", "0.5", "--stop-grace", "0",
            "--", "--attempt", "9", "--",
        ]
    )
    assert parsed.attempt == 4 and parsed.script_args == ("--attempt", "9", "--")
    assert parsed.attempt_dir == str(tmp_path / "a") and parsed.script == str(tmp_path / "s.py")
    assert parsed.home == str(tmp_path / "h") and parsed.workdir == str(tmp_path / "w")
    assert parsed.checkpoint_dir == str(tmp_path / "c")
    assert (parsed.job_name, parsed.namespace) == ("j", "ns")
    assert (parsed.heartbeat_interval, parsed.stop_grace) == (0.5, 0.0)
    assert "run_id='r1'" in repr(parsed)


def test_parse_defaults() -> None:
    parsed = options.parse(["run", "--run-id", "r", "--attempt", "1", "--attempt-dir", "/a", "--script", "/s"])
    assert parsed.heartbeat_interval == contract.DEFAULT_HEARTBEAT_INTERVAL_SEC
    assert parsed.stop_grace == contract.DEFAULT_STOP_GRACE_SEC
    assert parsed.script_args == () and parsed.home is None and parsed.workdir is None


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "COMMAND"),
        (["run", "--attempt", "1", "--attempt-dir", "/a", "--script", "/s"], "--run-id"),
        (["run", "--run-id", " ", "--attempt", "1", "--attempt-dir", "/a", "--script", "/s"], "must not be empty"),
        (["run", "--run-id", "r", "--attempt", "one", "--attempt-dir", "/a", "--script", "/s"], "whole number"),
        (["run", "--run-id", "r", "--attempt", "1", "--attempt-dir", "/a", "--script", "/s", "--stop-grace", "-1"], "at least 0"),
        (["run", "--run-id", "r", "--attempt", "1", "--attempt-dir", "/a", "--script", "/s", "--heartbeat-interval", "nan"], "finite"),
        (["run", "--run-id", "r", "--attempt", "1", "--attempt-dir", "/a", "--script", "/s", "extra"], "unrecognized"),
    ],
)
def test_parse_rejects_with_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        options.parse(argv)
    assert raised.value.code == 2
    assert message in capsys.readouterr().err


# -- outcome -------------------------------------------------------------------

END_0 = outcome.WorkloadEnd(0, None)
END_3 = outcome.WorkloadEnd(3, None)
END_KILLED = outcome.WorkloadEnd(None, "SIGKILL")


@pytest.mark.parametrize(
    "launch_error, end, received, code, cause",
    [
        (None, END_0, None, 0, None),
        (None, END_3, None, 50, "workload_failure"),
        (None, END_KILLED, None, 50, "workload_signalled"),
        (None, END_0, signal.SIGTERM, 143, "terminated"),
        (None, END_KILLED, signal.SIGINT, 130, "terminated"),
        (None, None, signal.SIGTERM, 143, "terminated"),
        ("no script", None, None, 50, "launch_failed"),
        ("no interpreter on this node", None, None, 42, "launch_failed"),
        (None, None, None, 50, "workload_failure"),
    ],
)
def test_decide(launch_error: str | None, end: outcome.WorkloadEnd | None, received: int | None, code: int, cause: str | None) -> None:
    result = outcome.decide(launch_error=launch_error, end=end, received_signal=received, script="s.sh", stderr_path="/e",
                            launch_node_side=bool(launch_error and "node" in launch_error))
    assert (result.exit_code, result.cause) == (code, cause)
    stamp = outcome.AttemptStamp("r", 1, "host", 1.0)
    validate(outcome.exit_record(stamp, result.exit_code, end, received, 2.0), "exit")
    if cause is None:
        validate(outcome.final_record(stamp, 2.0, None), "final")
    else:
        validate(outcome.failure_record(stamp, result, end, ["x"], 2.0), "failure")


def test_wait_status_decoding() -> None:
    assert outcome.WorkloadEnd.from_wait_status(3 << 8) == outcome.WorkloadEnd(3, None)
    assert outcome.WorkloadEnd.from_wait_status(signal.SIGKILL) == outcome.WorkloadEnd(None, "SIGKILL")
    assert outcome.signal_name(signal.SIGTERM) == "SIGTERM"


def test_started_record_is_valid() -> None:
    stamp = outcome.AttemptStamp("r", 2, "h", 5.0)
    validate(outcome.started_record(stamp, 10, None, "python 3.11"), "started")
    validate(outcome.started_record(stamp, 10, 11, "python 3.11"), "started")


# -- tail ----------------------------------------------------------------------


def test_tail_lines(tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    assert tail_lines(log) == []
    log.write_bytes(b"")
    assert tail_lines(log) == []
    log.write_bytes(b"one\ntwo")
    assert tail_lines(log) == ["one", "two"]
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(100_000)))
    assert tail_lines(log, 3) == ["line 99997", "line 99998", "line 99999"]
    assert tail_lines(log, 0) == []


def test_tail_lines_reads_a_bounded_amount_and_renders_like_a_terminal(tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    log.write_bytes(b"x" * 1_000_000 + b"\nbad \xff byte\n 10%\r 50%\r100%\r\nTraceback\n")
    assert tail_lines(log, 3) == ["bad \ufffd byte", "100%", "Traceback"]
    log.write_bytes(b"y" * 1_000_000)  # one enormous line: only its end is read
    (only,) = tail_lines(log, 20, max_bytes=4096)
    assert only == "y" * 4096


# -- records -------------------------------------------------------------------


def test_write_json_is_atomic_private_and_strict(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    records.write_json(path, {"é": 1})
    assert path.read_text(encoding="utf-8") == '{\n  "é": 1\n}\n'
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with pytest.raises(ValueError):
        records.write_json(path, {"loss": float("nan")})
    with pytest.raises(TypeError):
        records.write_json(path, {"x": object()})
    assert records.read_json(path) == {"é": 1}  # the good file survived
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc.json"]
    with pytest.raises(OSError):
        records.write_json(tmp_path / "missing" / "doc.json", {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc.json"]


def test_read_json_refuses_nan_and_oversized(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_text('{"x": NaN}')
    with pytest.raises(ValueError):
        records.read_json(path)
    path.write_text('{"x": "' + "a" * 100 + '"}')
    with pytest.raises(ValueError):
        records.read_json(path, max_bytes=50)
    with pytest.raises(FileNotFoundError):
        records.read_json(tmp_path / "none.json")


def test_make_private_dir_makes_every_missing_parent_private(tmp_path: Path) -> None:
    target = tmp_path / "a b" / "c;" / "d"
    records.make_private_dir(target)
    records.make_private_dir(target)  # already there: fine
    for folder in (tmp_path / "a b", tmp_path / "a b" / "c;", target):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError):
        records.make_private_dir(tmp_path / "file" / "sub")


# -- heartbeat -----------------------------------------------------------------


def test_heartbeat_writes_before_start_returns_and_stops(tmp_path: Path) -> None:
    path = tmp_path / "heartbeat"
    messages: list[str] = []
    beat = Heartbeat(path, 30.0, messages.append).start()
    try:
        assert path.read_text().endswith("\n")
        float(path.read_text())
    finally:
        beat.stop()
    assert not messages


def test_heartbeat_failure_is_logged_once_not_raised(tmp_path: Path) -> None:
    messages: list[str] = []
    beat = Heartbeat(tmp_path / "gone" / "heartbeat", 30.0, messages.append)
    assert beat.beat() is False and beat.beat() is False
    assert len(messages) == 1 and "cannot write heartbeat" in messages[0]
    (tmp_path / "gone").mkdir()
    assert beat.beat() is True
    assert len(messages) == 2
    with pytest.raises(ValueError):
        Heartbeat(tmp_path / "h", 0, messages.append)


def test_contract_exit_codes_match_the_exit_schema() -> None:
    description = json.loads((SCHEMAS / "exit.json").read_text())["properties"]["exit_code"]["description"]
    for code in (contract.EXIT_OK, contract.EXIT_NODE_FAULT, contract.EXIT_FOREIGN_GPU_PROCESSES,
                 contract.EXIT_CUDA_FAILURE, contract.EXIT_WORKLOAD_FAILURE):
        assert str(code) in description
    causes = json.loads((SCHEMAS / "failure.json").read_text())["properties"]["cause"]["enum"]
    ours = {value for name, value in vars(contract).items() if name.startswith("CAUSE_")}
    assert ours == set(causes)


def test_write_text_handles_hostile_names(tmp_path: Path) -> None:
    path = tmp_path / "it's; \"odd\" $name"
    records.write_text(path, "x\n")
    assert path.read_text() == "x\n"
    assert os.listdir(tmp_path) == [path.name]
