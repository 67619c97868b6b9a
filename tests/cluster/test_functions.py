"""Functions as runs (`fray.submit`, futures, `fray.get_run`) and checkpointable callables, on the local backend.

A real daemon, real wrappers and real files: each call is an ordinary run that
`fray list` shows. Waiting is `future.result(timeout)` or `wait_until`, never a sleep.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import CancelledError
from pathlib import Path

import pytest

import fray
from conftest import REPO, run_fray, schema_validate, wait_until
from docs_pages import block_under
from fray import Call, JobFailed, RemoteTraceback, ResourceConfig, report
from fray.cluster import payloads, resuming
from fray.cluster.api import ClusterError
from fray.cluster.futures import resources_of
from fray.errors import StateError, UsageError
from fray.state import store
from fray.state.layout import Home

# The jobs cannot import this test module: its functions travel by value, as a notebook's do.
import cloudpickle  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = pytest.mark.slow


class TokenizerError(Exception):
    pass


def tokenize(text: str, lower: bool = False) -> list[str]:
    print(f"tokenizing {text!r}", flush=True)
    words = text.split()
    return [w.lower() for w in words] if lower else words


def fails_in_the_job(word: str) -> None:
    raise TokenizerError(f"cannot tokenize {word!r}")


def fails_on_the_first_attempt() -> int:
    attempt = int(os.environ["FRAY_ATTEMPT"])
    if attempt == 1:
        raise RuntimeError("first attempt fails")
    return attempt


def waits_for(path: str) -> str:
    while not os.path.exists(path):
        time.sleep(0.05)  # the job's own pace, not the test's synchronisation
    return Path(path).read_text()


def meta_of(home: Home, run_id: str) -> dict:
    return json.loads(home.run(run_id).meta.read_text())


def first_attempt_state(home: Home, run_id: str) -> str | None:
    attempts = meta_of(home, run_id)["attempts"]
    return attempts[0]["state"] if attempts else None


def test_a_function_round_trips_as_an_ordinary_run(home, daemon):
    future = fray.submit(tokenize, "Hello Fray World", lower=True, resources={"cpus": 1, "mem": "256M"})
    assert future.result(timeout=60) == ["hello", "fray", "world"]
    assert future.done() and future.exception() is None
    assert "tokenizing 'Hello Fray World'" in future.logs()
    meta = meta_of(home, future.run_id)
    assert meta["name"] == "tokenize" and meta["spec"]["cpus"] == 1 and meta["spec"]["mem_mb"] == 256
    assert meta["end"]["status"] == "completed_success"
    record = json.loads(home.run(future.run_id).attempt(1).call_record.read_text())
    schema_validate("call-result", record)
    listing = json.loads(run_fray("list", "--json", home=home.root, check=True).stdout)
    schema_validate("cli-list", listing)
    assert [(r["run_id"], r["status"]) for r in listing["runs"]] == [(future.run_id, "completed_success")]
    assert future.cancel() is False  # it has ended: nothing to stop


def test_an_exception_comes_back_as_itself_with_the_remote_traceback(home, daemon):
    future = fray.submit(fails_in_the_job, "naïve", name="tokenize-bad")
    with pytest.raises(TokenizerError, match="cannot tokenize 'naïve'") as caught:
        future.result(timeout=60)
    cause = caught.value.__cause__
    assert isinstance(cause, RemoteTraceback)
    raise_line = fails_in_the_job.__code__.co_firstlineno + 1  # by value, so its file shows as <dynamic-code>
    assert f"line {raise_line}, in fails_in_the_job" in cause.text
    assert "entry.py" not in cause.text  # fray's own frames are left out
    assert isinstance(future.exception(), TokenizerError)
    record = json.loads(home.run(future.run_id).attempt(1).call_record.read_text())
    schema_validate("call-result", record)
    assert record["outcome"] == "raised" and record["value_file"] == "call-result.pkl"
    status = json.loads(run_fray("status", "tokenize-bad", "--json", home=home.root).stdout)
    assert status["run"]["status"] == "failed" and "TokenizerError" in status["run"]["reason"]


def returns_a_lock() -> object:
    return threading.Lock()


def square_after_gate(x: int, gate: str) -> int:
    """Blocks until `gate` exists: lets the test see how many points run at once."""
    while not os.path.exists(gate):
        time.sleep(0.02)
    return x * x


def test_map_runs_one_sweep_with_at_most_max_parallel_points_at_once(home, daemon, tmp_path):
    import functools

    gate = tmp_path / "gate"
    futures = fray.map(functools.partial(square_after_gate, gate=str(gate)), range(5), name="squares",
                       max_parallel=2, chunk=1)
    assert [f.run_id for f in futures] == sorted(f.run_id for f in futures)  # in index order
    running = lambda: sum(first_attempt_state(home, f.run_id) == "running" for f in futures)  # noqa: E731
    wait_until(lambda: running() == 2, timeout=60, what="two points to run")
    listed = json.loads(run_fray("list", "--json", home=home.root, check=True).stdout)
    groups = [r for r in listed["runs"] if r.get("group")]
    assert len(listed["runs"]) == 1 and groups, listed  # folded: one row for the sweep
    assert running() == 2  # the other three wait for --max-parallel
    gate.touch()
    assert [f.result(timeout=120) for f in futures] == [0, 1, 4, 9, 16]
    members = json.loads(run_fray("list", "--json", "--group", "squares", home=home.root, check=True).stdout)["runs"]
    assert sorted(r["run_id"] for r in members) == sorted(f.run_id for f in futures)
    assert fray.map(square_after_gate, []) == []
    with pytest.raises(UsageError, match="--max-parallel 0"):
        fray.map(square_after_gate, [1], max_parallel=0)


def test_map_with_no_daemon_serving_starts_one_as_it_writes_the_runs(home):
    from fray.daemon import lease

    assert not lease.is_locked(home)
    try:
        futures = fray.map(tokenize, ["a b", "c"], backend="local", home=home.root)
        assert lease.is_locked(home)  # started, and waited for, before map returned
        assert [f.result(timeout=60) for f in futures] == [["a", "b"], ["c"]]
    finally:
        lease.stop(home)


def test_a_return_value_that_cannot_be_pickled_fails_the_call_and_says_why(home, daemon):
    future = fray.submit(returns_a_lock)
    with pytest.raises(JobFailed, match="return value could not be pickled: lock: TypeError"):
        future.result(timeout=60)
    record = json.loads(home.run(future.run_id).attempt(1).call_record.read_text())
    schema_validate("call-result", record)
    assert record["outcome"] == "raised" and record["value_file"] is None


def test_a_failing_call_is_retried_under_max_retries(home, daemon):
    future = fray.submit(fails_on_the_first_attempt, max_retries=1)
    assert future.result(timeout=60) == 2
    assert len(meta_of(home, future.run_id)["attempts"]) == 2
    assert "first attempt fails" in future.logs(stderr=True)


def test_a_new_process_reattaches_by_run_id_and_the_run_survives_a_daemon_restart(home, daemon, tmp_path):
    gate = tmp_path / "gate"
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(f"""
        import os, time
        from pathlib import Path
        import fray

        def waits_for(path):
            while not os.path.exists(path):
                time.sleep(0.05)
            return Path(path).read_text()

        print(fray.submit(waits_for, {str(gate)!r}, name="gated").run_id)
    """))
    proc = subprocess.run([sys.executable, str(driver)], capture_output=True, text=True, timeout=60, check=True)
    run_id = proc.stdout.strip()
    # Running, not merely recorded: killed before it submits, a daemon leaves nothing to adopt, and the next
    # one resubmits the attempt once it has made sure of that.
    wait_until(lambda: first_attempt_state(home, run_id) == "running", timeout=30, what="the call to run")
    daemon.kill()  # crash-only: the attempt goes on without it
    daemon.wait(timeout=10)
    future = fray.get_run("gated")  # by name, from this process
    assert future.run_id == run_id and not future.done()
    gate.write_text("opened")
    assert future.result(timeout=60) == "opened"  # waiting started a new daemon, which adopted the attempt
    meta = meta_of(home, run_id)
    assert len(meta["attempts"]) == 1 and meta["end"]["status"] == "completed_success", meta["attempts"]
    assert json.loads(home.daemon_lease.read_text())["pid"] != daemon.pid


def test_cancel_stops_the_run_and_result_says_so(home, daemon, tmp_path):
    future = fray.submit(waits_for, str(tmp_path / "never"))
    wait_until(lambda: first_attempt_state(home, future.run_id) == "running", timeout=30, what="the call to run")
    with pytest.raises(TimeoutError):
        future.result(timeout=0.3)
    assert future.cancel() is True
    with pytest.raises(CancelledError, match="stopped"):
        future.result(timeout=60)
    assert meta_of(home, future.run_id)["end"]["status"] == "stopped_manual"
    assert future.cancel() is False
    audit = [json.loads(line) for line in home.audit.read_text().splitlines()]
    assert any(entry.get("action") == "control.stop" for entry in audit), audit


def test_a_result_in_a_folder_others_can_enter_is_not_unpickled(home, daemon):
    future = fray.submit(tokenize, "a b")
    assert future.result(timeout=60) == ["a", "b"]
    attempt_dir = home.run(future.run_id).attempt(1).dir
    for folder in _folders(home.root, attempt_dir):  # fray made every one of them private
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    os.chmod(attempt_dir, 0o755)
    with pytest.raises(StateError, match=re.escape(f"chmod 700 {attempt_dir}")):
        future.result(timeout=10)
    os.chmod(attempt_dir, 0o700)
    os.chmod(home.root, 0o750)
    try:
        with pytest.raises(StateError, match="others may enter it"):
            fray.get_run(future.run_id).result(timeout=10)
    finally:
        os.chmod(home.root, 0o700)
    assert future.result(timeout=10) == ["a", "b"]


def _folders(root: Path, leaf: Path) -> list[Path]:
    """`leaf` and every folder above it up to `root`."""
    return [leaf, *[p for p in leaf.parents if root in p.parents or p == root]]


def test_resources_take_a_resource_config_or_a_dict_and_bad_ones_are_named():
    assert resources_of(None) == (ResourceConfig(), None)
    assert resources_of(ResourceConfig(cpus=2)) == (ResourceConfig(cpus=2), None)
    assert resources_of({"cpus": 4, "gpus": 1, "mem": "16G", "time": "1h30m"}) == (
        ResourceConfig(cpus=4, gpus=1, mem_mb=16384), 5400.0)
    assert resources_of({"mem": 512, "time": 90}) == (ResourceConfig(mem_mb=512), 90)
    with pytest.raises(UsageError, match="no key 'cpu'; did you mean 'cpus'"):
        resources_of({"cpu": 2})
    with pytest.raises(UsageError, match="resources: expected"):
        resources_of({"mem": "lots"})
    with pytest.raises(UsageError, match="time must be a positive"):
        resources_of({"time": -5})
    with pytest.raises(UsageError, match="cpus must be a whole number"):
        resources_of({"cpus": 1.5})


def test_bad_submissions_are_refused_and_write_nothing(home):
    with pytest.raises(ClusterError, match="enforced by Slurm only.*backend='slurm'"):
        fray.submit(tokenize, "x", resources={"time": "1h"})
    with pytest.raises(UsageError, match="backend 'slrum' is not known; choose one of local, slurm"):
        fray.submit(tokenize, "x", backend="slrum")
    with pytest.raises(ClusterError, match="cannot be serialized with cloudpickle.*_thread.lock"):
        fray.submit(tokenize, threading.Lock())
    assert home.run_ids() == []


# -- checkpointable callables ---------------------------------------------------------------------------------


class Counter:
    """A checkpointable callable whose checkpoint() the tests steer."""

    def __init__(self, answer: object = "call") -> None:
        self.answer = answer
        self.count = 0

    def __call__(self, limit: int) -> int:
        return self.count

    def checkpoint(self, limit: int) -> object:
        if self.answer == "raise":
            raise RuntimeError("cannot checkpoint now")
        return Call(self, limit) if self.answer == "call" else self.answer


def test_a_checkpoint_is_saved_only_when_it_is_a_call_and_the_attempt_is_current(tmp_path, capsys):
    root = tmp_path / "home"
    run = Home(root).run("r1")
    store.make_dirs(run.attempt(1).dir)  # every missing folder 0700, as fray makes them
    target = run.attempt(1).resume_call
    for answer, why in [(None, "returned None"), (42, "must return fray.Call"), ("raise", "checkpoint() raised")]:
        saver = resuming.Checkpointer(Call(Counter(answer), 5), target, is_current=lambda: True)
        assert saver.save("SIGUSR1") is False and not target.exists()
        assert why in capsys.readouterr().err
    stale = resuming.Checkpointer(Call(Counter(), 5), target, is_current=lambda: False)
    assert stale.save("SIGTERM") is False and "superseded" in capsys.readouterr().err and not target.exists()
    counter = Counter()
    counter.count = 7
    announced = []
    saver = resuming.Checkpointer(Call(counter, 5), target, is_current=lambda: True,
                                  announce=lambda: announced.append(True))
    assert saver.save("SIGUSR1") is True and announced == [True]
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    payloads.dump(run.payload, (Counter(), (5,), {}))
    call, source = resuming.starting_call(run, 3, root)  # attempt 2 saved nothing: attempt 1's call wins
    assert source == 1 and call() == 7 and call.args == (5,)
    call, source = resuming.starting_call(run, 1, root)
    assert source is None and call() == 0


def test_the_checkpointable_example_resumes_its_training_loop_after_a_restart(home, daemon):
    proc = subprocess.run([sys.executable, str(REPO / "examples" / "checkpointable_train.py")], capture_output=True,
                          text=True, timeout=240, env={**os.environ, "FRAY_HOME": str(home.root)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    match = re.search(r"trained 60 steps to w=([\d.]+); attempts started at steps \[0, (\d+)\]", proc.stdout)
    assert match, proc.stdout
    assert int(match[2]) >= 10  # attempt 2 went on from where attempt 1 was stopped, not from zero
    run_id = re.search(r"^run (\S+)$", proc.stdout, re.M)[1]
    attempt1 = home.run(run_id).attempt(1)
    assert attempt1.resume_call.exists()
    assert "checkpoint 1 saved" in attempt1.stderr.read_text()
    assert f"attempt 2 starts at step {match[2]}" in home.run(run_id).attempt(2).stdout.read_text()


def test_the_docs_from_python_section_runs_as_written(home, daemon, tmp_path):
    snippet = block_under("sweeps.md", "From Python", "python").text
    script = tmp_path / "snippet.py"
    script.write_text(snippet)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180,
                          cwd=tmp_path, env={**os.environ, "FRAY_HOME": str(home.root)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "['hello', 'fray', 'world']" in proc.stdout
    assert "raised ValueError: not a word: 42" in proc.stdout
    assert "remote traceback names the function: True" in proc.stdout
    assert "[0, 1, 4, 9]" in proc.stdout


def test_a_checkpoint_raises_checkpoint_version_unless_the_call_counts_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("FRAY_ATTEMPT_DIR", str(tmp_path))  # what the wrapper sets: report.progress writes here
    progress = tmp_path / "progress.json"
    announce = resuming.announce_in_progress(progress)
    for expected in (1, 2):  # the wrapper's planned stop waits for a newer version before its SIGTERM
        announce().join(timeout=10)
        assert json.loads(progress.read_text())["checkpoint_version"] == expected
    report.progress(step=3, checkpoint_version=5)  # the call reports its own versions from now on
    announce().join(timeout=10)
    assert json.loads(progress.read_text())["checkpoint_version"] == 5
    report.progress(step=4, checkpoint_version=5)  # ... and its next report is no step back
