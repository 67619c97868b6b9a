"""The wrapper's hang watch (fray.wrapper.hangwatch) and stack capture (fray.wrapper.stacks).

The judging and parsing are pure and tested as values; the rest runs the real
wrapper (`python -m fray.wrapper run`) on real hung workloads: one that stops
itself, one deadlocked on a lock, one blocked reading a FIFO nobody writes, one
spinning without progress; and on bad input: a fork storm, py-spy denied, a
workload that never imported fray. Every record left is checked against schemas/.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import wait_until
from test_wrapper import REPO, child_env, load, wrapper_argv, write_script
from fray.wrapper import contract, hangwatch, proctree, stacks

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the hang watch reads Linux's /proc")

PYSPY_DUMP = """Process 4242: python train.py
Python v3.11.7 (/usr/bin/python3.11)

Thread 4250 (idle): "Thread-1 (loader)"
    wait (threading.py:320)
    load (data.py:12)
Thread 4242 (idle): "MainThread"
    all_reduce (/work/dist.py:88)
    step (/work/train.py:123)
    <module> (/work/train.py:200)
"""
FAULTHANDLER_DUMP = """Thread 0x00007f2a1c7fe640 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
  File "/work/data.py", line 12 in load

Current thread 0x00007f2a2d1b8b80 (most recent call first):
  File "/work/train.py", line 123 in step
  File "/work/train.py", line 200 in <module>
