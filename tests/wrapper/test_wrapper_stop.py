"""How a running workload is stopped, and that its output survives: real wrappers, real signals.

SIGUSR2 is the shepherd's planned stop: "checkpoint now" (SIGUSR1) to a
workload that catches it, SIGTERM once it reports a newer checkpoint (or half
the grace is gone), SIGKILL at the end of the grace.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Iterator

import pytest

from conftest import REPO, schema_validate, wait_until
from fray.wrapper import contract

CHECKPOINTS_ON_USR1 = """
import os, pathlib, signal, sys, time
from fray.wrapper import report
folder = pathlib.Path(os.environ["FRAY_ATTEMPT_DIR"])
REPORT = {report}

def on_usr1(signum, frame):
    with open(folder / "events", "a") as out:
        out.write("SIGUSR1\\n")
    if REPORT:
        report.progress(step=7, checkpoint_version=3)

def on_term(signum, frame):
    with open(folder / "events", "a") as out:
        out.write("SIGTERM\\n")
    sys.exit(0)

signal.signal(signal.SIGUSR1, on_usr1)
signal.signal(signal.SIGTERM, on_term)
report.progress(step=5, checkpoint_version=2)
(folder / "ready").write_text("1")
while True:
    time.sleep(0.02)
"""


@pytest.fixture
def wrapper(tmp_path: Path) -> Iterator:
    procs: list[subprocess.Popen[bytes]] = []

    def start(body: str, name: str = "work.py", *options: str) -> tuple[subprocess.Popen[bytes], Path]:
        script = tmp_path / name
        script.write_text(textwrap.dedent(body).lstrip())
        attempt = tmp_path / f"attempt {len(procs) + 1}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("FRAY_")}
        env["PYTHONPATH"] = str(REPO)
        proc = subprocess.Popen(
            [sys.executable, "-m", "fray.wrapper", "run", "--run-id", "r-stop", "--attempt", "1", "--attempt-dir",
             str(attempt), "--script", str(script), *options],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        procs.append(proc)
        return proc, attempt

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def exit_record(attempt: Path) -> dict:
    document = json.loads((attempt / contract.EXIT).read_text())
    schema_validate("exit", document)
    return document


def test_a_planned_stop_asks_for_a_checkpoint_then_terminates(wrapper) -> None:
    proc, attempt = wrapper(CHECKPOINTS_ON_USR1.format(report=True), "work.py", "--stop-grace", "30")
    wait_until(lambda: (attempt / "ready").exists(), what="the workload")
    sent = time.monotonic()
    proc.send_signal(signal.SIGUSR2)
    assert proc.wait(timeout=20) == 128 + signal.SIGUSR2
    # SIGTERM followed the reported checkpoint, not the 15 s half-grace.
    assert time.monotonic() - sent < 10
    assert (attempt / "events").read_text().split() == ["SIGUSR1", "SIGTERM"]
    record = exit_record(attempt)
    assert record["received_signal"] == "SIGUSR2" and record["workload_exit_code"] == 0
    failure = json.loads((attempt / contract.FAILURE).read_text())
    schema_validate("failure", failure)
    assert failure["cause"] == "terminated" and "planned stop" in failure["message"]
    log = (attempt / contract.WRAPPER_LOG).read_text()
    assert "SIGUSR1 (checkpoint now)" in log and "checkpoint_version 3 reported; SIGTERM" in log


def test_a_planned_stop_without_a_checkpoint_terminates_at_half_the_grace(wrapper) -> None:
    # SIGTERM at 3 s, SIGKILL at 6 s: a slow machine still has the workload's SIGTERM handler run.
    proc, attempt = wrapper(CHECKPOINTS_ON_USR1.format(report=False), "work.py", "--stop-grace", "6")
    wait_until(lambda: (attempt / "ready").exists(), what="the workload")
    sent = time.monotonic()
    proc.send_signal(signal.SIGUSR2)
    assert proc.wait(timeout=20) == 128 + signal.SIGUSR2
    assert time.monotonic() - sent >= 3.0
    assert (attempt / "events").read_text().split() == ["SIGUSR1", "SIGTERM"]
    assert "no new checkpoint in time; SIGTERM" in (attempt / contract.WRAPPER_LOG).read_text()


def test_a_planned_stop_of_a_workload_that_ignores_sigusr1_is_a_plain_sigterm(wrapper) -> None:
    body = """
    trap 'echo SIGTERM >> "$FRAY_ATTEMPT_DIR/events"; exit 0' TERM
    touch "$FRAY_ATTEMPT_DIR/ready"
    while true; do sleep 0.05; done
    """
    proc, attempt = wrapper(body, "serve.sh", "--stop-grace", "30")
    wait_until(lambda: (attempt / "ready").exists(), what="the workload")
    sent = time.monotonic()
    proc.send_signal(signal.SIGUSR2)
    assert proc.wait(timeout=20) == 128 + signal.SIGUSR2
    assert time.monotonic() - sent < 10  # no waiting for a checkpoint nobody would make
    assert (attempt / "events").read_text().split() == ["SIGTERM"]  # USR1 would have killed bash
    assert "no process of the workload catches SIGUSR1" in (attempt / contract.WRAPPER_LOG).read_text()


def test_a_workload_that_prints_100000_lines_and_exits_at_once_loses_none(wrapper) -> None:
    body = """
    seq 1 100000
    seq 1 50000 >&2
    """
    proc, attempt = wrapper(body, "loud.sh")
    assert proc.wait(timeout=30) == 0
    out = (attempt / contract.STDOUT).read_text().splitlines()
    assert len(out) == 100000 and out[0] == "1" and out[-1] == "100000"
    assert len((attempt / contract.STDERR).read_text().splitlines()) == 50000


def test_a_checkpoint_request_never_kills_a_workload_that_does_not_handle_it(wrapper) -> None:
    # Slurm's --signal=B:USR1 reaches the wrapper before a time limit; bash's default for SIGUSR1 is to die.
    body = """
    trap 'echo SIGTERM >> "$FRAY_ATTEMPT_DIR/events"; exit 0' TERM
    touch "$FRAY_ATTEMPT_DIR/ready"
    while true; do sleep 0.05; done
    """
    proc, attempt = wrapper(body, "serve.sh")
    wait_until(lambda: (attempt / "ready").exists(), what="the workload")
    proc.send_signal(signal.SIGUSR1)
    log = attempt / contract.WRAPPER_LOG
    wait_until(lambda: "no process of the workload catches it; not passed on" in log.read_text(), what="the request")
    assert proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 128 + signal.SIGTERM
    assert (attempt / "events").read_text().split() == ["SIGTERM"]
    assert exit_record(attempt)["workload_exit_code"] == 0
