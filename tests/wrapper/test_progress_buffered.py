"""report.progress costs a job microseconds: what it is told is written by a thread of the job's process at most every
half second and at exit (fray.wrapper.progress_buffer). Real wrappers and real kills: what lands on disk is the last
step and every point the history's thinning keeps; a killed job loses only its last fraction of a second; a
superseded attempt writes nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import wait_until
from test_wrapper import load, run_wrapper, write_script

from fray.wrapper import contract, history, progress_buffer, report
from fray.wrapper.fence import Superseded

MANY = """
import sys
from fray.wrapper import report
for i in range(int(sys.argv[1])):
    report.progress(step=i, loss=1.0 / (i + 1), lr=3e-4)
"""

KILLED = """
import json, os, signal, time
from fray.wrapper import report
folder = os.environ["FRAY_ATTEMPT_DIR"]
deadline = time.time() + 2.0
step = 0
while time.time() < deadline:
    report.progress(step=step, loss=0.5)
    step += 1
    time.sleep(0.001)
with open(os.path.join(folder, "killed.json"), "w") as out:
    out.write(json.dumps({"step": step - 1, "at": time.time()}))
os.kill(os.getpid(), signal.SIGKILL)
"""


def history_lines(folder: Path) -> list[bytes]:
    return (folder / contract.HISTORY).read_bytes().splitlines(keepends=True)


def thinning_keeps(lines: list[bytes], last_step: int) -> None:
    """Replay the thinning over every step 0..last_step, with the sizes of the lines the file holds: each step it
    keeps must be in the file, and each line of the file a step it keeps (so no report skipped it)."""
    kept = {json.loads(raw)["step"]: len(raw) for raw in lines}
    size, last = 0, None
    for step in range(last_step + 1):
        keep = last is None or step - last >= history.stride(size)
        assert keep == (step in kept), f"step {step}: the thinning {'keeps' if keep else 'drops'} it, the file does not"
        if keep:
            size, last = size + kept[step], step


def test_many_quick_reports_then_an_exit_leave_the_last_step_and_the_whole_thinned_curve(tmp_path: Path) -> None:
    script = write_script(tmp_path, "many.py", MANY)
    attempt = tmp_path / "attempt"
    proc = run_wrapper(attempt, script, script_args=("30000",), timeout=60)
    assert proc.returncode == 0, proc.stderr
    progress = load(attempt, contract.PROGRESS, "progress")
    assert (progress["step"], progress["loss"], progress["extra"]) == (29999, 1.0 / 30000, {"lr": 3e-4})
    lines = history_lines(attempt)
    assert len(lines) < 30000 / 2  # thinned as it grew
    thinning_keeps(lines, max(json.loads(raw)["step"] for raw in lines))
    assert json.loads(lines[-1])["step"] > 29999 - history.stride(sum(map(len, lines)))  # the end is on the curve


def test_a_killed_job_loses_only_its_last_fraction_of_a_second(tmp_path: Path) -> None:
    script = write_script(tmp_path, "killed.py", KILLED)
    attempt = tmp_path / "attempt"
    proc = run_wrapper(attempt, script, timeout=60)
    assert proc.returncode == 50, proc.stderr  # SIGKILLed: a workload failure
    killed = json.loads((attempt / "killed.json").read_text())
    progress = load(attempt, contract.PROGRESS, "progress")
    lost = killed["at"] - progress["updated_at"]
    assert 0 <= lost < progress_buffer.INTERVAL_SEC + 0.5, f"{lost:.2f}s of reports lost"
    assert json.loads(history_lines(attempt)[-1])["t"] >= progress["updated_at"] - 1.0


@pytest.fixture
def current_attempt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A job's environment: attempt 1 of run r-1, which meta.json says is running; (attempt folder, meta.json)."""
    for name in list(os.environ):
        if name.startswith("FRAY_"):
            monkeypatch.delenv(name)
    run = tmp_path / "home" / "runs" / "r-1"
    attempt = run / "attempts" / "1"
    attempt.mkdir(parents=True)
    meta = run / contract.META
    meta.write_text(json.dumps({"attempts": [{"number": 1, "state": "running"}]}))
    for name, value in {contract.ENV_HOME: str(tmp_path / "home"), contract.ENV_RUN_ID: "r-1",
                        contract.ENV_ATTEMPT: "1", contract.ENV_ATTEMPT_DIR: str(attempt)}.items():
        monkeypatch.setenv(name, value)
    return attempt, meta


def test_a_superseded_attempt_writes_nothing_and_its_next_report_says_so(current_attempt: tuple[Path, Path]) -> None:
    attempt, meta = current_attempt
    report.progress(step=1, loss=0.5)
    report.flush()
    before = {name: (attempt / name).read_bytes() for name in (contract.PROGRESS, contract.HISTORY)}
    meta.write_text(json.dumps({"attempts": [{"number": 1, "state": "ended", "cause": "lost"}, {"number": 2}]}))
    report.progress(step=2, loss=0.4)  # held in memory; the thread's write finds the attempt replaced

    def refused() -> bool:
        try:
            report.progress(step=3)
        except Superseded:
            return True
        return False

    wait_until(refused, timeout=10, what="a report to be refused once the writer found the attempt superseded")
    with pytest.raises(Superseded, match="attempt 2 has replaced attempt 1"):
        report.progress(step=4)
    report.flush()
    assert {name: (attempt / name).read_bytes() for name in before} == before
    assert sorted(os.listdir(attempt)) == sorted(before)  # no temp file, nothing else


def test_a_checkpoint_version_is_on_disk_when_the_call_returns(current_attempt: tuple[Path, Path]) -> None:
    attempt, _ = current_attempt
    report.progress(step=5, checkpoint_version=1)  # what the wrapper's planned stop waits for
    assert json.loads((attempt / contract.PROGRESS).read_text())["checkpoint_version"] == 1
