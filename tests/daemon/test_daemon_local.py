"""The daemon and the local backend end to end: real daemon, real wrappers, real files."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from conftest import REPO, run_fray, schema_validate, start_daemon, stop_daemon, wait_until
from fray.state import runs, store
from fray.state.layout import Home

pytestmark = pytest.mark.slow


def submit(home: Home, script: Path, workdir: Path | None = None, **overrides) -> str:
    meta = runs.create_run(home, runs.SubmitOptions(script=script, overrides=overrides,
                                                    workdir=str(workdir or script.parent)))
    return meta.run_id


def meta_of(home: Home, run_id: str) -> dict:
    return json.loads(home.run(run_id).meta.read_text())


def ended(home: Home, run_id: str) -> dict | None:
    meta = meta_of(home, run_id)
    return meta if meta["phase"] == "ended" else None


def events(home: Home, run_id: str) -> list[dict]:
    return [json.loads(line) for line in home.run(run_id).events.read_text().splitlines()]


def script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def test_flaky_example_is_retried_and_resumes_to_success(home, daemon):
    run_id = submit(home, REPO / "examples" / "flaky.py")
    meta = wait_until(lambda: ended(home, run_id), timeout=60, what="the flaky run to end")
    assert meta["end"]["status"] == "completed_success"
    assert [a["cause"] for a in meta["attempts"]] == ["workload_failure", "workload_failure", "success"]
    assert "simulated crash" in meta["attempts"][0]["detail"]
    run = home.run(run_id)
    assert "resuming from step 6" in run.attempt(3).stdout.read_text()
    ended_record = json.loads(run.ended.read_text())
    assert ended_record["result"] == {"steps": 9}
    for document, schema in [(meta, "meta"), (ended_record, "ended"), (json.loads(home.daemon_lease.read_text()), "daemon"),
                             *[(e, "event") for e in events(home, run_id)]]:
        schema_validate(schema, document)
    for name in ("started", "exit", "final", "progress"):
        schema_validate(name, json.loads((run.attempt(3).dir / f"{name}.json").read_text()))
    schema_validate("failure", json.loads(run.attempt(1).failure.read_text()))
    assert oct(run.meta.stat().st_mode & 0o777) == "0o600"
    assert oct(home.root.stat().st_mode & 0o777) == "0o700"


LONG_RUNNING = """#!/bin/bash
#FRAY --heartbeat-interval 0.5 --stop-grace 2
echo started
trap 'echo got SIGTERM; exit 0' TERM
while true; do sleep 0.1; done
"""


def test_a_restarted_daemon_adopts_running_attempts_instead_of_starting_them_again(home, tmp_path):
    store.ensure_home(home)
    first = start_daemon(home, wait=False)
    run_id = submit(home, script(tmp_path, "serve.sh", LONG_RUNNING))
    running = wait_until(lambda: (m := meta_of(home, run_id))["attempts"] and m["attempts"][0]["state"] == "running" and m,
                         what="the attempt to run")
    wrapper_pid = running["attempts"][0]["backend_ref"]["pid"]
    first.send_signal(signal.SIGKILL)  # crash-only: no chance to clean up
    first.wait()
    second = start_daemon(home, wait=False)
    try:
        wait_until(lambda: any(e["kind"] == "adopted" for e in events(home, run_id)), what="the adoption event")
        meta = meta_of(home, run_id)
        assert len(meta["attempts"]) == 1 and meta["attempts"][0]["state"] == "running"
        os.kill(wrapper_pid, 0)  # the same wrapper is still alive
        runs.request(home, run_id, "stop")
        meta = wait_until(lambda: ended(home, run_id), what="the stop")
        assert meta["end"]["status"] == "stopped_manual"
        assert "got SIGTERM" in home.run(run_id).attempt(1).stdout.read_text()
        assert len(meta["attempts"]) == 1
    finally:
        stop_daemon(second)


def test_a_run_that_ended_while_no_daemon_watched_keeps_its_length_in_fray_usage(home, tmp_path):
    """The workload kills the daemon at its start (crash-only: its wrapper lives on) and runs 2 s; the next
    daemon first sees it ended, with one heartbeat from its start. It used 2 s, not the instant of that sight."""
    store.ensure_home(home)
    first = start_daemon(home)
    run_id = submit(home, script(tmp_path, "short.py", "#FRAY --heartbeat-interval 60\n"
                                 f"import os, signal, time\nos.kill({first.pid}, signal.SIGKILL)\ntime.sleep(2)\n"))
    first.wait(timeout=30)
    wait_until(lambda: home.run(run_id).attempt(1).exit.exists(), timeout=30, what="the run to end unwatched")
    second = start_daemon(home, wait=False)
    try:
        meta = wait_until(lambda: ended(home, run_id), timeout=30, what="the next daemon to end it")
        assert meta["end"]["status"] == "completed_success"
        used = json.loads(run_fray("usage", "--json", check=True).stdout)
        row = next((r for r in used["rows"] if r["key"] == run_id), None)
        assert row is not None and row["wall_sec"] >= 2.0, (used, meta["attempts"])
    finally:
        stop_daemon(second)


def test_a_control_request_wakes_the_daemon_at_once_not_on_its_timer(home, tmp_path):
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"poll_interval_sec": 60}}))
    daemon = start_daemon(home, wait=False)
    try:
        run_id = submit(home, script(tmp_path, "serve.sh", LONG_RUNNING))
        wait_until(lambda: meta_of(home, run_id)["attempts"], timeout=10, what="the submission (woken by the new run)")
        wait_until(lambda: home.run(run_id).attempt(1).started.exists(), timeout=10, what="the wrapper")
        runs.request(home, run_id, "stop")
        # With a 60 s timer, only the file-change wake-up can end it this soon.
        meta = wait_until(lambda: ended(home, run_id), timeout=10, what="the stop to take effect")
        assert meta["end"]["status"] == "stopped_manual"
    finally:
        stop_daemon(daemon)


def test_the_local_backend_reports_a_wrapper_exit_after_its_exit_record_is_written(home, tmp_path):
    """The daemon's wake-up for a finished attempt that needs no file watcher and no timer."""
    import threading

    from fray.backends.protocol import AttemptKey, SubmitRequest
    from fray.backends.local.backend import LocalBackend
    from fray.core.model import Meta

    store.ensure_home(home)
    meta = Meta.from_dict(meta_of(home, submit(home, script(tmp_path, "quick.sh", "#!/bin/bash\necho quick\n"))))
    paths = home.run(meta.run_id)
    seen_exit_record: list[bool] = []
    woken = threading.Event()

    def on_exit() -> None:
        seen_exit_record.append(paths.attempt(1).exit.exists())
        woken.set()

    LocalBackend(home, {"cpus": 2, "gpus": 0}, on_attempt_exit=on_exit).submit(SubmitRequest(
        key=AttemptKey(meta.run_id, 1), name=meta.name, spec=meta.spec, home=home.root,
        script=paths.script(meta.script["frozen"]), attempt_dir=paths.attempt(1).dir,
        checkpoint_dir=paths.checkpoints_dir))
    assert woken.wait(timeout=15), "the backend never reported the wrapper's exit"
    assert seen_exit_record == [True]


