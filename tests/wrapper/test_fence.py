"""Fencing: a superseded attempt's wrapper kills its workload at once and writes nothing more.

Real wrappers, started by the local backend, against a meta.json this test
writes as the daemon would: closing the attempt, or making FRAY_HOME vanish.
The real-Slurm version (a node's slurmd killed) is in test_slurm_backend.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import running, wait_until
from fray.backends.protocol import AttemptKey, SubmitRequest
from fray.backends.local.backend import LocalBackend
from fray.core.model import Attempt, AttemptState, Meta, Phase
from fray.state import runs, store
from fray.state.layout import Home
from fray.wrapper.fence import superseded

pytestmark = pytest.mark.slow

# Writes to the shared checkpoint folder every 0.1 s, as a training loop would.
WRITER = """#!/bin/bash
#FRAY --heartbeat-interval 0.5 --heartbeat-timeout 2
while true; do date +%s.%N >> "$FRAY_CHECKPOINT_DIR/written-by-$FRAY_ATTEMPT"; echo tick; sleep 0.1; done
"""


def test_an_attempt_is_current_until_closed_or_replaced():
    def meta(*states: str) -> dict:
        return {"attempts": [{"number": i + 1, "state": s, "cause": "lost" if s == "ended" else None}
                             for i, s in enumerate(states)]}

    assert superseded(meta("running"), 1) is None
    assert superseded(meta("stopping"), 1) is None  # a graceful stop is still its own
    assert superseded(meta("ended"), 1) == "the daemon closed attempt 1 (lost)"
    assert superseded(meta("ended", "submitting"), 1) == "attempt 2 has replaced attempt 1"
    assert superseded(meta(), 1) is None  # not recorded yet: not fenced


def test_a_corrupt_meta_json_is_judged_by_its_last_good_copy(tmp_path):
    from fray.wrapper import contract, fence

    run = tmp_path / "runs" / "r-1"
    run.mkdir(parents=True)
    closed = {"attempts": [{"number": 1, "state": "ended", "cause": "lost"}]}
    (run / contract.META).write_text("[1,2]")
    assert fence.read(str(run / contract.META), 1) == fence.Reading(None, True, False)  # no copy: cannot tell
    (run / contract.META_COPY).write_text(json.dumps(closed))
    assert fence.read(str(run / contract.META), 1).reason == "the daemon closed attempt 1 (lost)"
    (run / contract.META).unlink()  # moved aside
    assert fence.read(str(run / contract.META), 1).reason == "the daemon closed attempt 1 (lost)"
    (run / contract.META).write_text(json.dumps({"attempts": [{"number": 1, "state": "running"}]}))
    assert fence.read(str(run / contract.META), 1) == fence.Reading(None, True, True)  # meta.json itself first


def start_attempt(home: Home, tmp_path: Path) -> tuple[Meta, object]:
    store.ensure_home(home)
    script = tmp_path / "writer.sh"
    script.write_text(WRITER)
    meta = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(tmp_path)))
    paths = home.run(meta.run_id)
    meta.phase, meta.wait_reason = Phase.ACTIVE.value, None
    meta.attempts.append(Attempt(number=1, state=AttemptState.RUNNING.value, backend="local", submitted_at=time.time()))
    store.write_json(paths.meta, meta.to_dict(), "meta")
    LocalBackend(home, {"cpus": 2, "gpus": 0}).submit(SubmitRequest(
        key=AttemptKey(meta.run_id, 1), name=meta.name, spec=meta.spec, home=home.root,
        script=paths.script(meta.script["frozen"]), attempt_dir=paths.attempt(1).dir,
        checkpoint_dir=paths.checkpoints_dir))
    written = paths.checkpoints_dir / "written-by-1"
    wait_until(lambda: paths.attempt(1).started.exists() and written.exists(), what="the workload to write")
    return meta, json.loads(paths.attempt(1).started.read_text())


def wait_gone(started: dict, wrapper_log: Path, timeout: float, what: str) -> None:
    """Until the attempt's workload and wrapper are gone; a failure shows what each still is and the wrapper's
    log (a fence that did not fire says why there)."""
    try:
        wait_until(lambda: not running(started["workload_pid"]) and not running(started["pid"]), timeout=timeout,
                   what=what)
    except AssertionError as exc:
        states = {name: _state(started[key]) for name, key in (("workload", "workload_pid"), ("wrapper", "pid"))}
        log = wrapper_log.read_text(errors="replace")[-3000:] if wrapper_log.exists() else "(no wrapper.log)"
        raise AssertionError(f"{exc}; still there: {states}\nwrapper.log:\n{log}") from None


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file below `folder`: (size, mtime_ns)."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_closed_attempt_kills_its_workload_within_a_heartbeat_and_writes_nothing_more(home, tmp_path):
    meta, started = start_attempt(home, tmp_path)
    paths = home.run(meta.run_id)
    # The daemon closes attempt 1 and records attempt 2, as it does for a node it lost.
    meta.attempts[0].state, meta.attempts[0].cause = AttemptState.ENDED.value, "lost"
    meta.attempts.append(Attempt(number=2, state=AttemptState.SUBMITTING.value, backend="local",
                                 submitted_at=time.time()))
    store.write_json(paths.meta, meta.to_dict(), "meta")
    closed_at = time.monotonic()
    wait_gone(started, paths.attempt(1).wrapper_log, 5, "the superseded workload and its wrapper to be gone")
    assert time.monotonic() - closed_at < 0.5 + 1.0  # one heartbeat interval, and a margin for a busy machine
    before = {"attempt": snapshot(paths.attempt(1).dir), "checkpoints": snapshot(paths.checkpoints_dir)}
    time.sleep(1.5)  # three intervals: anything still alive would have written by now
    assert {"attempt": snapshot(paths.attempt(1).dir), "checkpoints": snapshot(paths.checkpoints_dir)} == before
    assert not paths.attempt(1).exit.exists() and not paths.attempt(1).failure.exists()
    assert "fenced" not in paths.attempt(1).wrapper_log.read_text()  # not even a log line after the fence


ORPHAN_IN_THE_GROUP = """
import os, subprocess, time
from fray.wrapper import procs

