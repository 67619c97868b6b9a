"""The attempt owns its process tree: whatever kills the wrapper, what it started dies too, and no two
attempts of a run ever have processes alive at one instant.

Real wrappers, real workloads that escape their process group the ways real
ones do (`setsid cmd &`, a double-forked daemon, a plain `cmd &`), a real
daemon. A watcher samples /proc every 20 ms for processes tagged with an
attempt (FRAY_ATTEMPT_TAG) and records any sample holding two attempts of one
run. The bench of the same (time from fence to the old tree's death) is
tests/bench/bench_fence.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import running, wait_until
from fray.core import strays
from fray.core.model import Attempt, AttemptState, Control, Meta
from fray.daemon.cycle_state import RunState
from fray.daemon.strays import StrayKiller
from fray.state import runs, store
from fray.state.layout import Home
from fray.wrapper import contract, tags

pytestmark = pytest.mark.slow

# A workload whose tree escapes its process group three ways, then waits.
ESCAPING = """#!/bin/bash
#FRAY --heartbeat-interval 0.5 --heartbeat-timeout 3 --stop-grace 1 --backoff-base 0 --startup-grace 0
setsid sleep 300 </dev/null >/dev/null 2>&1 &
( setsid sleep 301 </dev/null >/dev/null 2>&1 & )
sleep 302 &
while true; do sleep 0.2; done
"""


class TagWatch:
    """Samples /proc continually for the tagged processes of one home; records every overlap of attempts."""

    def __init__(self, home: Home) -> None:
        self.home = str(home.root)
        self.overlaps: list[str] = []
        self.seen: dict[tuple[str, int], set[int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "TagWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def alive(self, run_id: str, attempt: int) -> list[int]:
        return [pid for pid, tag in tags.tagged(self.home).items() if (tag.run_id, tag.attempt) == (run_id, attempt)]

    def _loop(self) -> None:
        while not self._stop.wait(0.02):
            by_run: dict[str, set[int]] = {}
            for pid, tag in tags.tagged(self.home).items():
                by_run.setdefault(tag.run_id, set()).add(tag.attempt)
                self.seen.setdefault((tag.run_id, tag.attempt), set()).add(pid)
            for run_id, attempts in by_run.items():
                if len(attempts) > 1:
                    self.overlaps.append(f"{time.time():.3f} run {run_id}: attempts {sorted(attempts)} alive at once")


def submit(home: Home, tmp_path: Path, body: str) -> str:
    script = tmp_path / "tree.sh"
    script.write_text(body)
    return runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(tmp_path))).run_id


def meta_of(home: Home, run_id: str) -> dict:
    return json.loads(home.run(run_id).meta.read_text())


def events(home: Home, run_id: str) -> list[dict]:
    return [json.loads(line) for line in home.run(run_id).events.read_text().splitlines()]


def start_local(home: Home, meta: Meta) -> dict:
    """Attempt 1 of `meta` recorded as the daemon records it, started by the local backend; its started.json."""
    from fray.backends.protocol import AttemptKey, SubmitRequest
    from fray.backends.local.backend import LocalBackend
    from fray.core.model import Phase

    paths = home.run(meta.run_id)
    meta.phase, meta.wait_reason = Phase.ACTIVE.value, None
    meta.attempts.append(Attempt(number=1, state=AttemptState.RUNNING.value, backend="local", submitted_at=time.time()))
    store.write_json(paths.meta, meta.to_dict(), "meta")
    LocalBackend(home, {"cpus": 2, "gpus": 0}).submit(SubmitRequest(
        key=AttemptKey(meta.run_id, 1), name=meta.name, spec=meta.spec, home=home.root,
        script=paths.script(meta.script["frozen"]), attempt_dir=paths.attempt(1).dir,
        checkpoint_dir=paths.checkpoints_dir))
    return wait_until(lambda: paths.attempt(1).started.exists() and json.loads(paths.attempt(1).started.read_text()),
                      what="attempt 1 to start")


def test_a_killed_wrappers_whole_tree_dies_and_never_overlaps_the_next_attempt(home, daemon, tmp_path):
    run_id = submit(home, tmp_path, ESCAPING)
    with TagWatch(home) as watch:
        started = wait_until(lambda: home.run(run_id).attempt(1).started.exists()
                             and len(watch.alive(run_id, 1)) >= 5 and json.loads(home.run(run_id).attempt(1).started.read_text()),
                             what="attempt 1 and its escaped tree")
        tree = watch.alive(run_id, 1)
        os.kill(started["pid"], signal.SIGKILL)  # the wrapper dies as the OOM killer kills: no cleanup of its own
        killed_at = time.monotonic()
        wait_until(lambda: not running(started["workload_pid"]), timeout=1, what="the workload to die with its wrapper")
        wait_until(lambda: not watch.alive(run_id, 1), timeout=10, what="attempt 1's whole tree to die")
        died_in = time.monotonic() - killed_at
        wait_until(lambda: len(watch.alive(run_id, 2)) >= 5, timeout=20, what="attempt 2 and its tree")
        assert meta_of(home, run_id)["attempts"][0]["cause"] == "lost"
        # Attempt 1's guardian and the daemon race to kill the escaped tree. Each says what it killed - the daemon
        # in events.jsonl, the guardian in attempt 1's wrapper.log - but the guardian only while attempt 1 is still
        # current: one that kills after the daemon's close writes nothing (the fence). What is said must be true.
        swept = {pid for e in events(home, run_id) if e["kind"] == "reaped" and e["attempt"] == 1
                 for pid in e["data"]["pids"]}
        assert swept <= set(tree), (swept, tree)

        stop = subprocess.run([sys.executable, "-m", "fray.cli.main", "control", "stop", run_id],
                              capture_output=True, text=True, timeout=60)
        assert stop.returncode == 0, stop.stderr
        wait_until(lambda: meta_of(home, run_id)["phase"] == "ended", timeout=20, what="the stop")
        wait_until(lambda: not tags.tagged(str(home.root)), timeout=10, what="every process of the run to die")
    assert meta_of(home, run_id)["end"]["status"] == "stopped_manual"
    assert not watch.overlaps, watch.overlaps[:5]
    assert died_in < 10


def test_the_workload_dies_at_once_with_its_wrapper_even_without_a_daemon(home, tmp_path):
    from tests.wrapper.test_fence import start_attempt

    meta, started = start_attempt(home, tmp_path)
    os.kill(started["pid"], signal.SIGKILL)
    wait_until(lambda: not running(started["workload_pid"]), timeout=1, interval=0.005,
               what="the parent-death signal to kill the workload")


def test_a_killed_wrappers_escaped_tree_dies_at_once_even_with_no_stray_killer_anywhere(home, tmp_path):
    """No daemon, no next wrapper: what a Slurm node without cgroups or a TPU host is once the wrapper is
    SIGKILLed. Its guardian kills the escaped processes and says so in the attempt's wrapper.log."""
    store.ensure_home(home)
    script = tmp_path / "tree.sh"
    script.write_text(ESCAPING)
    meta = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(tmp_path)))
    started = start_local(home, meta)
    tree = wait_until(lambda: len(found := TagWatch(home).alive(meta.run_id, 1)) >= 5 and found, what="the escaped tree")
    os.kill(started["pid"], signal.SIGKILL)
    wait_until(lambda: not TagWatch(home).alive(meta.run_id, 1), timeout=2, interval=0.005,
               what="the guardian to kill the escaped tree")
    logged = wait_until(lambda: "guardian: killed pids" in (text := home.run(meta.run_id).attempt(1).wrapper_log.read_text())
                        and text, what="the guardian's line in wrapper.log")
    assert all(str(pid) in logged for pid in set(tree) - {started["workload_pid"]}), logged