"""


def proc(pid: int, state: str = "S", cpu: float = 0.0, ppid: int = 1, sid: int = 1) -> proctree.Proc:
    return proctree.Proc(pid, ppid, sid, state, cpu, "python")


# -- pure ------------------------------------------------------------------


def test_a_main_process_stopped_for_three_seconds_is_hung_and_a_held_one_never_is():
    judge = hangwatch.Judge(idle_timeout=0)
    assert judge.main_state(0.0, 7, "T", held=False) is None
    assert judge.main_state(2.9, 7, "T", held=False) is None
    verdict = judge.main_state(3.0, 7, "T", held=False)
    assert verdict is not None and verdict.cause == "hang_stopped" and verdict.stopped
    assert "pid 7" in verdict.detail and "3s" in verdict.detail
    judge = hangwatch.Judge(idle_timeout=0)
    assert all(judge.main_state(t, 7, "T", held=True) is None for t in (0.0, 10.0, 100.0))
    assert judge.main_state(200.0, 7, "S", held=False) is None and judge.stopped_since is None


def test_what_was_seen_before_the_wrapper_itself_was_frozen_proves_nothing():
    # Slurm's suspend stops the wrapper with its workload; on resume the wrapper may look before the workload runs.
    judge = hangwatch.Judge(idle_timeout=30, interval=10)
    assert judge.main_state(0.0, 7, "T", held=False) is None
    assert judge.main_state(3600.0, 7, "T", held=False) is None  # an hour later, but the wrapper was stopped too
    assert judge.main_state(3601.0, 7, "T", held=False) is None
    assert judge.main_state(3604.0, 7, "T", held=False) is not None  # then 3 s watched: stopped indeed
    tree = {1: proc(1)}
    judge.tree(0.0, tree, None, held=False)
    assert judge.tree(3600.0, tree, None, held=False) is None and judge.idle_since is None
    assert judge.tree(3630.0, tree, None, held=False) is not None


def test_an_idle_tree_is_hung_after_the_idle_timeout_and_cpu_progress_or_new_processes_reset_it():
    judge = hangwatch.Judge(idle_timeout=30, interval=10)
    tree = {1: proc(1, cpu=5.0), 2: proc(2, cpu=1.0, ppid=1)}
    assert judge.tree(0.0, tree, None, held=False) is None
    assert judge.tree(20.0, tree, None, held=False) is None
    verdict = judge.tree(30.0, tree, None, held=False)
    assert verdict is not None and verdict.cause == "hang_idle" and "2 processes" in verdict.detail
    for busy in ({1: proc(1, cpu=6.0), 2: proc(2, cpu=1.0)},  # CPU used
                 {1: proc(1, cpu=5.0)}):  # a process came or went
        judge = hangwatch.Judge(idle_timeout=30, interval=10)
        judge.tree(0.0, tree, None, held=False)
        judge.tree(20.0, tree, None, held=False)
        assert judge.tree(40.0, busy, None, held=False) is None
        assert judge.tree(60.0, busy, None, held=False) is None  # idle again only since 40
    judge = hangwatch.Judge(idle_timeout=30, interval=10)
    judge.tree(0.0, tree, 1.0, held=False)
    assert judge.tree(40.0, tree, 2.0, held=False) is None  # progress reported
    assert hangwatch.Judge(idle_timeout=0).tree(1e6, tree, None, held=False) is None  # 0: off


def test_processes_long_in_d_state_are_reported_and_forgotten_once_they_wake():
    judge = hangwatch.Judge(idle_timeout=0, interval=10)
    judge.tree(0.0, {1: proc(1), 2: proc(2, "D")}, None, held=False)
    judge.tree(20.0, {1: proc(1), 2: proc(2, "D")}, None, held=False)
    assert judge.stuck_io(20.0) == []
    judge.tree(31.0, {1: proc(1), 2: proc(2, "D")}, None, held=False)
    assert judge.stuck_io(31.0) == [(2, 31.0)]
    judge.tree(40.0, {1: proc(1), 2: proc(2, "S")}, None, held=False)
    assert judge.stuck_io(40.0) == []


def test_the_tree_is_the_descendants_and_the_session_orphans_of_the_workload_not_its_zombies():
    everyone = {1: proc(1), 10: proc(10, sid=10, ppid=1), 11: proc(11, ppid=10, sid=10), 12: proc(12, ppid=11, sid=99),
                13: proc(13, ppid=1, sid=10), 14: proc(14, "Z", ppid=10, sid=10), 20: proc(20, ppid=1, sid=20)}
    assert sorted(proctree.members(10, everyone)) == [10, 11, 12, 13]
    assert proctree.members(10, {}) == {}
    parsed = proctree.parse_stat(5, b"5 (a) b) (c) T 1 5 5 0 -1 4194560 0 0 0 0 250 50 0 0 20 0 1 0")
    assert parsed is not None and parsed.comm == "a) b) (c" and parsed.state == "T" and parsed.sid == 5
    assert parsed.cpu_sec == pytest.approx(300 / proctree.CLOCK_TICKS)
    assert proctree.parse_stat(5, b"garbage") is None


def test_the_innermost_frame_of_the_main_thread_is_read_from_py_spy_and_faulthandler_dumps():
    assert stacks.innermost(PYSPY_DUMP, "py-spy") == "all_reduce, dist.py:88"
    assert stacks.innermost(FAULTHANDLER_DUMP, "faulthandler") == "step, train.py:123"
    assert stacks.innermost("", "py-spy") is None and stacks.innermost("nothing here\n", "faulthandler") is None


def test_a_pause_in_process_holds_the_watch_until_a_later_resume(tmp_path):
    assert not hangwatch.held_still(str(tmp_path)) and not hangwatch.held_still(None)
    (tmp_path / "a.json").write_text(json.dumps({"id": "a", "type": "pause", "issued_at": 10.0, "payload": {}}))
    (tmp_path / "a.ack.json").write_text(json.dumps({"id": "a"}))
    (tmp_path / "b.json").write_text("{not json")
    assert hangwatch.held_still(str(tmp_path))
    (tmp_path / "c.json").write_text(json.dumps({"id": "c", "type": "resume", "issued_at": 11.0, "payload": {}}))
    assert not hangwatch.held_still(str(tmp_path))


# -- real wrappers on real hung workloads ---------------------------------------------


def no_pyspy_env(tmp_path: Path) -> dict[str, str]:
    """The wrapper's environment with a PATH that has no py-spy: the faulthandler path."""
    bare = tmp_path / "bin"
    bare.mkdir(exist_ok=True)
    return child_env(PATH=f"{bare}:/usr/bin:/bin")


