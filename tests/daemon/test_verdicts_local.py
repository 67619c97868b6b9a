"""Verdicts a person reads, with a real daemon and real wrappers on this machine: backoff only for loops, a
kill described by what killed it, waits that tell each change once, and the small errors that must help.

The OOM case runs the daemon, and so every wrapper and workload it starts, in a memory cgroup of its own with a
small limit, so the kernel's OOM killer itself does the killing (cgroup v1's memory controller, or v2's).
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from conftest import run_fray, schema_validate, start_daemon, stop_daemon, wait_until
from fray.state import runs
from fray.state.layout import Home

pytestmark = pytest.mark.slow


def submit(home: Home, script: Path, **overrides) -> str:
    return runs.create_run(home, runs.SubmitOptions(script=script, overrides=overrides,
                                                    workdir=str(script.parent))).run_id


def meta_of(home: Home, run_id: str) -> dict:
    return json.loads(home.run(run_id).meta.read_text())


def ended(home: Home, run_id: str) -> dict | None:
    meta = meta_of(home, run_id)
    return meta if meta["phase"] == "ended" else None


def events(home: Home, run_id: str) -> list[dict]:
    return [json.loads(line) for line in home.run(run_id).events.read_text().splitlines()]


def write(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(body)
    path.chmod(0o755)
    return path


# Steps 1..8 in every attempt, each past the last one's; attempt 1 and 2 crash after theirs.
PROGRESSING = f'''#!{sys.executable}
#FRAY --name progressing --backoff-base 30 --heartbeat-interval 0.5 --max-retries 5
import os, sys, time
from fray import report
attempt = int(os.environ["FRAY_ATTEMPT"])
for step in range(1, 9):
    time.sleep(0.05)
    report.progress(step=attempt * 100 + step)
if attempt < 3:
    sys.exit(f"crash after step {{attempt * 100 + 8}}")
report.final()
'''
LOOPING = f'''#!{sys.executable}
#FRAY --name looping --backoff-base 30 --heartbeat-interval 0.5
import sys
sys.exit("no such file: data.csv")
'''


def test_an_attempt_that_made_progress_restarts_at_once_and_a_loop_backs_off(home, daemon, tmp_path):
    run_id = submit(home, write(tmp_path, "progressing.py", PROGRESSING))
    meta = wait_until(lambda: ended(home, run_id), timeout=40, what="three attempts, two crashes, no backoff")
    assert meta["end"]["status"] == "completed_success"
    first, second, third = meta["attempts"]
    assert (first["step"], second["step"]) == (108, 208)
    # --backoff-base 30 would hold each retry 15-30 s; an attempt past the last one's step waits for nothing.
    assert second["submitted_at"] - first["ended_at"] < 5 and third["submitted_at"] - second["ended_at"] < 5
    backoffs = [e for e in events(home, run_id) if e["kind"] == "backoff"]
    assert [e["data"]["delay_sec"] for e in backoffs] == [0.0, 0.0]
    assert "made progress (its step reached 208 (from 108))" in backoffs[1]["reason"]
    status = json.loads(run_fray("status", run_id, "--json", home=home.root, check=True).stdout)
    schema_validate("cli-status", status)
    assert status["goodput"]["lost_sec"].get("backoff", 0.0) < 5, status["goodput"]
    looping = submit(home, write(tmp_path, "looping.py", LOOPING))
    meta = wait_until(lambda: (m if (m := meta_of(home, looping))["next_attempt_at"] else None), timeout=30,
                      what="the loop's first backoff")
    assert meta["next_attempt_at"] - meta["attempts"][0]["ended_at"] >= 15, "no progress: it backs off"
    text = run_fray("status", looping, home=home.root, check=True).stdout
    assert re.search(r"backoff: +none after an attempt that made progress", text) and "30s doubling to 5m" in text
    run_fray("control", "stop", looping, home=home.root, check=True)


KILLED = f'''#!{sys.executable}
#FRAY --name killed --max-retries 0 --heartbeat-interval 0.5
import os, signal, sys, time
print("UserWarning: TypedStorage is deprecated", file=sys.stderr)
print("  super().__init__(", file=sys.stderr, flush=True)
time.sleep(0.5)
os.kill(os.getpid(), signal.SIGKILL)
'''


def test_a_killed_workload_is_described_by_what_killed_it_not_by_its_stderr(home, daemon, tmp_path):
    run_id = submit(home, write(tmp_path, "killed.py", KILLED))
    meta = wait_until(lambda: ended(home, run_id), timeout=30, what="the run to end")
    detail = meta["attempts"][0]["detail"]
    assert detail.startswith("killed by SIGKILL"), detail
    assert "super().__init__(" not in detail and "TypedStorage" not in detail, "stderr is not the cause"
    failure = json.loads(home.run(run_id).attempt(1).failure.read_text())
    schema_validate("failure", failure)
    assert failure["killed_by"]["signal"] == "SIGKILL"
    assert failure["stderr_tail"][-1] == "  super().__init__(", "its stderr is kept, as stderr"
    if failure["killed_by"]["oom_killer"] is False:  # a memory cgroup counter was readable: it said no
        assert "not by the OOM killer" in detail
    else:
        assert failure["killed_by"]["oom_killer"] is None and "cannot be told here" in detail


def memory_cgroup(limit_bytes: int) -> Path:
    """A new memory cgroup under this process's own, limited to `limit_bytes` (v1's controller, else v2's)."""
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            for base in (Path("/sys/fs/cgroup/memory") / path.lstrip("/"), Path("/sys/fs/cgroup/memory")):
                if (base / "memory.limit_in_bytes").exists():
                    group = base / f"fray-oom-test-{os.getpid()}"
                    group.mkdir(exist_ok=True)
                    (group / "memory.limit_in_bytes").write_text(str(limit_bytes))
                    return group
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            base = Path("/sys/fs/cgroup") / path.lstrip("/")
            if "memory" in (base / "cgroup.controllers").read_text().split():
                group = base / f"fray-oom-test-{os.getpid()}"
                group.mkdir(exist_ok=True)
                (group / "memory.max").write_text(str(limit_bytes))
                return group
    raise AssertionError(f"no memory cgroup to make here ({lines}): this test needs a writable memory controller")