def test_a_vanished_attempt_is_lost_and_retried_on_the_node_budget(home, daemon, tmp_path):
    run_id = submit(home, script(tmp_path, "serve.sh", LONG_RUNNING), backoff_base_sec=0.0)
    wait_until(lambda: home.run(run_id).attempt(1).started.exists(), what="attempt 1")
    started = json.loads(home.run(run_id).attempt(1).started.read_text())
    os.killpg(started["pid"], signal.SIGKILL)  # the wrapper dies with no exit record (OOM killer, node lost)
    os.killpg(started["workload_pid"], signal.SIGKILL)
    meta = wait_until(lambda: (m := meta_of(home, run_id))["attempts"][0]["state"] == "ended" and m, what="loss detection")
    assert meta["attempts"][0]["cause"] == "lost"
    assert meta["counters"]["node_failures"] == 1
    wait_until(lambda: home.run(run_id).attempt(2).started.exists(), what="attempt 2")
    runs.request(home, run_id, "stop")
    wait_until(lambda: ended(home, run_id), what="the stop")


def test_a_frozen_wrapper_is_a_heartbeat_stall_and_is_killed_and_replaced(home, daemon, tmp_path):
    body = LONG_RUNNING.replace("--stop-grace 2", "--stop-grace 1 --heartbeat-timeout 2 --startup-grace 0 --backoff-base 0")
    run_id = submit(home, script(tmp_path, "serve.sh", body))
    wait_until(lambda: home.run(run_id).attempt(1).started.exists(), what="attempt 1")
    wrapper_pid = json.loads(home.run(run_id).attempt(1).started.read_text())["pid"]
    os.kill(wrapper_pid, signal.SIGSTOP)  # alive but silent: SIGTERM cannot reach it, only the forced kill can
    meta = wait_until(lambda: (m := meta_of(home, run_id))["attempts"][0]["state"] == "ended" and m, timeout=30,
                      what="the stall to be detected and the attempt killed")
    assert meta["attempts"][0]["cause"] == "heartbeat_stall"
    # Closed (fenced) and killed at once, and replaced in that same cycle: no waiting for it to die.
    log = events(home, run_id)
    assert [e["kind"] for e in log].count("cancel") == 1
    closed = next(e for e in log if e["kind"] == "attempt_ended" and e["attempt"] == 1)
    submitted = wait_until(lambda: next((e for e in events(home, run_id) if e["kind"] == "submitted"
                                         and e["attempt"] == 2), None), what="attempt 2 to be submitted")
    assert submitted["at"] - closed["at"] < 1.0, (closed, submitted)
    wait_until(lambda: not os.path.exists(f"/proc/{wrapper_pid}") or "Z" in open(f"/proc/{wrapper_pid}/stat").read()
               .split(")")[-1].split()[0], what="the frozen wrapper to be killed")
    node = meta["attempts"][0]["node"]
    # The daemon writes meta.json, then the blacklist: wait for the second.
    banned = wait_until(lambda: home.blacklist.exists() and json.loads(home.blacklist.read_text()), what="the blacklist")
    schema_validate("blacklist", banned)
    assert banned["nodes"][node]["source_run"] == run_id
    assert banned["nodes"][node]["reason"].startswith("heartbeat_stall")
    assert f"node={node} attempt=1" in home.run(run_id).badnode_events.read_text()
    wait_until(lambda: home.run(run_id).attempt(2).started.exists(), what="attempt 2")
    runs.request(home, run_id, "stop")
    wait_until(lambda: ended(home, run_id), what="the stop")


