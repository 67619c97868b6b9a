"""The shepherd's integration scenarios, end to end: a real daemon, real wrappers, the local backend.

Each test is one story from the design: a node that fails its probe is
blacklisted and avoided, a crash loop backs off more and more, an indefinite
run expires gracefully, and exit 0 without final.json is not a success. (The
frozen-wrapper heartbeat stall is in test_daemon_local.py.)
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from conftest import run_fray, schema_validate, wait_until
from fray.state import runs, store
from fray.ops import views
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


def events(home: Home, run_id: str, kind: str | None = None) -> list[dict]:
    lines = [json.loads(line) for line in home.run(run_id).events.read_text().splitlines()]
    return [e for e in lines if kind is None or e["kind"] == kind]


def script(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(body)
    return path


@contextlib.contextmanager
def serving(home: Home, **local: object) -> Iterator[subprocess.Popen[bytes]]:
    """A real daemon for `home` with these `local` backend settings; killed however the test ends."""
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 8, "gpus": 0, **local}}))
    proc = subprocess.Popen([sys.executable, "-m", "fray.daemon", "--home", str(home.root)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(lambda: home.daemon_lease.exists() and json.loads(home.daemon_lease.read_text())["pid"] == proc.pid,
                   what="the daemon's lease")
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


PROBE_FAILS_ON_FIRST_ATTEMPT = """#!/bin/bash
#FRAY --backoff-base 0 --heartbeat-interval 0.5
if [ "$FRAY_ATTEMPT" = 1 ]; then
    echo "probe: GPU 0 has fallen off the bus" >&2
    exit 42
