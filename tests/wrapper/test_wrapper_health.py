"""The health command through a real wrapper: K failures in a row hold the heartbeat; a pass releases it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from conftest import REPO, schema_validate, wait_until
from fray.wrapper import contract

SERVE = 'touch "$FRAY_ATTEMPT_DIR/healthy"\ntrap "exit 0" TERM\nwhile true; do sleep 0.05; done\n'


@pytest.fixture
def attempt(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    script = tmp_path / "serve.sh"
    script.write_text(SERVE)
    folder = tmp_path / "attempt's dir"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FRAY_")}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.Popen(
        [sys.executable, "-m", "fray.wrapper", "run", "--run-id", "r-health", "--attempt", "1", "--attempt-dir", str(folder),
         "--script", str(script), "--heartbeat-interval", "0.1", "--stop-grace", "2",
         "--health-cmd", 'test -e "$FRAY_ATTEMPT_DIR/healthy" && echo ok || { echo sick; exit 3; }',
         "--health-interval", "1", "--health-retries", "3"],  # 1 s apart: a slow test still sees each state
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    yield proc, folder
    stop_everything(proc, folder)


def stop_everything(proc: subprocess.Popen[bytes], folder: Path) -> None:
    """After a failed test: a wrapper killed with SIGKILL cannot clean up, so kill its workload's group too."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    try:
        workload = json.loads((folder / contract.STARTED).read_text())["workload_pid"]
        os.killpg(workload, signal.SIGKILL)
    except (OSError, ValueError, KeyError, TypeError):
        pass  # never started, or already gone


def health(folder: Path) -> dict:
    try:
        document = json.loads((folder / contract.HEALTH).read_text())
    except (FileNotFoundError, ValueError):
        return {}
    schema_validate("health", document)
    return document


def beat(folder: Path) -> str:
    return (folder / contract.HEARTBEAT).read_text()


def beats_again(folder: Path) -> bool:
    first = beat(folder)
    wait_until(lambda: beat(folder) != first, timeout=5, what="a new heartbeat")
    return True


def test_failing_health_checks_hold_the_heartbeat_and_a_pass_releases_it(attempt) -> None:
    proc, folder = attempt
    wait_until(lambda: health(folder).get("state") == "healthy", what="a passing health check")
    assert health(folder)["last"]["output_tail"] == ["ok"]
    (folder / "healthy").unlink()
    failing = wait_until(lambda: (d := health(folder)).get("failures_in_a_row", 0) >= 1 and d, what="the first failure")
    assert failing["state"] == "failing" and failing["failures_in_a_row"] < 3
    assert beats_again(folder)  # one failure is not a stall
    document = wait_until(lambda: (d := health(folder)).get("state") == "unhealthy" and d, what="K failures in a row")
    assert document["heartbeat_held"] is True and document["last"]["exit_code"] == 3
    assert document["last"]["output_tail"] == ["sick"]
    # A heartbeat write already under way when the hold began may still land: read it one check later.
    wait_until(lambda: health(folder).get("failures_in_a_row", 0) >= 4, what="a fourth failed check")
    held = beat(folder)
    wait_until(lambda: health(folder).get("failures_in_a_row", 0) >= 6, what="more failed checks")
    assert beat(folder) == held, "a held heartbeat must not be refreshed"
    log = (folder / contract.WRAPPER_LOG).read_text()
    assert "3 health checks failed in a row: holding the heartbeat" in log
    (folder / "healthy").touch()
    wait_until(lambda: health(folder).get("state") == "healthy", what="the health check to pass again")
    assert beats_again(folder)
    assert "the health command passes again: heartbeat resumed" in (folder / contract.WRAPPER_LOG).read_text()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 128 + signal.SIGTERM


def test_a_hanging_health_check_is_killed_and_counts_as_failed(tmp_path: Path) -> None:
    script = tmp_path / "serve.sh"
    script.write_text(SERVE)
    folder = tmp_path / "a"
    marker = tmp_path / "check.pid"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FRAY_")}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.Popen(
        [sys.executable, "-m", "fray.wrapper", "run", "--run-id", "r-health", "--attempt", "1", "--attempt-dir", str(folder),
         "--script", str(script), "--health-cmd", f"echo $$ > '{marker}'; exec sleep 60",
         "--health-interval", "2", "--health-retries", "1", "--stop-grace", "1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        document = wait_until(lambda: (d := health(folder)).get("checks") and d, what="a timed-out check")
        assert document["last"]["timed_out"] is True and document["last"]["exit_code"] is None
        assert document["state"] == "unhealthy"
        hung = int(marker.read_text())
        wait_until(lambda: not Path(f"/proc/{hung}").exists(), what="the hung check to be killed and reaped")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 128 + signal.SIGTERM
    finally:
        stop_everything(proc, folder)
