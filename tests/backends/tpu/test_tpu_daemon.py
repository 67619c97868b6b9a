"""The real daemon running TPU runs against the gcloud simulator (tests/fakes/gcloud).

The simulator's `ssh --worker=all` runs one local process per host, so the real
wrapper runs on every "host" and writes into the shared FRAY_HOME.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from conftest import run_fray, running, schema_validate, start_daemon, stop_daemon, wait_until
from fray.ops import views
from fray.state import runs, store
from fray.state.layout import Home
from fray.wrapper import report, versions

FAKES = Path(__file__).parents[2] / "fakes" / "gcloud"
ZONE = "us-west4-a"


@pytest.fixture
def sim(tmp_path, monkeypatch, home):
    state = tmp_path / "gcloud-state"
    state.mkdir()
    (state / "config.json").write_text(json.dumps({"ready_after_sec": 0.3, "quota_zones": ["us-east1-d"]}))
    monkeypatch.setenv("FRAY_GCLOUD_SIM", str(state))
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    home.root.mkdir(parents=True, exist_ok=True)
    home.config.write_text(json.dumps({"tpu": {"poll_interval_sec": 0.3, "zones": [ZONE]}}))
    yield state
    # Power off what a test left running (its hosts' wrappers and workloads), as deleting the slices does.
    for path in state.glob("nodes/*/*.json"):
        gcloud_sim_delete(path.stem, path.parent.name)


def gcloud_sim_delete(name: str, zone: str) -> None:
    import subprocess

    subprocess.run(["gcloud", "compute", "tpus", "tpu-vm", "delete", name, "--zone", zone, "--quiet"],
                   capture_output=True, timeout=30)


def submit(home: Home, script: Path, **overrides) -> str:
    overrides = {"backend": "tpu", "tpu": "v4-8", "zones": [ZONE], "runtime_version": "tpu-ubuntu2204-base",
                 "spot": True, "heartbeat_interval_sec": 0.5, "backoff_base_sec": 0.0,
                 # The simulator's hosts are this machine: no TPU chips (the probe's own test is below).
                 "skip_probes": ["tpu"], **overrides}
    meta = runs.create_run(home, runs.SubmitOptions(script=script, overrides=overrides, workdir=str(script.parent)))
    return meta.run_id


def meta_of(home: Home, run_id: str) -> dict:
    return json.loads(home.run(run_id).meta.read_text())


def ended(home: Home, run_id: str) -> dict | None:
    meta = meta_of(home, run_id)
    return meta if meta["phase"] == "ended" else None


def slices(state: Path, zone: str = ZONE) -> dict[str, dict]:
    folder = state / "nodes" / zone
    return {p.stem: json.loads(p.read_text()) for p in folder.glob("*.json")} if folder.exists() else {}


def script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "train.sh"
    path.write_text("#!/bin/sh\n" + body)
    return path


def test_a_run_creates_a_slice_runs_on_it_and_the_slice_is_deleted_after(home, sim, tmp_path):
    run_id = submit(home, script(tmp_path, 'echo "task $FRAY_TASK_INDEX of $FRAY_NUM_TASKS at $JAX_COORDINATOR_ADDRESS"\n'))
    daemon = start_daemon(home)
    try:
        meta = wait_until(lambda: ended(home, run_id), timeout=60, what="the run to end")
        assert meta["end"]["status"] == "completed_success", meta
        assert "task 0 of 1 at 10." in home.run(run_id).attempt(1).stdout.read_text()
        wait_until(lambda: not slices(sim), what="the finished run's slice to be deleted")
    finally:
        stop_daemon(daemon)


def gcloud_sim(*args: str) -> str:
    import subprocess

    return subprocess.run(["gcloud", "sim", *args], check=True, capture_output=True, timeout=30, text=True).stdout


def test_every_host_of_a_multi_host_slice_runs_a_wrapper_with_its_own_heartbeat(home, sim, tmp_path):
    # Every host waits for all four, as jax.distributed.initialize does, then says who it is.
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    body = (f'touch {barrier}/$FRAY_TASK_INDEX; while [ "$(ls {barrier} | wc -l)" -lt 4 ]; do sleep 0.1; done\n'
            'echo "task $FRAY_TASK_INDEX of $FRAY_NUM_TASKS jax $JAX_PROCESS_ID"\n')
    run_id = submit(home, script(tmp_path, body), tpu="v4-32")
    daemon = start_daemon(home)
    try:
        meta = wait_until(lambda: ended(home, run_id), timeout=60, what="the run to end")
        assert meta["end"]["status"] == "completed_success", meta
        attempt = home.run(run_id).attempt(1)
        assert "task 0 of 4 jax 0" in attempt.stdout.read_text()
        for index in (1, 2, 3):
            task = attempt.task(index)
            wait_until(lambda: task.stdout.exists() and f"task {index} of 4 jax {index}" in task.stdout.read_text(),
                       what=f"host {index}'s output")
            assert task.started.exists()
    finally:
        stop_daemon(daemon)


RESUMING = """\
ckpt="$FRAY_CHECKPOINT_DIR/step"
if [ -f "$ckpt" ]; then echo "resumed from step $(cat "$ckpt")"; exit 0; fi
mkdir -p "$FRAY_CHECKPOINT_DIR"; echo 5 > "$ckpt"
sleep 120
"""


def test_a_preempted_slice_is_deleted_and_the_run_resumes_on_a_new_one(home, sim, tmp_path):
    run_id = submit(home, script(tmp_path, RESUMING))
    daemon = start_daemon(home)
    try:
        paths = home.run(run_id)
        wait_until(lambda: (paths.checkpoints_dir / "step").exists(), timeout=60, what="the first checkpoint")
        gcloud_sim("preempt", slices_name(run_id, 1), "--zone", ZONE)
        meta = wait_until(lambda: ended(home, run_id), timeout=60, what="the run to end")
        assert meta["end"]["status"] == "completed_success", meta
        assert [a["cause"] for a in meta["attempts"]] == ["preempted", "success"]
        assert "resumed from step 5" in paths.attempt(2).stdout.read_text()
        wait_until(lambda: not slices(sim), what="both slices deleted")
    finally:
        stop_daemon(daemon)


def slices_name(run_id: str, attempt: int) -> str:
    from fray.backends.tpu.command_lines import slice_name

    return slice_name(run_id, attempt)


def test_a_quota_error_moves_the_slice_to_the_next_zone(home, sim, tmp_path):
    run_id = submit(home, script(tmp_path, "echo done\n"), zones=["us-east1-d", ZONE])
    daemon = start_daemon(home)
    try:
        meta = wait_until(lambda: ended(home, run_id), timeout=60, what="the run to end")
        assert meta["end"]["status"] == "completed_success", meta
        assert not slices(sim, "us-east1-d")
        assert (sim / "nodes" / ZONE).exists()  # it was created (and deleted after) in the second zone
    finally:
        stop_daemon(daemon)


def test_a_restarted_daemon_adopts_its_slice_and_creates_no_second_one(home, sim, tmp_path):
    run_id = submit(home, script(tmp_path, RESUMING))
    daemon = start_daemon(home)
    paths = home.run(run_id)
    try:
        wait_until(lambda: (paths.checkpoints_dir / "step").exists(), timeout=60, what="the workload to start")
    finally:
        stop_daemon(daemon)
    before = slices(sim)
    daemon = start_daemon(home)
    try:
        wait_until(lambda: meta_of(home, run_id)["phase"] == "active", what="the adopted attempt")
        # Several of the new daemon's cycles: still the one slice, still attempt 1.
        wait_until(lambda: paths.attempt(1).heartbeat.exists() and
                   paths.attempt(1).heartbeat.stat().st_mtime > paths.checkpoints_dir.joinpath("step").stat().st_mtime + 1,
                   what="heartbeats going on under the new daemon")
        assert slices(sim).keys() == before.keys() == {slices_name(run_id, 1)}
        assert len(meta_of(home, run_id)["attempts"]) == 1
    finally:
        stop_daemon(daemon)


def create_slice(home_id: str, run: str, attempt: int) -> None:
    from fray.backends import external
    from fray.backends.tpu import command_lines

    assert external.run(command_lines.create(command_lines.SliceRequest(run, attempt, ZONE, "v4-8", "v", home_id)), timeout=30).ok


def test_a_leaked_fray_slice_is_deleted(home, sim, tmp_path):
    from fray.state import identity

    create_slice(identity.home_id(home), "gone-run", 3)
    run_id = submit(home, script(tmp_path, "echo done\n"))
    daemon = start_daemon(home)
    try:
        wait_until(lambda: ended(home, run_id), timeout=60, what="the run to end")
        wait_until(lambda: "fray-gone-run-a3" not in slices(sim), what="the leaked slice deleted")
    finally:
        stop_daemon(daemon)


def test_two_homes_sharing_a_project_never_delete_each_others_slices(home, sim, tmp_path):
    from fray.state import identity

    other = Home(tmp_path / "other-home")
    other.root.mkdir()
    other.config.write_text(home.config.read_text())
    # Each home has a run going and a leak of its own; both daemons clean up in the same zone.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    mine, theirs = (submit(h, script(tmp_path / n, RESUMING)) for h, n in ((home, "a"), (other, "b")))
    create_slice(identity.home_id(home), "my-leak", 1)
    create_slice(identity.home_id(other), "their-leak", 1)
    assert identity.home_id(home) != identity.home_id(other)
    daemons = [start_daemon(home), start_daemon(other)]
    try:
        for h, run_id in ((home, mine), (other, theirs)):
            wait_until(lambda: (h.run(run_id).checkpoints_dir / "step").exists(), timeout=60,
                       what="both runs' workloads going")
        wait_until(lambda: not {"fray-my-leak-a1", "fray-their-leak-a1"} & slices(sim).keys(),
                   what="each home's leak deleted by its own daemon")
        # Several cycles of both daemons later, each run is still on its first slice.
        lease = lambda h: json.loads(h.daemon_lease.read_text())["cycles"]  # noqa: E731
        start = {h.root: lease(h) for h in (home, other)}
        wait_until(lambda: all(lease(h) >= start[h.root] + 5 for h in (home, other)), timeout=30,
                   what="five more cycles of each daemon")
        assert slices(sim).keys() == {slices_name(mine, 1), slices_name(theirs, 1)}
        for h, run_id in ((home, mine), (other, theirs)):
            assert [a["number"] for a in meta_of(h, run_id)["attempts"]] == [1]
            assert slices(sim)[slices_name(run_id, 1)]["labels"]["fray-home"] == identity.home_id(h)
    finally:
        for daemon in daemons:
            stop_daemon(daemon)


def test_a_host_without_its_tpu_chips_fails_preflight_as_a_node_fault(home, sim, tmp_path):
    run_id = submit(home, script(tmp_path, "echo never\n"), skip_probes=[], max_retries_preemption=0)
    daemon = start_daemon(home)
    try:
        meta = wait_until(lambda: ended(home, run_id), timeout=60, what="the run to end")
        assert meta["attempts"][0]["cause"] == "node_fault", meta["attempts"][0]
        assert "accelerator device" in meta["attempts"][0]["detail"], meta["attempts"][0]
        stdout = home.run(run_id).attempt(1).stdout
        assert not stdout.exists() or "never" not in stdout.read_text()
    finally:
        stop_daemon(daemon)


def test_a_queued_run_waits_for_its_queued_resource_and_runs(home, sim, tmp_path):
    (sim / "config.json").write_text(json.dumps({"ready_after_sec": 0.3, "queued_wait_sec": 2.0}))
    run_id = submit(home, script(tmp_path, "echo queued-done\n"), queued=True)
    daemon = start_daemon(home)
    try:
        wait_until(lambda: list(sim.glob("queued/*/*.json")), timeout=30, what="the queued resource")
        # Waiting for resources: no node yet, and the attempt is waiting, not failed.
        assert not home.run(run_id).attempt(1).started.exists()
        assert meta_of(home, run_id)["attempts"][0]["state"] in ("submitting", "submitted")
        meta = wait_until(lambda: ended(home, run_id), timeout=60, what="the run to end")
        assert meta["end"]["status"] == "completed_success", meta
        assert "queued-done" in home.run(run_id).attempt(1).stdout.read_text()
        # The finished attempt's queued resource is deleted with its node, not left queued.
        wait_until(lambda: not list(sim.glob("queued/*/*.json")) and not slices(sim),
                   what="the queued resource and its node deleted")
    finally:
        stop_daemon(daemon)


# Hosts resume only from an earlier attempt's checkpoint: a host that starts after host 0 of its own
# attempt wrote one must not take it for a resume (and finish at once, leaving nothing to lose).
MULTI_HOST_RESUMING = """\
ckpt="$FRAY_CHECKPOINT_DIR/step"
if [ -f "$ckpt" ] && [ "$(cut -d' ' -f2 "$ckpt")" != "$FRAY_ATTEMPT" ]; then
  echo "task $FRAY_TASK_INDEX resumed from step $(cut -d' ' -f1 "$ckpt")"; exit 0