def test_a_frozen_or_thawed_attempt_writes_nothing_after_its_fence(home, tmp_path):
    """The wrapper is frozen; its workload goes on reporting progress. The daemon closes the attempt. Neither the
    workload (report.progress) nor the wrapper once thawed (its heartbeat) may write anything after that."""
    from tests.wrapper.test_fence import snapshot

    store.ensure_home(home)
    script = tmp_path / "train.py"
    script.write_text("import time\nfrom fray import report\nstep = 0\n"
                      "while True:\n    step += 1\n    report.progress(step=step)\n    time.sleep(0.02)\n")
    meta = runs.create_run(home, runs.SubmitOptions(script=script, overrides={"heartbeat_interval_sec": 0.2},
                                                    workdir=str(tmp_path)))
    paths = home.run(meta.run_id)
    started = start_local(home, meta)
    attempt_dir = paths.attempt(1).dir
    wait_until(lambda: paths.attempt(1).progress.exists(), what="progress")
    os.kill(started["pid"], signal.SIGSTOP)
    meta.attempts[0].state, meta.attempts[0].cause = AttemptState.ENDED.value, "heartbeat_stall"
    store.write_json(paths.meta, meta.to_dict(), "meta")  # the fence
    fenced_at = time.time()
    time.sleep(0.1)  # a write whose check passed just before the fence lands now, whole; none may come later
    before = snapshot(attempt_dir)
    wait_until(lambda: not running(started["workload_pid"]), timeout=5,
               what="the workload to stop on Superseded")  # its next report.progress raised
    time.sleep(0.5)  # more than two heartbeat intervals frozen
    os.kill(started["pid"], signal.SIGCONT)
    wait_until(lambda: not running(started["pid"]), timeout=5, what="the thawed wrapper to exit")
    after = snapshot(attempt_dir)
    changed = {name: (before.get(name), after.get(name)) for name in set(before) | set(after)
               if before.get(name) != after.get(name) and name not in (contract.STDERR,)}
    assert not changed, changed
    late = {name: mtime / 1e9 - fenced_at for name, (_size, mtime) in after.items()
            if mtime / 1e9 > fenced_at + 0.1 and name != contract.STDERR}
    assert not late, late
    assert "Superseded" in paths.attempt(1).stderr.read_text()