def test_admission_keeps_what_does_not_fit_pending_with_the_reason(home, tmp_path):
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 2, "gpus": 0}}))
    daemon = start_daemon(home, wait=False)
    try:
        serve = script(tmp_path, "serve.sh", LONG_RUNNING)
        big = submit(home, serve, cpus=2)
        wait_until(lambda: home.run(big).attempt(1).started.exists(), what="the first run")
        small = submit(home, serve, cpus=1)
        never = submit(home, serve, gpus=1)
        wait_until(lambda: (meta_of(home, small)["wait_reason"] or "").startswith("waiting for resources"),
                   what="the second run to wait")
        assert meta_of(home, small)["wait_reason"] == "waiting for resources: 1 CPUs wanted, 0 of 2 free"
        wait_until(lambda: "can never start here" in (meta_of(home, never)["wait_reason"] or ""), what="the GPU run")
        runs.request(home, big, "stop")
        wait_until(lambda: home.run(small).attempt(1).started.exists(), what="the second run to start once room is made")
        for run_id in (small, never):
            runs.request(home, run_id, "stop")
            wait_until(lambda: ended(home, run_id), what="the stop")
    finally:
        stop_daemon(daemon)


def test_a_corrupt_run_does_not_stop_the_daemon_serving_the_others(home, tmp_path):
    hello = script(tmp_path, "ok.sh", "#!/bin/bash\n#FRAY --stop-grace 1\nsleep 0.5; echo fine\n")
    broken = submit(home, hello)
    # Corrupted before the daemon starts: a running daemon, the file's writer, could commit over it first.
    home.run(broken).meta.write_text('{"run_id": "truncated...')
    healthy = submit(home, hello)
    daemon = start_daemon(home)
    try:
        # exit 0 without final.json is not success for run_once; the wrapper writes final.json on exit 0
        meta = wait_until(lambda: ended(home, healthy), what="the healthy run")
        assert meta["end"]["status"] == "completed_success"
        aside = wait_until(lambda: [p for p in home.run(broken).dir.iterdir() if p.name.startswith("meta.json.corrupt-")],
                           what="the corrupt meta.json to be moved aside")
        assert aside[0].read_text() == '{"run_id": "truncated...'
        # moved aside, then reported: the event may follow the move by a moment
        wait_until(lambda: any(e["kind"] == "error" and "corrupt" in e["reason"] for e in events(home, broken)),
                   what="the corrupt meta.json to be reported")
    finally:
        stop_daemon(daemon)


def test_an_edited_config_takes_effect_without_a_restart_and_a_bad_edit_keeps_the_old_one(home, tmp_path):
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 1}}))
    loop = script(tmp_path, "loop.sh", "#FRAY --heartbeat-interval 0.5 --stop-grace 1\nwhile true; do sleep 0.2; done\n")
    daemon = start_daemon(home)
    try:
        pair = [submit(home, loop), submit(home, loop)]
        wait_until(lambda: sorted(meta_of(home, r)["phase"] for r in pair) == ["active", "queued"]
                   and any("waiting for resources" in (meta_of(home, r)["wait_reason"] or "") for r in pair),
                   what="one CPU: one run runs, the other waits")
        home.config.write_text(json.dumps({"local": {"cpus": 2}}))
        wait_until(lambda: all(meta_of(home, r)["phase"] == "active" for r in pair), timeout=30,
                   what="the waiting run to start on the new CPU")

        home.config.write_text('{"local": {"cpus": "many"}}')
        status = wait_until(lambda: (s := json.loads(run_fray("daemon", "status", "--json", check=True).stdout))
                            ["lease"].get("config_error") and s, what="the daemon to report the bad config")
        schema_validate("cli-daemon", status)
        assert "previous config stays in force" in status["lease"]["config_error"]
        assert "config" in run_fray("daemon", "status", check=True).stdout
        third = submit(home, loop)  # still 2 CPUs, both in use: it waits, as the old config says
        wait_until(lambda: "0 of 2 free" in (meta_of(home, third)["wait_reason"] or ""), timeout=5,
                   what=f"the third run to wait: {meta_of(home, third)['wait_reason']}")

        home.config.write_text(json.dumps({"local": {"cpus": 3}}))
        wait_until(lambda: meta_of(home, third)["phase"] == "active", what="a good config to clear the error")
        # The lease is written once the cycle that started it is over: a moment after the run shows active.
        wait_until(lambda: json.loads(home.daemon_lease.read_text())["config_error"] is None,
                   what="the lease to drop the config error")
    finally:
        stop_daemon(daemon)