@pytest.fixture
def oom_daemon(home: Home) -> Iterator[subprocess.Popen[bytes]]:
    """A real daemon in a memory cgroup limited to 400 MB: what it starts is too, and the kernel enforces it."""
    group = memory_cgroup(400 * 1024 * 1024)
    proc = start_daemon(home, wait=False)
    (group / "cgroup.procs").write_text(str(proc.pid))
    wait_until(lambda: home.daemon_lease.exists(), what="the daemon's lease")
    try:
        yield proc
    finally:
        stop_daemon(proc)
        wait_until(lambda: not (group / "cgroup.procs").read_text().strip(), timeout=30,
                   what="every process of the cgroup to be gone")
        group.rmdir()


HUNGRY = f'''#!{sys.executable}
#FRAY --name hungry --max-retries 0 --heartbeat-interval 0.5
import sys
print("allocating", file=sys.stderr, flush=True)
chunks = []
while True:
    chunks.append(bytearray(50 * 1024 * 1024))  # 50 MB at a time, touched, until the kernel says no
'''


def test_the_oom_killer_is_named_when_the_kernel_counted_the_kill(home, oom_daemon, tmp_path):
    run_id = submit(home, write(tmp_path, "hungry.py", HUNGRY))
    meta = wait_until(lambda: ended(home, run_id), timeout=60, what="the OOM killer to end the run")
    failure = json.loads(home.run(run_id).attempt(1).failure.read_text())
    schema_validate("failure", failure)
    assert failure["killed_by"]["oom_killer"] is True, failure
    assert "went from 0 to" in failure["killed_by"]["how"]
    detail = meta["attempts"][0]["detail"]
    assert detail.startswith("killed by SIGKILL from the kernel's OOM killer") and "--mem" in detail, detail


FLAKY = f'''#!{sys.executable}
#FRAY --backoff-base 1 --backoff-max 1 --heartbeat-interval 0.5 --max-retries 1
import os, sys, time
time.sleep(0.3)
if os.environ["FRAY_ATTEMPT"] == "1":
    while not os.path.exists(os.environ["GO_FILE"]):  # fail once the test's wait is watching
        time.sleep(0.05)
    sys.exit("first attempt fails")
'''