def test_runtime_command_receipts_and_results_are_fenced(home, tmp_path, monkeypatch):
    from fray import report

    store.ensure_home(home)
    script = tmp_path / "x.sh"
    script.write_text("#!/bin/bash\n")
    meta = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(tmp_path)))
    paths = home.run(meta.run_id)
    meta.attempts.append(Attempt(number=1, state=AttemptState.RUNNING.value, backend="local", submitted_at=time.time()))
    store.write_json(paths.meta, meta.to_dict(), "meta")
    commands = tmp_path / "commands"
    commands.mkdir()
    envelope = {"id": "c1", "type": "tune", "issued_at": time.time(), "actor": {}, "payload": {"lr": 0.1}}
    (commands / "c1.json").write_text(json.dumps(envelope))
    attempt_dir = paths.attempt(1).dir
    attempt_dir.mkdir(parents=True)
    for name, value in {"FRAY_HOME": str(home.root), "FRAY_RUN_ID": meta.run_id, "FRAY_ATTEMPT": "1",
                        "FRAY_ATTEMPT_DIR": str(attempt_dir), "FRAY_COMMANDS_DIR": str(commands)}.items():
        monkeypatch.setenv(name, value)
    assert report.progress(step=1) is not None
    meta.attempts[0].state = AttemptState.ENDED.value
    store.write_json(paths.meta, meta.to_dict(), "meta")
    report.progress(step=2)  # held in memory: its write is what the fence refuses
    for write in (report.flush, lambda: report.progress(step=3), lambda: report.final(acc=1.0),
                  lambda: list(report.commands()), lambda: report.ack("c1", applied=True)):
        with pytest.raises(report.Superseded):
            write()
    assert json.loads(paths.attempt(1).progress.read_text())["step"] == 1
    assert sorted(os.listdir(commands)) == ["c1.json"]
    assert not paths.attempt(1).dir.joinpath(contract.RESULT).exists()


# -- the sweeper's judgement (pure) and the daemon's sweep -------------------------------------


def with_attempts(meta: Meta, states: list[str]) -> Meta:
    """`meta` with one attempt in each of `states` (ended ones lost)."""
    return Meta.from_dict({**meta.to_dict(), "attempts": [
        {"number": i + 1, "state": s, "backend": "local", "submitted_at": 0.0, "cause": "lost" if s == "ended" else None}
        for i, s in enumerate(states)]})


def a_run(home: Home, tmp_path: Path) -> Meta:
    store.ensure_home(home)
    script = tmp_path / "x.sh"
    script.write_text("#!/bin/bash\n")
    return runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(tmp_path)))


def test_a_stray_is_a_process_of_a_closed_attempt_and_nothing_is_killed_on_a_guess(home, tmp_path):
    meta = a_run(home, tmp_path)

    def closed(states: list[str], attempt: int) -> str | None:
        return strays.closed(strays.RunKnown(with_attempts(meta, states)), attempt)

    assert closed(["running"], 1) is None
    assert closed(["stopping"], 1) is None  # a graceful stop is still its own
    assert closed(["ended"], 1) == "the daemon closed attempt 1 (lost)"
    assert closed(["ended", "submitting"], 1) == "attempt 2 has replaced attempt 1"
    assert closed(["ended", "submitting"], 2) is None
    assert closed(["running"], 2) is None  # newer than the meta.json read
    assert strays.closed(strays.RunKnown(None), 1) is None  # meta.json unreadable: no guess
    assert strays.closed(strays.RunKnown(None, exists=False), 1) == "the run's folder is gone"
    assert tags.Tag.parse("r-1:3:/a:b/home") == tags.Tag("r-1", 3, "/a:b/home")
    assert tags.Tag.parse("r-1:x:/home") is None and tags.Tag.parse("r-1:2:") is None