assert procs.become_subreaper()  # as the wrapper is
leader = subprocess.Popen(["bash", "-c", "sleep 30 & echo $!; exit 0"], stdout=subprocess.PIPE, text=True,
                          start_new_session=True)
leader.stdout.readline()  # the orphan's pid: bash has started it
leader.wait()  # the workload, reaped as the reaper thread does before it stops; its group lives on in the orphan
began = time.monotonic()
procs.kill_all_now(leader.pid)
took = time.monotonic() - began
try:
    os.killpg(leader.pid, 0)
    left = "the group is still there"
except ProcessLookupError:
    left = "nothing"
print(f"{took:.2f}", left)
"""


def test_the_fences_kill_reaps_what_it_kills_so_a_fenced_wrapper_exits_at_once():
    """A fenced wrapper once lived 5 s past its fence (a suite run on two busy cores): the workload's child died
    after the workload, whose reaper thread had stopped, and its zombie kept the group alive to the wait."""
    proc = subprocess.run([sys.executable, "-c", ORPHAN_IN_THE_GROUP], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    took, left = proc.stdout.split(maxsplit=1)
    assert left.strip() == "nothing"
    assert float(took) < 1.0, took  # the wait is 5 s (KILL_WAIT_SEC) when nothing reaps the killed orphan


def test_a_wrapper_cut_off_from_fray_home_kills_its_workload_after_the_grace(home, tmp_path):
    meta, started = start_attempt(home, tmp_path)
    moved = tmp_path / "unreachable"
    shutil.move(str(home.root), moved)  # FRAY_HOME is gone from this node's point of view
    gone_at = time.monotonic()
    wait_gone(started, Home(moved).run(meta.run_id).attempt(1).wrapper_log, 10, "the cut-off workload to be killed")
    # --fence-grace is half of --heartbeat-timeout 2: the daemon would give up on it at 2 s.
    assert time.monotonic() - gone_at < 2.0 + 1.0
    attempt = Home(moved).run(meta.run_id).attempt(1)
    assert not attempt.exit.exists() and not attempt.failure.exists()


def test_a_lost_meta_json_is_judged_by_its_copy_and_a_lost_copy_too_stops_the_attempt_after_the_grace(home, tmp_path):
    """No daemon here to restore anything: the wrapper alone must neither die of one lost record nor run on,
    unstoppable, when the run's state is lost altogether."""
    meta, started = start_attempt(home, tmp_path)
    paths = home.run(meta.run_id)
    paths.meta.unlink()  # moved aside as corrupt, say
    time.sleep(2.5)  # longer than --fence-grace (1 s): judged by the copy all along
    assert running(started["workload_pid"]) and running(started["pid"])
    meta.attempts[0].state, meta.attempts[0].cause = AttemptState.ENDED.value, "lost"
    store.write_json(paths.meta_copy, meta.to_dict(), "meta")  # the copy says it is closed: fenced by it
    wait_gone(started, paths.attempt(1).wrapper_log, 5, "the attempt closed in the copy to be fenced")

    meta2, started2 = start_attempt(home, tmp_path)
    paths2 = home.run(meta2.run_id)
    paths2.meta.write_text("[1,2]\n")
    paths2.meta_copy.write_text("[1,2]\n")  # both lost: nothing could ever stop it
    lost_at = time.monotonic()
    wait_gone(started2, paths2.attempt(1).wrapper_log, 10, "the attempt of a run whose state is lost to stop itself")
    assert time.monotonic() - lost_at < 1.0 + 1.5  # --fence-grace and a check interval