def read_terminal(master: int, proc: subprocess.Popen[bytes], timeout: float, until: bytes | None = None) -> str:
    """All a command wrote to its terminal until it exited, or until it wrote `until` (stdout and stderr are
    the same screen)."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not (until and until in b"".join(chunks)):
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    return b"".join(chunks).decode(errors="replace")


def test_a_wait_on_a_terminal_tells_each_change_once_and_a_backoff_in_one_line(home, daemon, tmp_path):
    script = write(tmp_path, "flaky.py", FLAKY)
    go = tmp_path / "go"
    sweep = json.loads(run_fray("submit", str(script), "--sweep", "x=1,2", "--env", f"GO_FILE={go}", "--json",
                                home=home.root, check=True).stdout)
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "fray.cli.main", "wait", "--group", sweep["group"]],
                            stdin=slave, stdout=slave, stderr=slave, env={**os.environ, "FRAY_HOME": str(home.root)})
    os.close(slave)
    try:
        screen = read_terminal(master, proc, timeout=60, until=b"running")  # the wait has seen both start
        while screen.count("running") < 2 and proc.poll() is None:
            screen += read_terminal(master, proc, timeout=30, until=b"running")
        go.touch()
        screen += read_terminal(master, proc, timeout=60)
    finally:
        os.close(master)
    assert proc.wait(timeout=10) == 0, screen
    # What stays on the screen: each line as its last rewrite left it (the terminal turns \n into \r\n).
    plain = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", screen.replace("\r\n", "\n"))
    kept = [line.rsplit("\r", 1)[-1].strip() for line in plain.split("\n")]
    kept = [line for line in kept if line]
    assert len(kept) == len(set(kept)), f"a line printed twice:\n{screen}"
    assert kept[-1] == "2/2 ended: 2 ✓ completed_success", kept
    restarts = [line for line in kept if "attempt 1 ended" in line]
    assert len(restarts) == 2 and all("backing off: next attempt at" in line or "submitting" in line
                                      for line in restarts), kept
    assert not any(": pending: attempt 1 ended" in line for line in kept), "a backoff is one line, not two"
    assert "· waiting " in screen, "the live line below says how long the wait has lasted"


def test_small_errors_that_must_help(home, daemon, tmp_path):
    script = write(tmp_path, "slow.py", f"#!{sys.executable}\n#FRAY --name twin\nimport time\ntime.sleep(30)\n")
    first, second = submit(home, script), submit(home, script)
    proc = run_fray("status", "twin", "--json", home=home.root)
    error = json.loads(proc.stdout)
    schema_validate("cli-error", error)
    assert proc.returncode == 2 and error["error"]["code"] == "run_ambiguous"
    assert set(error["error"]["candidates"]) == {first, second}
    # A setting config-set does not know is told the nearest one it accepts, never one it would refuse.
    proc = run_fray("control", "config-set", first, "bogus=1", home=home.root)
    assert proc.returncode == 2 and "gpus" not in proc.stderr.split("(the settings")[0], proc.stderr
    assert "did you mean max-retries?" in run_fray("control", "config-set", first, "max-retry=2",
                                                    home=home.root).stderr
    for run_id in (first, second):
        run_fray("control", "stop", run_id, home=home.root, check=True)
    # A run that ended before any attempt: `fray logs --json` says why there are no lines.
    waiting = write(tmp_path, "after.py", f"#!{sys.executable}\n#FRAY --name later --after {first}\nprint(1)\n")
    later = submit(home, waiting)  # what it waits for was stopped: it ends failed_dependency, never started
    wait_until(lambda: ended(home, later), timeout=30, what="its end")
    logs = json.loads(run_fray("logs", later, "--json", home=home.root, check=True).stdout)
    schema_validate("cli-logs", logs)
    assert logs["attempt"] is None and logs["lines"] == [] and "has no attempt" in logs["note"]
    unreachable = run_fray("--remote", "nosuchhost.invalid", "list", "--json", home=home.root)
    error = json.loads(unreachable.stdout)
    schema_validate("cli-error", error)
    assert unreachable.returncode == 255 and error["error"]["hint"] and "ssh" in error["error"]["hint"]