def run_hung(tmp_path: Path, body: str, *options: str, env: dict[str, str] | None = None,
             timeout: float = 60) -> tuple[subprocess.CompletedProcess[str], Path, float]:
    attempt_dir = tmp_path / "attempt"
    script = write_script(tmp_path, "job.py", body)
    started = time.monotonic()
    done = subprocess.run(wrapper_argv(attempt_dir, script, "--heartbeat-interval", "0.5", *options),
                          env=env or no_pyspy_env(tmp_path), cwd=str(REPO), capture_output=True, text=True,
                          timeout=timeout)
    return done, attempt_dir, time.monotonic() - started


def hang_record(attempt_dir: Path) -> dict:
    failure = load(attempt_dir, contract.FAILURE, "failure")
    watch = load(attempt_dir, contract.WATCH, "watch")
    assert watch["stacks"] == failure["stacks"]
    return failure


def test_a_workload_that_stops_itself_is_ended_within_seconds_with_its_stack(tmp_path):
    done, attempt_dir, took = run_hung(tmp_path, """
        import os, signal, time
        import fray

        def pause_myself():
            os.kill(os.getpid(), signal.SIGSTOP)

        pause_myself()
        time.sleep(1000)
        """)
    assert done.returncode == contract.EXIT_WORKLOAD_FAILURE, done.stderr
    failure = hang_record(attempt_dir)
    assert failure["cause"] == "hang_stopped" and "stopped (state T" in failure["message"]
    assert failure["stacks"]["hung_in"] == "pause_myself, job.py:5"
    assert failure["stacks"]["by"] == "faulthandler"
    assert "py-spy is not on PATH" in " ".join(failure["stacks"]["notes"])
    text = (attempt_dir / contract.STACKS).read_text()
    assert "# hung in pause_myself, job.py:5" in text and 'job.py", line 7 in <module>' in text
    assert took < 15, f"the stopped workload took {took:.1f}s to be ended"  # ~3s stopped + 1s sampling + the dump


def test_a_deadlocked_workload_using_no_cpu_is_hung_after_the_idle_timeout_and_names_where(tmp_path):
    done, attempt_dir, _ = run_hung(tmp_path, """
        import threading
        from fray import report

        lock = threading.Lock()
        lock.acquire()
        report.progress(step=1)

        def worker():
            with lock:
                pass

        worker()
        """, "--idle-timeout", "2")
    assert done.returncode == contract.EXIT_WORKLOAD_FAILURE, done.stderr
    failure = hang_record(attempt_dir)
    assert failure["cause"] == "hang_idle" and "--idle-timeout 2s" in failure["message"]
    assert failure["stacks"]["hung_in"] == "worker, job.py:9" and "hung in worker, job.py:9" in failure["message"]