fi
echo "attempt $FRAY_ATTEMPT: the node looks fine"
"""


def test_a_probe_style_failure_blacklists_the_node_and_later_submissions_exclude_it(home, daemon, tmp_path):
    run_id = submit(home, script(tmp_path, "probe.sh", PROBE_FAILS_ON_FIRST_ATTEMPT))
    meta = wait_until(lambda: ended(home, run_id), timeout=30, what="the run to end")
    assert meta["end"]["status"] == "completed_success"
    first, second = meta["attempts"]
    assert (first["cause"], first["exit_code"]) == ("node_fault", 42)
    assert "fallen off the bus" in first["detail"]
    assert second["cause"] == "success"
    assert meta["counters"] == {"workload_failures": 0, "node_failures": 1, "consecutive_fast_failures": 1, "since": None}
    assert first["counted_as"] == "node" and second["counted_as"] is None

    node = socket.gethostname()  # the local backend's one node
    assert first["node"] == node
    banned = json.loads(home.blacklist.read_text())
    schema_validate("blacklist", banned)
    entry = banned["nodes"][node]
    assert entry["source_run"] == run_id and entry["strikes"] == 1
    assert entry["reason"].startswith("node_fault") and entry["expires_at"] > entry["added_at"]
    assert f"node={node} attempt=1 strikes=1 reason=node_fault" in home.run(run_id).badnode_events.read_text()
    assert [e["data"]["node"] for e in events(home, run_id, "suspect_node")] == [node]

    # The daemon hands the exclude list to the backend with every submission. The local
    # backend has one node, so it cannot actually go elsewhere: what we can see is that the
    # resubmission (made in the same cycle as the strike) and every later one asked to.
    submitted = {e["attempt"]: e["data"]["exclude"] for e in events(home, run_id, "submitted")}
    assert submitted == {1: [], 2: [node]}
    later = submit(home, script(tmp_path, "later.sh", "#!/bin/bash\necho hi\n"))
    wait_until(lambda: ended(home, later), what="a later run")
    assert events(home, later, "submitted")[0]["data"]["exclude"] == [node]

    listed = run_fray("nodes", "list", "--json", home=home.root, check=True)
    assert node in listed.stdout


ALWAYS_CRASHES = """#!/bin/bash
#FRAY --backoff-base 0.2 --backoff-max 2 --max-retries 5 --heartbeat-interval 0.5
echo "attempt $FRAY_ATTEMPT: Segmentation fault" >&2
exit 1
"""


def test_a_crash_loop_backs_off_longer_each_time_and_shows_as_crash_loop(home, daemon, tmp_path):
    run_id = submit(home, script(tmp_path, "crash.sh", ALWAYS_CRASHES))
    seen = wait_until(lambda: (row := views.status_view(home, run_id)["run"])["status"] == "crash_loop" and row,
                      timeout=30, what="the crash_loop status")
    assert "failures in a row (attempts ran" in seen["reason"] and "Segmentation fault" in seen["reason"]

    meta = wait_until(lambda: ended(home, run_id), timeout=30, what="the retry budget to run out")
    assert meta["end"]["status"] == "failed"
    assert "6 workload failures, more than --max-retries 5" in meta["end"]["reason"]
    attempts = meta["attempts"]
    assert [a["cause"] for a in attempts] == ["workload_failure"] * 6

    delays = [e["data"]["delay_sec"] for e in events(home, run_id, "backoff")]
    assert len(delays) == 5  # the sixth failure ends the run instead
    # Exponential with 'equal jitter': each delay lies in [ceiling/2, ceiling], ceilings 0.2, 0.4, 0.8, 1.6, 2.
    for streak, delay in enumerate(delays, start=1):
        ceiling = min(2.0, 0.2 * 2 ** (streak - 1))
        assert ceiling / 2 <= delay <= ceiling, (streak, delays)
    # The ceilings grow; two draws under overlapping ranges (1.6 and the 2 s cap) need not.
    assert delays[-1] >= 5 * delays[0]
    # ...and the daemon really waited that long before the next attempt.
    for before, after, delay in zip(attempts, attempts[1:], delays):
        assert after["submitted_at"] - before["ended_at"] >= delay


SERVES_UNTIL_TOLD = """#!/bin/bash
#FRAY --mode indefinite --keep-alive 3s --stop-grace 10 --heartbeat-interval 0.5
trap '' USR1  # a checkpoint request (SIGUSR1) is ignored: the marker is written on SIGTERM
trap 'echo "attempt $FRAY_ATTEMPT checkpointed" > "$MARKER"; echo "got SIGTERM"; exit 0' TERM
echo serving
while true; do sleep 0.1; done
"""


def test_an_indefinite_run_is_shut_down_gracefully_when_its_keep_alive_expires(home, daemon, tmp_path):
    marker = tmp_path / "checkpoint-marker"
    run_id = submit(home, script(tmp_path, "serve.sh", SERVES_UNTIL_TOLD), env={"MARKER": str(marker)})
    meta = wait_until(lambda: ended(home, run_id), timeout=30, what="the keep-alive to expire")
    assert meta["end"]["status"] == "ended_expired"
    (attempt,) = meta["attempts"]
    assert attempt["cause"] == "expired"
    assert attempt["ended_at"] - attempt["started_at"] >= 3.0
    # Graceful: the workload got SIGTERM, checkpointed and left on its own, well inside its grace period.
    assert marker.read_text() == "attempt 1 checkpointed\n"
    assert "got SIGTERM" in home.run(run_id).attempt(1).stdout.read_text()
    assert json.loads(home.run(run_id).attempt(1).exit.read_text())["workload_exit_code"] == 0  # it left on its own
    assert not any("killing it" in e["reason"] for e in events(home, run_id, "cancel"))
    assert json.loads(home.run(run_id).ended.read_text())["status"] == "ended_expired"

    shown = run_fray("status", run_id, home=home.root, check=True)
    assert "ended_expired" in shown.stdout and "keep-alive of 3s has passed" in shown.stdout


# Attempt 1 exits 0 but leaves a *directory* where the wrapper must write final.json, so the
# wrapper cannot mark success. It waits until the daemon has seen it running, so that the
# daemon's next look at the attempt is after the exit (the daemon's timer is set to 60 s; only
# exit.json wakes it).
NO_FINAL_ON_FIRST_ATTEMPT = """#!/bin/bash
#FRAY --backoff-base 0 --max-retries 1 --heartbeat-interval 0.5
if [ "$FRAY_ATTEMPT" = 1 ]; then
    mkdir "$FRAY_ATTEMPT_DIR/final.json"
fi
echo "attempt $FRAY_ATTEMPT done"
exit 0
"""


def test_exit_0_without_final_json_is_not_success_and_is_retried(home, tmp_path):
    # A 60 s timer: the daemon must react to each quick wrapper's exit by itself
    # (it is their parent), not by luck of the file watcher or the poll.
    with serving(home, poll_interval_sec=60):
        run_id = submit(home, script(tmp_path, "nofinal.sh", NO_FINAL_ON_FIRST_ATTEMPT))
        meta = wait_until(lambda: ended(home, run_id), timeout=30, what="the run to end")
    first_dir = home.run(run_id).attempt(1)
    assert json.loads(first_dir.exit.read_text())["exit_code"] == 0
    assert not first_dir.final.is_file()
    first, second = meta["attempts"]
    assert (first["cause"], first["detail"]) == ("clean_exit", "exited 0 without final.json")
    assert meta["counters"]["workload_failures"] == 1  # it drew on the retry budget like any failure
    assert second["cause"] == "success" and meta["end"]["status"] == "completed_success"
    # The directory in final.json's place was treated as a corrupt file: moved aside and reported.
    assert [p.name for p in first_dir.dir.iterdir() if p.name.startswith("final.json.corrupt-")]
    assert any(e["kind"] == "error" and "final.json" in e["reason"] for e in events(home, run_id))
    assert views.status_view(home, run_id)["run"]["status"] == "completed_success"
