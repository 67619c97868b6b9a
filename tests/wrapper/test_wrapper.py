"""The wrapper as the shepherd's backends run it: `python -m fray.wrapper run ...` in a real
subprocess, real scripts, real files, real signals. Every JSON file it leaves
is checked against schemas/.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from jsonschema import Draft202012Validator

from conftest import wait_until

from fray.wrapper import contract

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = Path(__file__).parents[2] / "schemas"
LINUX = sys.platform.startswith("linux")
# Quotes, spaces, `;`, `$` and a non-ASCII letter: a path must stay one argument everywhere.
HOSTILE = "we'ird \"dir\"; $x é"


def validate(document: Any, schema: str) -> None:
    schema_doc = json.loads((SCHEMAS / f"{schema}.json").read_text())
    errors = sorted(Draft202012Validator(schema_doc).iter_errors(document), key=str)
    assert not errors, f"{schema}.json: " + "; ".join(e.message for e in errors)


def load(folder: Path, name: str, schema: str) -> dict[str, Any]:
    text = (folder / name).read_text(encoding="utf-8")
    assert text.endswith("\n")
    document: dict[str, Any] = json.loads(text)
    validate(document, schema)
    return document


def pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FRAY_") and k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def wrapper_argv(attempt_dir: Path, script: Path, *options: str, script_args: tuple[str, ...] = ()) -> list[str]:
    argv = [sys.executable, "-m", "fray.wrapper", "run", "--run-id", "r-test", "--attempt", "1"]
    argv += ["--attempt-dir", str(attempt_dir), "--script", str(script), *options]
    return argv + (["--", *script_args] if script_args else [])


def write_script(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / name
    script.write_text(textwrap.dedent(body).lstrip("\n"))
    script.chmod(0o600)  # the shepherd's frozen copy is not executable either
    return script


def run_wrapper(attempt_dir: Path, script: Path, *options: str, script_args: tuple[str, ...] = (), timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        wrapper_argv(attempt_dir, script, *options, script_args=script_args),
        env=child_env(),
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def started() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start a wrapper in the background; whatever the test leaves running is killed afterwards."""
    procs: list[subprocess.Popen[str]] = []

    def start(attempt_dir: Path, script: Path, *options: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            wrapper_argv(attempt_dir, script, *options),
            env=child_env(),
            cwd=str(REPO),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.communicate()


# -- success ---------------------------------------------------------------


def test_success_writes_final_and_exit_and_passes_the_environment(tmp_path: Path) -> None:
    root = tmp_path / HOSTILE
    attempt_dir = root / "runs" / "r-test" / "attempts" / "2"
    workdir = root / "work dir"
    workdir.mkdir(parents=True)
    checkpoints = root / "ckpt; rm -rf"
    script = write_script(
        root,
        "train 'it'; now.py",
        """
        import json, os, sys
        from fray.wrapper import report
        print(json.dumps({
            "env": {k: v for k, v in os.environ.items() if k.startswith("FRAY_") or k == "PYTHONUNBUFFERED"},
            "argv": sys.argv[1:],
            "cwd": os.getcwd(),
        }))
        print("to stderr", file=sys.stderr)
        report.final(accuracy=0.9, note="done")
        """,
    )
    argv = wrapper_argv(
        attempt_dir, script,
        "--home", str(root), "--job-name", "my job", "--workdir", str(workdir),
        "--checkpoint-dir", str(checkpoints), "--namespace", "ns-1",
        script_args=("--flag", "a b", "--"),
    )
    argv[argv.index("--attempt") + 1] = "2"
    proc = subprocess.run(argv, env=child_env(), cwd=str(REPO), capture_output=True, text=True, timeout=20)

    assert proc.returncode == 0, proc.stderr
    seen = json.loads((attempt_dir / contract.STDOUT).read_text())
    assert seen["argv"] == ["--flag", "a b", "--"]
    assert seen["cwd"] == str(workdir)
    assert seen["env"] == {
        "FRAY_HOME": str(root),
        "FRAY_RUN_ID": "r-test",
        "FRAY_JOB_ID": "r-test",
        "FRAY_JOB_NAME": "my job",
        "FRAY_ATTEMPT": "2",
        "FRAY_ATTEMPT_DIR": str(attempt_dir),
        "FRAY_NAMESPACE": "ns-1",
        "FRAY_RESUME": "1",
        "FRAY_CHECKPOINT_DIR": str(checkpoints),
        "FRAY_CLUSTER_SPEC": "fray",
        "FRAY_ATTEMPT_TAG": f"r-test:2:{root}",
        "FRAY_TRACKER_VARS": "MLFLOW_RUN_CONTEXT,WANDB_RESUME,WANDB_RUN_ID",  # one tracker run per fray run
        "PYTHONUNBUFFERED": "1",
    }
    assert (attempt_dir / contract.STDERR).read_text() == "to stderr\n"
    assert stat.S_IMODE(checkpoints.stat().st_mode) == 0o700

    final = load(attempt_dir, contract.FINAL, "final")
    assert final["result"] == {"accuracy": 0.9, "note": "done"}
    assert final["run_id"] == "r-test" and final["attempt"] == 2
    started_doc = load(attempt_dir, contract.STARTED, "started")
    assert isinstance(started_doc["workload_pid"], int) and started_doc["workload_pid"] != started_doc["pid"]
    exit_doc = load(attempt_dir, contract.EXIT, "exit")
    assert exit_doc["exit_code"] == 0 and exit_doc["workload_exit_code"] == 0
    assert exit_doc["received_signal"] is None and exit_doc["workload_signal"] is None
    assert exit_doc["started_at"] <= final["completed_at"] <= exit_doc["ended_at"]
    assert not (attempt_dir / contract.FAILURE).exists()
    float((attempt_dir / contract.HEARTBEAT).read_text())
    assert "exit 0" in (attempt_dir / contract.WRAPPER_LOG).read_text()

    assert stat.S_IMODE(attempt_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((attempt_dir.parent).stat().st_mode) == 0o700  # parents too
    for entry in attempt_dir.iterdir():
        assert stat.S_IMODE(entry.stat().st_mode) == 0o600, entry.name
        assert not entry.name.startswith("."), f"temp file left behind: {entry.name}"


def test_attempt_one_is_not_resuming_and_has_no_checkpoint_dir(tmp_path: Path) -> None:
    script = write_script(tmp_path, "env.py", "import os, json; print(json.dumps(dict(os.environ)))")
    proc = subprocess.run(
        wrapper_argv(tmp_path / "a", script),
        env=child_env(FRAY_CHECKPOINT_DIR="/parent/job/ckpt", FRAY_CLUSTER_SPEC="local", PYTHONUNBUFFERED="0"),
        cwd=str(REPO), capture_output=True, text=True, timeout=20,
    )
    assert proc.returncode == 0, proc.stderr
    env = json.loads((tmp_path / "a" / contract.STDOUT).read_text())
    assert env["FRAY_RESUME"] == "0" and env["FRAY_ATTEMPT"] == "1"
    assert env["FRAY_JOB_NAME"] == "r-test"
    assert "FRAY_CHECKPOINT_DIR" not in env  # never a parent job's checkpoints
    assert env["FRAY_CLUSTER_SPEC"] == "local" and env["PYTHONUNBUFFERED"] == "0"  # kept as set
    assert "FRAY_HOME" not in env and "FRAY_NAMESPACE" not in env


# -- failures ----------------------------------------------------------------


def test_failing_workload_exits_50_with_the_tail_of_stderr(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        "fail.sh",
        """
        for i in $(seq 1 30); do echo "err line $i" >&2; done
        echo "out line"
        exit 3
        """,
    )
    attempt_dir = tmp_path / "a"
    proc = run_wrapper(attempt_dir, script)
    assert proc.returncode == contract.EXIT_WORKLOAD_FAILURE
    failure = load(attempt_dir, contract.FAILURE, "failure")
    assert failure["cause"] == "workload_failure"
    assert failure["exit_code"] == 50 and failure["workload_exit_code"] == 3
    assert failure["workload_signal"] is None
    assert failure["stderr_tail"] == [f"err line {i}" for i in range(11, 31)]
    assert "code 3" in failure["message"] and str(attempt_dir / contract.STDERR) in failure["message"]
    exit_doc = load(attempt_dir, contract.EXIT, "exit")
    assert exit_doc["exit_code"] == 50 and exit_doc["workload_exit_code"] == 3
    load(attempt_dir, contract.STARTED, "started")
    assert not (attempt_dir / contract.FINAL).exists()
    assert (attempt_dir / contract.STDOUT).read_text() == "out line\n"


def test_workload_killed_by_a_signal(tmp_path: Path) -> None:
    script = write_script(tmp_path, "die.py", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    attempt_dir = tmp_path / "a"
    proc = run_wrapper(attempt_dir, script)
    assert proc.returncode == 50
    failure = load(attempt_dir, contract.FAILURE, "failure")
    assert failure["cause"] == "workload_signalled"
    assert failure["workload_signal"] == "SIGKILL" and failure["workload_exit_code"] is None
    exit_doc = load(attempt_dir, contract.EXIT, "exit")
    assert exit_doc["workload_signal"] == "SIGKILL" and exit_doc["exit_code"] == 50


def test_exit_0_with_an_invalid_result_still_succeeds(tmp_path: Path) -> None:
    script = write_script(tmp_path, "ok.sh", 'printf "[1, 2" > "$FRAY_ATTEMPT_DIR/result.json"\n')
    attempt_dir = tmp_path / "a"
    assert run_wrapper(attempt_dir, script).returncode == 0
    assert load(attempt_dir, contract.FINAL, "final")["result"] is None
    assert "ignoring" in (attempt_dir / contract.WRAPPER_LOG).read_text()


@pytest.mark.parametrize("body, code, blocked", [("exit 0\n", 0, contract.FINAL), ("exit 4\n", 50, contract.FAILURE)])
def test_files_that_cannot_be_written_do_not_change_the_exit_code(tmp_path: Path, body: str, code: int, blocked: str) -> None:
    attempt_dir = tmp_path / "a"
    for name in (blocked, contract.EXIT, contract.STARTED):
        (attempt_dir / name).mkdir(parents=True)  # os.replace onto a folder fails, like a full disk
    proc = run_wrapper(attempt_dir, write_script(tmp_path, "s.sh", body), timeout=20)
    assert proc.returncode == code
    log = (attempt_dir / contract.WRAPPER_LOG).read_text()
    assert log.count("cannot write") == 3 and f"exit {code}" in log
    assert "cannot write" in proc.stderr
    assert not [p for p in attempt_dir.iterdir() if p.name.startswith(".")], "temp files left behind"


@pytest.mark.parametrize(
    "name, body, why, code",
    [
        ("missing.sh", None, "does not exist", 50),
        # An interpreter this node lacks is the node's fault (exit 42, as a failed probe): another may have it.
        ("interp.sh", "#!/nonexistent/interpreter\necho hi\n", "'/nonexistent/interpreter' does not exist on this node", 42),
        ("envinterp.sh", "#!/usr/bin/env no-such-interpreter-fray\necho hi\n", "'no-such-interpreter-fray' is not on this node's PATH", 42),
    ],
)
def test_a_script_that_cannot_be_launched(tmp_path: Path, name: str, body: str | None, why: str, code: int) -> None:
    script = tmp_path / name if body is None else write_script(tmp_path, name, body)
    attempt_dir = tmp_path / "a"
    proc = run_wrapper(attempt_dir, script)
    assert proc.returncode == code
    failure = load(attempt_dir, contract.FAILURE, "failure")
    assert failure["cause"] == "launch_failed" and why in failure["message"]
    assert failure["workload_exit_code"] is None
    assert load(attempt_dir, contract.STARTED, "started")["workload_pid"] is None
    assert load(attempt_dir, contract.EXIT, "exit")["exit_code"] == code
    assert (attempt_dir / contract.HEARTBEAT).exists()


# -- how the script is launched ----------------------------------------------

SHOW_PY = 'import sys; print("python", sys.argv[1:])\n'
SHOW_BASH = 'echo "bash${BASH_VERSION:+ yes}" "$@"\n'


@pytest.mark.parametrize(
    "name, body, expected",
    [
        ("plain.py", SHOW_PY, "python ['x y', '-v']"),
        ("plain.sh", SHOW_BASH, "bash yes x y -v"),
        ("no-extension", SHOW_BASH, "bash yes x y -v"),
        ("shebang.txt", f"#!{sys.executable}\n" + SHOW_PY, "python ['x y', '-v']"),
        ("env.sh", "#!/usr/bin/env python3\n" + SHOW_PY, "python ['x y', '-v']"),
        ("envs.py", "#!/usr/bin/env -S bash -e\n" + SHOW_BASH, "bash yes x y -v"),
        ("sh-shebang.py", "#!/bin/sh\necho sh \"$@\"\n", "sh x y -v"),
    ],
)
def test_launch_by_shebang_or_extension(tmp_path: Path, name: str, body: str, expected: str) -> None:
    script = write_script(tmp_path / "my scripts;", name, body)
    attempt_dir = tmp_path / "a"
    proc = run_wrapper(attempt_dir, script, script_args=("x y", "-v"))
    assert proc.returncode == 0, (attempt_dir / contract.STDERR).read_text()
    assert (attempt_dir / contract.STDOUT).read_text().strip() == expected


# -- signals -----------------------------------------------------------------

TRAPS_TERM = """
import os, pathlib, signal, sys, time
folder = pathlib.Path(os.environ["FRAY_ATTEMPT_DIR"])
def on_signal(signum, frame):
    (folder / "marker").write_text(signal.Signals(signum).name)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)
signal.signal(signal.SIGUSR1, on_signal)
(folder / "ready").write_text("1")
while True:
    time.sleep(0.05)
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_is_forwarded_and_the_attempt_ends_terminated(tmp_path: Path, started: Any, signum: int) -> None:
    attempt_dir = tmp_path / HOSTILE
    script = write_script(tmp_path, "trap.py", TRAPS_TERM)
    proc = started(attempt_dir, script)
    wait_until(lambda: (attempt_dir / "ready").exists(), what="the workload to be ready")
    proc.send_signal(signum)
    assert proc.wait(timeout=10) == 128 + signum
    name = signal.Signals(signum).name
    assert (attempt_dir / "marker").read_text() == name
    failure = load(attempt_dir, contract.FAILURE, "failure")
    assert failure["cause"] == "terminated" and failure["exit_code"] == 128 + signum
    assert failure["workload_exit_code"] == 0  # it exited 0, but it was told to stop: not a success
    exit_doc = load(attempt_dir, contract.EXIT, "exit")
    assert exit_doc["received_signal"] == name and exit_doc["exit_code"] == 128 + signum
    assert not (attempt_dir / contract.FINAL).exists()


def test_sigusr1_is_only_forwarded(tmp_path: Path, started: Any) -> None:
    attempt_dir = tmp_path / "a"
    script = write_script(tmp_path, "trap.py", TRAPS_TERM)
    proc = started(attempt_dir, script)
    wait_until(lambda: (attempt_dir / "ready").exists(), what="the workload to be ready")
    proc.send_signal(signal.SIGUSR1)
    assert proc.wait(timeout=10) == 0
    assert (attempt_dir / "marker").read_text() == "SIGUSR1"
    assert load(attempt_dir, contract.EXIT, "exit")["received_signal"] is None
    load(attempt_dir, contract.FINAL, "final")


def test_a_workload_ignoring_sigterm_is_killed_after_the_grace(tmp_path: Path, started: Any) -> None:
    attempt_dir = tmp_path / "a"
    script = write_script(
        tmp_path,
        "stubborn.py",
        """
        import os, pathlib, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        pathlib.Path(os.environ["FRAY_ATTEMPT_DIR"], "ready").write_text("1")
        while True:
            time.sleep(0.05)
        """,
    )
    proc = started(attempt_dir, script, "--stop-grace", "0.5")
    wait_until(lambda: (attempt_dir / "ready").exists(), what="the workload to be ready")
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 143
    assert time.monotonic() - sent >= 0.5
    exit_doc = load(attempt_dir, contract.EXIT, "exit")
    assert exit_doc["workload_signal"] == "SIGKILL" and exit_doc["received_signal"] == "SIGTERM"
    failure = load(attempt_dir, contract.FAILURE, "failure")
    assert failure["cause"] == "terminated" and failure["workload_signal"] == "SIGKILL"


# -- no orphans ----------------------------------------------------------------


@pytest.mark.skipif(not LINUX, reason="descendants that leave the process group are found through /proc")
def test_nothing_the_workload_started_outlives_the_wrapper(tmp_path: Path) -> None:
    attempt_dir = tmp_path / HOSTILE
    script = write_script(
        tmp_path,
        "spawn.sh",
        """
        cd "$FRAY_ATTEMPT_DIR"
        sleep 1000 &
        echo $! > group.pid
        setsid bash -c 'echo $$ > session.pid; exec sleep 1000' &
        (setsid bash -c 'echo $$ > daemon.pid; exec sleep 1000' &)
        bash -c 'trap "" TERM; echo $$ > deaf.pid; exec sleep 1000' &
        for f in session.pid daemon.pid deaf.pid; do
            while [ ! -s "$f" ]; do sleep 0.01; done
        done
        echo spawned
        """,
    )
    names = ["group.pid", "session.pid", "daemon.pid", "deaf.pid"]
    pids: list[int] = []
    try:
        proc = run_wrapper(attempt_dir, script, "--stop-grace", "0.3")
        pids = [int((attempt_dir / name).read_text()) for name in names]
        assert proc.returncode == 0, proc.stderr
        for name, pid in zip(names, pids):
            wait_until(lambda: pid_gone(pid), timeout=5, what=f"{name} ({pid}) to be gone")
        load(attempt_dir, contract.FINAL, "final")
        load(attempt_dir, contract.EXIT, "exit")
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.skipif(not LINUX, reason="descendants that leave the process group are found through /proc")
def test_a_terminated_attempt_leaves_no_descendants(tmp_path: Path, started: Any) -> None:
    attempt_dir = tmp_path / "a"
    script = write_script(
        tmp_path,
        "spawn.sh",
        """
        cd "$FRAY_ATTEMPT_DIR"
        setsid bash -c 'echo $$ > session.pid; exec sleep 1000' &
        while [ ! -s session.pid ]; do sleep 0.01; done
        echo 1 > ready
        while true; do sleep 0.05; done
        """,
    )
    pid = 0
    try:
        proc = started(attempt_dir, script)
        wait_until(lambda: (attempt_dir / "ready").exists(), what="the workload to be ready")
        pid = int((attempt_dir / "session.pid").read_text())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 143
        wait_until(lambda: pid_gone(pid), timeout=5, what="the setsid grandchild to be gone")
        assert load(attempt_dir, contract.FAILURE, "failure")["cause"] == "terminated"
    finally:
        if pid and not pid_gone(pid):
            os.kill(pid, signal.SIGKILL)


# -- heartbeat -----------------------------------------------------------------


def test_heartbeat_appears_at_once_and_is_refreshed(tmp_path: Path, started: Any) -> None:
    attempt_dir = tmp_path / "a"
    script = write_script(
        tmp_path,
        "wait.py",
        """
        import os, time
        stop = os.path.join(os.environ["FRAY_ATTEMPT_DIR"], "stop")
        while not os.path.exists(stop):
            time.sleep(0.02)
        """,
    )
    before = time.time()
    proc = started(attempt_dir, script, "--heartbeat-interval", "0.2")
    beat = attempt_dir / contract.HEARTBEAT
    first = wait_until(lambda: beat.exists() and beat.read_text(), timeout=5, what="the first heartbeat")
    assert first.endswith("\n") and before - 1 <= float(first) <= time.time() + 1
    second = wait_until(lambda: beat.read_text() != first and beat.read_text(), timeout=5, what="a new heartbeat")
    assert float(second) > float(first)
    assert stat.S_IMODE(beat.stat().st_mode) == 0o600
    (attempt_dir / "stop").write_text("")
    assert proc.wait(timeout=10) == 0


# -- the command line ----------------------------------------------------------


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a: a[: a.index("--run-id")] + a[a.index("--run-id") + 2 :], "--run-id"),
        (lambda a: [*a[: a.index("--attempt") + 1], "0", *a[a.index("--attempt") + 2 :]], "--attempt"),
        (lambda a: [*a, "--heartbeat-interval", "0"], "--heartbeat-interval"),
        (lambda a: [*a, "--stop-grace", "soon"], "--stop-grace"),
        (lambda a: [*a, "--no-such-option"], "--no-such-option"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(tmp_path: Path, change: Callable[[list[str]], list[str]], message: str) -> None:
    argv = change(wrapper_argv(tmp_path / "a", tmp_path / "s.sh"))
    proc = subprocess.run(argv, env=child_env(), cwd=str(REPO), capture_output=True, text=True, timeout=20)
    assert proc.returncode == contract.EXIT_USAGE
    assert message in proc.stderr
    assert not (tmp_path / "a").exists()


def test_wrapper_imports_only_the_standard_library(tmp_path: Path) -> None:
    # `fray.wrapper` as a compute node sees it: the `fray` package's own
    # __init__ and version (which must stay standard-library-only too) and the wrapper folder.
    package = tmp_path / "fray"
    package.mkdir()
    shutil.copy(REPO / "shepherd" / "__init__.py", package / "__init__.py")
    shutil.copy(REPO / "shepherd" / "version.py", package / "version.py")
    (package / "wrapper").symlink_to(REPO / "wrapper")
    code = textwrap.dedent(
        """
        import importlib, pkgutil, sys
        import fray, fray.wrapper
        for module in pkgutil.walk_packages(fray.wrapper.__path__, "fray.wrapper."):
            if not module.name.endswith("__main__"):
                importlib.import_module(module.name)
        from fray import report
        foreign = sorted(
            name for name in sys.modules
            if name.split(".")[0] not in sys.stdlib_module_names
            and name.split(".")[0] != "fray"
            and name != "__main__"
        )
        print(",".join(foreign))
        """
    )
    # -S -E: no site-packages, no .pth files, no PYTHONPATH: nothing foreign is
    # preloaded, and a foreign import would fail outright.
    proc = subprocess.run(
        [sys.executable, "-E", "-S", "-c", code], cwd=str(tmp_path), capture_output=True, text=True, timeout=20,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "", f"wrapper imports outside the standard library: {proc.stdout}"


def test_a_stderr_already_sent_to_wrapper_log_gets_each_line_once(tmp_path: Path) -> None:
    # What the local backend does: the wrapper's own stdout/stderr go to wrapper.log.
    attempt_dir = tmp_path / "a"
    attempt_dir.mkdir()
    script = write_script(tmp_path, "ok.sh", "echo hi\n")
    with open(attempt_dir / contract.WRAPPER_LOG, "ab") as log:
        proc = subprocess.run(
            wrapper_argv(attempt_dir, script), env=child_env(), cwd=str(REPO), stdout=log, stderr=log, timeout=20,
        )
    assert proc.returncode == 0
    assert (attempt_dir / contract.WRAPPER_LOG).read_text().count("exit 0") == 1