def test_a_workload_blocked_reading_a_fifo_nobody_writes_is_idle_and_hung(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    done, attempt_dir, _ = run_hung(tmp_path, f"""
        import fray

        def read_input():
            with open({str(fifo)!r}) as handle:
                return handle.read()

        read_input()
        """, "--idle-timeout", "2")
    assert done.returncode == contract.EXIT_WORKLOAD_FAILURE, done.stderr
    failure = hang_record(attempt_dir)
    assert failure["cause"] == "hang_idle" and failure["stacks"]["hung_in"] == "read_input, job.py:4"


def test_a_spinning_workload_is_not_idle_but_its_stacks_are_taken_before_the_progress_stall(tmp_path):
    attempt_dir = tmp_path / "attempt"
    script = write_script(tmp_path, "job.py", """
        from fray import report

        def spin():
            while True:
                pass

        report.progress(step=1)
        spin()
        """)
    proc = subprocess.Popen(wrapper_argv(attempt_dir, script, "--heartbeat-interval", "0.5", "--idle-timeout", "1",
                                         "--progress-timeout", "7"),
                            env=no_pyspy_env(tmp_path), cwd=str(REPO), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        # The step stands still: the stacks are taken ~5.5s before the shepherd's 7s would end it.
        watch = wait_until(lambda: (attempt_dir / contract.WATCH).exists()
                           and load(attempt_dir, contract.WATCH, "watch")["stacks"], timeout=20, what="the stacks")
        assert watch["hung_in"].startswith("spin, job.py:")
        assert "progress stall" in (attempt_dir / contract.STACKS).read_text()
        assert proc.poll() is None and not (attempt_dir / contract.FAILURE).exists()  # busy: never taken for idle
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def test_a_fork_storm_that_exits_while_sampled_is_never_killed_and_never_crashes_the_watch(tmp_path):
    done, attempt_dir, _ = run_hung(tmp_path, """
        import os, subprocess, time
        import fray

        end = time.monotonic() + 4
        while time.monotonic() < end:  # hundreds of short children, each gone before or while it is sampled
            children = [subprocess.Popen(["sleep", "0.05"]) for _ in range(50)]
            for child in children:
                child.wait()
        """, "--idle-timeout", "1")
    log = (attempt_dir / contract.WRAPPER_LOG).read_text()
    assert done.returncode == 0, log
    assert "hang watch stopped on an error" not in log and not (attempt_dir / contract.FAILURE).exists()


def test_py_spy_denied_and_no_faulthandler_still_end_the_hang_and_say_what_could_not_be_seen(tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    denied = bare / "py-spy"  # as py-spy answers in a container without ptrace
    denied.write_text("#!/bin/sh\necho 'Error: Operation not permitted (os error 1)' >&2\nexit 1\n")
    denied.chmod(denied.stat().st_mode | stat.S_IXUSR)
    done, attempt_dir, _ = run_hung(tmp_path, """
        import os, signal
        os.kill(os.getpid(), signal.SIGSTOP)
        """, env=child_env(PATH=f"{bare}:/usr/bin:/bin"))
    assert done.returncode == contract.EXIT_WORKLOAD_FAILURE
    failure = hang_record(attempt_dir)
    notes = " ".join(failure["stacks"]["notes"])
    assert failure["cause"] == "hang_stopped" and failure["stacks"]["by"] is None
    assert "Operation not permitted" in notes and "never ran `import fray`" in notes
    assert "no Python stack could be taken" in failure["message"]


def test_a_workload_asked_to_hold_still_is_never_taken_for_idle(tmp_path):
    commands = tmp_path / "commands"
    commands.mkdir()
    (commands / "hold.json").write_text(json.dumps({"id": "hold", "type": "pause", "issued_at": time.time(),
                                                    "actor": {}, "payload": {}}))
    done, attempt_dir, _ = run_hung(tmp_path, """
        import time
        time.sleep(4)  # holding still, as `fray control pause --in-process` asked: no CPU, no progress
        """, "--idle-timeout", "1", "--commands-dir", str(commands))
    assert done.returncode == 0, (attempt_dir / contract.WRAPPER_LOG).read_text()
    assert not (attempt_dir / contract.FAILURE).exists()


def test_import_fray_arms_the_stack_signal_only_in_a_job_and_only_when_the_workload_does_not_use_it(tmp_path):
    probe = """
import os, signal, sys
heard = []
if sys.argv[1] == "taken":
    signal.signal(signal.SIGRTMIN + 7, lambda *a: heard.append(1))
import fray
from fray.wrapper import faultsignal, procs
caught = procs.catches(os.getpid(), faultsignal.stack_signal())
if caught:
    os.kill(os.getpid(), faultsignal.stack_signal())
print(caught, bool(heard))
"""

    def run(mode: str, **env: str) -> list[str]:
        return subprocess.run([sys.executable, "-c", probe, mode], env=child_env(**env), capture_output=True,
                              text=True, check=True, timeout=30).stdout.split()

    assert run("free") == ["False", "False"]  # outside a job: nothing armed
    assert run("free", FRAY_ATTEMPT_DIR=str(tmp_path)) == ["True", "False"]  # armed: the signal dumps, harmlessly
    assert run("taken", FRAY_ATTEMPT_DIR=str(tmp_path)) == ["True", "True"]  # the workload's own handler still runs
    assert list(tmp_path.iterdir()) == []  # the dump file is on the node's disk, not in the attempt folder