fi
if [ "$FRAY_TASK_INDEX" = 0 ]; then mkdir -p "$FRAY_CHECKPOINT_DIR"; echo "7 $FRAY_ATTEMPT" > "$ckpt"; fi
sleep 120
"""


def test_a_lost_host_other_than_host_0_ends_the_attempt_and_the_run_resumes_on_a_new_slice(home, sim, tmp_path):
    run_id = submit(home, script(tmp_path, MULTI_HOST_RESUMING), tpu="v4-32", heartbeat_timeout_sec=5.0)
    daemon = start_daemon(home)
    try:
        paths = home.run(run_id)
        host2 = paths.attempt(1).task(2)
        wait_until(lambda: (paths.checkpoints_dir / "step").exists() and host2.heartbeat.exists(), timeout=60,
                   what="every host up and the first checkpoint")
        # Host 2's VM dies; the slice still says READY and host 0 beats on.
        killed = gcloud_sim("kill-host", slices_name(run_id, 1), "--zone", ZONE, "--worker", "2")
        # At least its wrapper: the first heartbeat comes before the probes, so the workload may not run yet.
        assert int(killed) >= 1, "kill-host found nothing running on host 2"
        meta = wait_until(lambda: ended(home, run_id), timeout=90, what="the run to end")
        assert meta["end"]["status"] == "completed_success", meta
        first = meta["attempts"][0]
        assert first["cause"] == "preempted" and "host 2 of 4: no heartbeat" in first["detail"], first
        for index in range(4):
            wait_until(lambda: "resumed from step 7" in _text(paths.attempt(2).task(index).stdout),
                       what=f"host {index} of attempt 2 resuming")
        wait_until(lambda: not slices(sim), what="both slices deleted")
        # The first slice's hosts were powered off with it: host 0's sleeping workload is gone too.
        pid = json.loads(paths.attempt(1).started.read_text())["workload_pid"]
        wait_until(lambda: not running(pid), what="attempt 1's workload on host 0 to be gone")
    finally:
        stop_daemon(daemon)


def test_a_host_other_than_host_0_that_fails_fails_the_attempt_by_its_exit_code(home, sim, tmp_path):
    body = 'if [ "$FRAY_TASK_INDEX" = 3 ]; then echo "host 3 broke" >&2; exit 1; fi\nsleep 120\n'
    run_id = submit(home, script(tmp_path, body), tpu="v4-32", max_retries=0)
    daemon = start_daemon(home)
    try:
        meta = wait_until(lambda: ended(home, run_id), timeout=90, what="the run to end")
        first = meta["attempts"][0]
        # Described by host 3's own failure record (core.placement.reporting), its stderr included.
        assert (first["cause"], first["detail"]) == ("workload_failure", "task 3 of 4: exit 1: host 3 broke"), first
        assert meta["end"]["status"] == "failed", meta
        wait_until(lambda: not slices(sim), what="the slice deleted")
    finally:
        stop_daemon(daemon)


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_a_queued_slice_still_waiting_for_resources_at_the_scheduling_timeout_ends_the_run(home, sim, tmp_path):
    (sim / "config.json").write_text(json.dumps({"ready_after_sec": 0.3, "queued_wait_sec": 600}))
    run_id = submit(home, script(tmp_path, "echo never\n"), queued=True, scheduling_timeout_sec=2.0)
    daemon = start_daemon(home)
    try:
        meta = wait_until(lambda: ended(home, run_id), timeout=60, what="the run to end at its scheduling timeout")
        assert meta["end"]["status"] == "failed" and [a["cause"] for a in meta["attempts"]] == ["unschedulable"]
        assert meta["end"]["reason"] == \
            "unschedulable: not placed within 2s: still pending (WAITING_FOR_RESOURCES)", meta["end"]
        wait_until(lambda: not list(sim.glob("queued/*/*.json")), what="the queued resource deleted")
    finally:
        stop_daemon(daemon)


def test_hosts_that_see_fray_home_as_a_gcsfuse_bucket_write_once_and_the_run_is_watched_and_ends(home, sim, tmp_path,
                                                                                                   monkeypatch):
    """tpu.records=write-once, every host's Python refusing rename and link in FRAY_HOME (the simulator's bucket).

    With "records": "rename" instead, no host can write a heartbeat and this times out waiting for one.
    Host 0 also checkpoints through `report.checkpoint`, which promotes without a rename there.
    """
    config = json.loads((sim / "config.json").read_text())
    (sim / "config.json").write_text(json.dumps({**config, "bucket": str(home.root)}))
    home.config.write_text(json.dumps({"tpu": {"poll_interval_sec": 0.3, "zones": [ZONE], "records": "write-once"}}))
    body = ("for s in 1 2 3 4 5 6; do python3 -m fray.wrapper.report progress --step $s; sleep 0.3; done\n"
            'if [ "$FRAY_TASK_INDEX" = 0 ]; then python3 -c \'from fray import report\n'
            'with report.checkpoint("step-6") as folder: (folder / "state").write_text("6")\' || exit 3; fi\n'
            'echo "task $FRAY_TASK_INDEX records $FRAY_RECORDS"\n')
    run_id = submit(home, script(tmp_path, body.replace("python3", sys.executable)), tpu="v4-32",
                    heartbeat_timeout_sec=10.0)
    daemon = start_daemon(home)
    try:
        paths = home.run(run_id)
        attempt = paths.attempt(1)
        # While it runs, the shepherd reads every host's beat and host 0's progress from the versions.
        wait_until(lambda: all(store.read_heartbeat(attempt.task(i).heartbeat) for i in range(4)), timeout=60,
                   what="a heartbeat from every host")
        wait_until(lambda: (views.read_progress(attempt.progress) or {}).get("step", 0) >= 2, what="progress")
        meta = wait_until(lambda: ended(home, run_id), timeout=60, what="the run to end")
        assert meta["end"]["status"] == "completed_success", meta
        assert len(meta["attempts"]) == 1, meta["attempts"]
        for index in range(4):
            task = attempt.task(index)
            assert f"task {index} records write-once" in task.stdout.read_text()
            assert store.read_json(task.exit, "exit")["exit_code"] == 0
            names = set(os.listdir(task.dir))
            assert {"heartbeat.d", "exit.json.d", "progress.json.d"} <= names, names
            assert not {"heartbeat", "exit.json", "progress.json"} & names, names
            assert len(os.listdir(task.dir / "heartbeat.d")) <= versions.KEEP + 1
        monkeypatch.setenv("FRAY_CHECKPOINT_DIR", str(paths.checkpoints_dir))
        latest = report.latest_checkpoint()
        assert latest is not None and latest.name == "step-6" and (latest / "state").read_text() == "6"
        assert not (sim / "bucket-refusals.log").exists()
    finally:
        stop_daemon(daemon)


def test_fray_nodes_lists_the_hosts_of_live_slices_and_forgets_them_once_deleted(home, sim, tmp_path):
    stop = tmp_path / "stop"
    run_id = submit(home, script(tmp_path, f"while [ ! -e {stop} ]; do sleep 0.1; done\n"), tpu="v4-32")
    daemon = start_daemon(home)
    try:
        def hosts() -> list[dict]:
            listing = json.loads(run_fray("nodes", "list", "--json", check=True).stdout)
            schema_validate("cli-nodes", listing)
            return [n for n in listing["nodes"] if n["backend"] == "tpu"]

        # A CREATING slice may already list its hosts (the simulator gives the endpoints at once): wait for READY.
        listed = wait_until(lambda: (found := hosts()) and len(found) == 4 and
                            all(n["state"] == "READY" for n in found) and found,
                            timeout=60, what="four READY TPU hosts listed")
        name = slices_name(run_id, 1)
        assert [(n["name"], n["tpu"]["worker"], n["tpu"]["slice"]) for n in listed] == \
            [(f"{name}-w{i}", i, name) for i in range(4)]
        ips = slices(sim)[name]["networkEndpoints"]
        assert [n["tpu"]["ip"] for n in listed] == [e["ipAddress"] for e in ips]
        assert {(n["state"], n["tpu"]["run_id"], n["tpu"]["attempt"], n["tpu"]["accelerator_type"]) for n in listed} \
            == {("READY", run_id, 1, "v4-32")}
        table = run_fray("nodes", "list", check=True).stdout
        assert "TPU HOST" in table and f"{name}-w3" in table and f"{run_id} #1" in table
        stop.touch()
        wait_until(lambda: ended(home, run_id), timeout=60, what="the run to end")
        wait_until(lambda: not hosts(), timeout=30, what="the deleted slice's hosts gone from `fray nodes`")
    finally:
        stop_daemon(daemon)


def test_the_docs_tpu_walkthrough_runs_through_a_preemption(home, sim):
    """docs/tpu.md's walkthrough: `fray submit examples/tpu_train.sh`, the spot slice preempted, the run resumes."""
    example = Path(__file__).parents[3] / "examples" / "tpu_train.sh"
    submitted = json.loads(run_fray("submit", "--json", "--skip-probes", "tpu", str(example), home=home.root,
                                    check=True).stdout)
    run_id = submitted["run_id"]
    paths = home.run(run_id)
    try:
        wait_until(lambda: listed(home, run_id)["status"] == "healthy_running", timeout=60, what="attempt 1 running")
        wait_until(lambda: int(_text(paths.checkpoints_dir / "step") or 0) >= 2, timeout=60, what="a checkpoint")
        gcloud_sim("preempt", slices_name(run_id, 1), "--zone", "us-central2-b")
        row = wait_until(lambda: listed(home, run_id)["attempt"] == 2 and listed(home, run_id), timeout=60,
                         what="attempt 2")
        assert row["status"] in ("restarting", "healthy_running", "completed_success"), row
        meta = wait_until(lambda: ended(home, run_id), timeout=90, what="the run to end")
        assert meta["end"]["status"] == "completed_success", meta
        first = meta["attempts"][0]
        assert first["cause"] == "preempted" and first["detail"] == "slice PREEMPTED", first
        resumed = int(_text(paths.attempt(2).stdout).split("starts at step ")[1].split()[0])
        assert resumed >= 2  # from the checkpoint attempt 1 left, not from 0
        for index in range(1, 4):
            wait_until(lambda: "done at step 20" in _text(paths.attempt(2).task(index).stdout),
                       what=f"host {index} of attempt 2 done")
        wait_until(lambda: not slices(sim, "us-central2-b"), what="both slices deleted")
        status = run_fray("status", run_id, home=home.root, check=True).stdout
        assert "resources: v4-32 slice (4 hosts x 4 chips), spot on tpu" in status, status
    finally:
        run_fray("daemon", "stop", home=home.root)


def listed(home: Home, run_id: str) -> dict:
    rows = json.loads(run_fray("list", "--json", home=home.root, check=True).stdout)["runs"]
    return next(row for row in rows if row["run_id"] == run_id)