@pytest.mark.parametrize("records", ["rename", "write-once"])
def test_a_checkpoint_is_promoted_whole_while_current_and_never_once_superseded(home, tmp_path, monkeypatch,
                                                                              records):
    """Both layouts: promoted by one rename, or (FRAY_RECORDS=write-once, a gcsfuse FRAY_HOME) by a record
    naming the folder where it was written. Same guarantees either way."""
    from fray import report

    store.ensure_home(home)
    script = tmp_path / "job.sh"
    script.write_text("true\n")
    meta = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(tmp_path)))
    paths = home.run(meta.run_id)
    meta.attempts.append(Attempt(number=1, state=AttemptState.RUNNING.value, backend="local", submitted_at=time.time()))
    store.write_json(paths.meta, meta.to_dict(), "meta")
    for name, value in {"FRAY_HOME": str(home.root), "FRAY_RUN_ID": meta.run_id, "FRAY_ATTEMPT": "1",
                        "FRAY_CHECKPOINT_DIR": str(paths.checkpoints_dir), "FRAY_RECORDS": records}.items():
        monkeypatch.setenv(name, value)

    def state_of(name: str) -> str | None:
        """What checkpoint `name` holds once promoted, None while it is not."""
        latest = report.latest_checkpoint()
        return (latest / "state").read_text() if latest is not None and latest.name == name else None

    assert report.latest_checkpoint() is None
    with report.checkpoint("step-10") as folder:
        (folder / "state").write_text("10")
        assert report.latest_checkpoint() is None  # not visible until whole
    assert state_of("step-10") == "10"
    with report.checkpoint("step-20") as folder:
        (folder / "state").write_text("20")
    assert state_of("step-20") == "20"
    with pytest.raises(FileExistsError):
        with report.checkpoint("step-20") as folder:
            (folder / "state").write_text("again")
    assert state_of("step-20") == "20"

    meta.attempts[0].state = AttemptState.ENDED.value  # the daemon closes attempt 1
    store.write_json(paths.meta, meta.to_dict(), "meta")
    with pytest.raises(report.Superseded):
        with report.checkpoint("step-30") as folder:
            (folder / "state").write_text("30")
    assert state_of("step-20") == "20"
    promoted = sorted(p.name for p in paths.checkpoints_dir.iterdir() if not p.name.startswith("."))
    if records == "rename":
        assert promoted == ["step-10", "step-20"]
    else:  # nothing moved: the folders stay where they were written, a write-once record promotes each
        assert promoted == []
        assert sorted(os.listdir(paths.checkpoints_dir / ".promoted")) == ["step-10", "step-20"]
        assert report.latest_checkpoint() == paths.checkpoints_dir / ".staging" / "attempt-1" / "step-20"


def test_a_promotion_record_still_being_uploaded_is_not_a_checkpoint_yet(tmp_path, monkeypatch):
    from fray import report

    monkeypatch.setenv("FRAY_CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("FRAY_RECORDS", "write-once")
    with report.checkpoint("step-1") as folder:
        (folder / "state").write_text("1")
    (tmp_path / ".staging" / "attempt-0" / "step-2").mkdir()
    record = {"folder": ".staging/attempt-0/step-2", "promoted_at": time.time() + 60}
    (tmp_path / ".promoted" / "step-2").write_text(json.dumps(record))  # no end newline: not whole yet
    assert report.latest_checkpoint() == tmp_path / ".staging" / "attempt-0" / "step-1"
    (tmp_path / ".promoted" / "step-2").write_text(json.dumps(record) + "\n")
    assert report.latest_checkpoint() == tmp_path / ".staging" / "attempt-0" / "step-2"