def test_the_daemons_stray_killer_kills_only_closed_attempts_processes_and_records_it(home, tmp_path):
    closed_run, live_run = a_run(home, tmp_path), a_run(home, tmp_path)

    def spawn(run_id: str, attempt: int, home_text: str = str(home.root)) -> subprocess.Popen[bytes]:
        env = {**os.environ, contract.ENV_ATTEMPT_TAG: tags.Tag(run_id, attempt, home_text).text()}
        return subprocess.Popen(["sleep", "60"], env=env, start_new_session=True)

    stray, current, newer = spawn(closed_run.run_id, 1), spawn(live_run.run_id, 1), spawn(live_run.run_id, 2)
    other_home = spawn(closed_run.run_id, 1, str(home.root) + "-other")
    try:
        recorded: list[tuple] = []
        states = {closed_run.run_id: RunState(home.run(closed_run.run_id), with_attempts(closed_run, ["ended", "running"]),
                                               Control()),
                  live_run.run_id: RunState(home.run(live_run.run_id), with_attempts(live_run, ["running"]), Control())}
        killed = StrayKiller(home, lambda *args: recorded.append(args)).reap(states)
        assert {tag.run_id for tag in killed} == {closed_run.run_id}
        assert stray.wait(5) == -signal.SIGKILL
        assert current.poll() is None and newer.poll() is None and other_home.poll() is None
        paths, kind, reason, attempt, data = recorded[0]
        assert (paths.run_id, kind, attempt, data) == (closed_run.run_id, "reaped", 1, {"pids": [stray.pid]})
        assert "attempt 2 has replaced attempt 1" in reason
    finally:
        for proc in (stray, current, newer, other_home):
            proc.kill()
            proc.wait()


# -- the matrix: each fault, then `fray control stop`; one attempt alive at any instant, nothing left --------


def _kill_wrapper(home: Home, run_id: str, started: dict) -> None:
    os.kill(started["pid"], signal.SIGKILL)


def _freeze_wrapper(home: Home, run_id: str, started: dict) -> None:
    os.kill(started["pid"], signal.SIGSTOP)  # its heartbeat stalls: the daemon kills it and starts attempt 2


def _kill_workload(home: Home, run_id: str, started: dict) -> None:
    os.kill(started["workload_pid"], signal.SIGKILL)  # a workload failure: its escaped children must go too


def _freeze_and_thaw_workload(home: Home, run_id: str, started: dict) -> None:
    os.kill(started["workload_pid"], signal.SIGSTOP)
    time.sleep(0.5)
    os.kill(started["workload_pid"], signal.SIGCONT)


def _kill_daemon(home: Home, run_id: str, started: dict) -> None:
    lease = json.loads(home.daemon_lease.read_text())
    os.kill(lease["pid"], signal.SIGKILL)  # `fray control stop` below starts another, which adopts the attempt


FAULTS = {"wrapper SIGKILL": _kill_wrapper, "wrapper SIGSTOP": _freeze_wrapper, "workload SIGKILL": _kill_workload,
          "workload SIGSTOP+SIGCONT": _freeze_and_thaw_workload, "daemon SIGKILL": _kill_daemon}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_whatever_dies_one_attempt_is_alive_at_a_time_and_stop_leaves_nothing(home, tmp_path, fault):
    from conftest import start_daemon

    body = ESCAPING.replace("--heartbeat-timeout 3", "--heartbeat-timeout 2 --max-retries 5")
    daemon = start_daemon(home)
    run_id = submit(home, tmp_path, body)
    started: dict = {}
    try:
        with TagWatch(home) as watch:
            started = wait_until(lambda: home.run(run_id).attempt(1).started.exists() and len(watch.alive(run_id, 1)) >= 5
                                 and json.loads(home.run(run_id).attempt(1).started.read_text()), what="attempt 1's tree")
            FAULTS[fault](home, run_id, started)
            time.sleep(1.0)  # let the fault play out (a restart, a stall being noticed)
            stop = subprocess.run([sys.executable, "-m", "fray.cli.main", "control", "stop", run_id],
                                  capture_output=True, text=True, timeout=60)
            assert stop.returncode == 0 or "already ended" in stop.stderr, stop.stderr
            meta = wait_until(lambda: (m := meta_of(home, run_id))["phase"] == "ended" and m, timeout=30,
                              what="the run to end")
            wait_until(lambda: not tags.tagged(str(home.root)) and not running(started["pid"]), timeout=10,
                       what="every process of the run to die")
        assert meta["end"]["status"] in ("stopped_manual", "failed"), meta["end"]
        assert not watch.overlaps, watch.overlaps[:5]
    finally:
        from conftest import stop_daemon

        if started and running(started["pid"]):
            os.kill(started["pid"], signal.SIGCONT)
        stop_daemon(daemon)
        lease = json.loads(home.daemon_lease.read_text()) if home.daemon_lease.exists() else {}
        if lease.get("pid") and running(lease["pid"]):
            os.kill(lease["pid"], signal.SIGTERM)
