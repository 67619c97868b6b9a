"""The gcloud simulator (tests/fakes/gcloud) driven by the TPU backend's own command lines and parser.

Real processes: every call runs the simulator executable the way the backend's
runner would, and its output goes through `fray.backends.tpu.parse`.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from conftest import running, wait_until
from fray.backends import external
from fray.backends.protocol import AttemptKey, SubmitRequest
from fray.backends.tpu import command_lines, launch, parse
from fray.backends.tpu.calls import CloudCalls
from fray.core.model import RunSpec

FAKES = Path(__file__).parents[2] / "fakes" / "gcloud"
HOME_ID = "0123456789abcdef"  # the fray-home label of every slice made here


@pytest.fixture
def sim(tmp_path, monkeypatch):
    state = tmp_path / "gcloud-state"
    state.mkdir()
    (state / "config.json").write_text(json.dumps({"ready_after_sec": 0.3, "quota_zones": ["us-east1-d"]}))
    monkeypatch.setenv("FRAY_GCLOUD_SIM", str(state))
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    return state


def gcloud(argv: list[str]) -> external.CommandResult:
    return external.run(argv, timeout=30)


def listed(zone: str) -> dict[str, parse.Slice]:
    result = gcloud(command_lines.list_nodes(zone, HOME_ID))
    assert result.ok, result.describe()
    return {s.name: s for s in parse.parse_nodes(result.stdout)}


def test_a_slice_is_created_async_then_becomes_ready_with_one_ip_per_host(sim):
    (sim / "config.json").write_text(json.dumps({"ready_after_sec": 3.0}))  # CREATING long enough to be seen
    request = command_lines.SliceRequest("r1", 1, "us-west4-a", "v5litepod-16", "v2-alpha-tpuv5-lite", HOME_ID, "spot")
    created = gcloud(command_lines.create(request))
    assert created.ok and json.loads(created.stdout)["done"] is False  # --async: an operation, not the node
    node = listed("us-west4-a")["fray-r1-a1"]
    assert parse.read_slice(node).phase == "pending" and (node.run_id, node.attempt, node.spot) == ("r1", 1, True)
    wait_until(lambda: parse.read_slice(listed("us-west4-a")["fray-r1-a1"]).phase == "ready", what="READY")
    assert len(listed("us-west4-a")["fray-r1-a1"].ips) == 4
    raw = json.loads(gcloud(command_lines.list_nodes("us-west4-a", HOME_ID)).stdout)[0]
    assert raw["name"].startswith("projects/") and "/locations/us-west4-a/nodes/fray-r1-a1" in raw["name"]


def test_preemption_is_seen_and_a_deleted_slice_is_missing_from_the_list(sim):
    gcloud(command_lines.create(command_lines.SliceRequest("r2", 1, "us-west4-a", "v4-8", "tpu-ubuntu2204-base", HOME_ID)))
    assert gcloud(["gcloud", "sim", "preempt", "fray-r2-a1", "--zone", "us-west4-a"]).ok
    assert parse.read_slice(listed("us-west4-a")["fray-r2-a1"]) == parse.Reading("lost", "slice PREEMPTED")
    assert gcloud(command_lines.delete("fray-r2-a1", "us-west4-a")).ok
    assert "fray-r2-a1" not in listed("us-west4-a")


def test_a_quota_error_is_recognised_and_the_next_zone_succeeds(sim):
    zones = ["us-east1-d", "us-west4-a"]
    chosen = None
    for zone in zones:
        result = gcloud(command_lines.create(command_lines.SliceRequest("r3", 1, zone, "v4-8", "v", HOME_ID)))
        if result.ok:
            chosen = zone
            break
        assert parse.is_capacity_error(result.stderr), result.stderr
    assert chosen == "us-west4-a" and "fray-r3-a1" in listed("us-west4-a")


def test_queued_mode_waits_for_resources_then_provisions_its_node(sim):
    config = json.loads((sim / "config.json").read_text())
    # Long enough for a loaded machine to list it still waiting, short enough not to slow the suite.
    (sim / "config.json").write_text(json.dumps({**config, "queued_wait_sec": 4.0}))
    assert gcloud(command_lines.create(command_lines.SliceRequest("r4", 1, "us-west4-a", "v4-8", "v", HOME_ID, queued=True))).ok

    def queued() -> parse.QueuedResource:
        [resource] = parse.parse_queued(gcloud(command_lines.list_queued("us-west4-a")).stdout)
        return resource

    assert queued().node_ids == ("fray-r4-a1",) and queued().state == "WAITING_FOR_RESOURCES"
    assert "fray-r4-a1" not in listed("us-west4-a")  # no node before its resources are there
    wait_until(lambda: queued().state == "ACTIVE", timeout=30, what="the queued resource ACTIVE")
    node = listed("us-west4-a")["fray-r4-a1"]
    assert node.state == "READY" and node.queued_resource == "fray-r4-a1"
    # Deleting the queued resource (--force) takes its node with it.
    assert gcloud(command_lines.delete("fray-r4-a1", "us-west4-a", queued=True)).ok
    assert "fray-r4-a1" not in listed("us-west4-a") and not parse.parse_queued(
        gcloud(command_lines.list_queued("us-west4-a")).stdout)


def test_fifty_preempted_slices_are_deleted_and_recreated_in_parallel(sim):
    calls = CloudCalls(lambda argv, timeout: external.run(argv, timeout), workers=16, create_rate=1000)
    zone = "us-west4-a"
    calls.run_all([command_lines.create(command_lines.SliceRequest(f"s{i}", 1, zone, "v4-8", "v", HOME_ID)) for i in range(50)])
    calls.run_all([["gcloud", "sim", "preempt", f"fray-s{i}-a1", "--zone", zone] for i in range(50)])
    lost = [s for s in listed(zone).values() if parse.read_slice(s).phase == "lost"]
    assert len(lost) == 50
    results = calls.run_all([command_lines.delete(s.name, zone) for s in lost]
                            + [command_lines.create(command_lines.SliceRequest(s.run_id, s.attempt + 1, zone, "v4-8", "v", HOME_ID))
                               for s in lost])
    calls.close()
    assert all(r.ok for r in results), [r.describe() for r in results if not r.ok][:3]
    assert sorted(listed(zone)) == sorted(f"fray-s{i}-a2" for i in range(50))


def test_ssh_worker_all_starts_one_detached_wrapper_per_host_with_the_task_placement_gave_it(sim, tmp_path):
    # A stand-in interpreter that records what each host's wrapper was started with.
    fake_python = tmp_path / "python"
    fake_python.write_text("#!/bin/sh\n"
                           "while [ \"$1\" != --attempt-dir ]; do shift; done\n"
                           "env | grep -E '^(FRAY_|JAX_|TPU_WORKER_ID)' | sort > \"$2/host.env\"\n")
    fake_python.chmod(fake_python.stat().st_mode | stat.S_IXUSR)
    attempt_dir = tmp_path / "home" / "runs" / "r5" / "attempts" / "1"
    attempt_dir.mkdir(parents=True)
    request = SubmitRequest(key=AttemptKey("r5", 1), name="train", spec=RunSpec(args=["train.py"]),
                            home=tmp_path / "home", script=tmp_path / "train.sh", attempt_dir=attempt_dir,
                            checkpoint_dir=tmp_path / "ckpt")
    gcloud(command_lines.create(command_lines.SliceRequest("r5", 1, "us-west4-a", "v4-32", "v", HOME_ID)))
    wait_until(lambda: listed("us-west4-a")["fray-r5-a1"].state == "READY", what="READY")
    ips = listed("us-west4-a")["fray-r5-a1"].ips
    result = gcloud(command_lines.ssh_all("fray-r5-a1", "us-west4-a", launch.with_host0(launch.host_command(str(fake_python), request, (3, 2, 1, 0)), ips[0])))
    assert result.ok, result.describe()
    host_files = [attempt_dir / "host.env"] + [attempt_dir / "tasks" / str(i) / "host.env" for i in (1, 2, 3)]
    wait_until(lambda: all(f.exists() and f.read_text() for f in host_files), what="a wrapper on each of 4 hosts")
    for index, path in enumerate(host_files):
        env = dict(line.split("=", 1) for line in path.read_text().splitlines())
        assert env["FRAY_TASK_INDEX"] == env["JAX_PROCESS_ID"] == str(index)
        assert env["TPU_WORKER_ID"] == str(3 - index)  # the host placement gave task `index` (reversed here)
        assert env["FRAY_NUM_TASKS"] == env["JAX_NUM_PROCESSES"] == "4"
        assert env["JAX_COORDINATOR_ADDRESS"] == env["FRAY_COORDINATOR_ADDRESS"] == f"{ips[0]}:8476"


def test_each_host_has_its_own_disk_and_deleting_the_slice_powers_its_hosts_off(sim, tmp_path):
    shared = tmp_path / "shared"  # stands for FRAY_HOME: the one folder every host and the login node see
    shared.mkdir()
    gcloud(command_lines.create(command_lines.SliceRequest("r6", 1, "us-west4-a", "v4-32", "v", HOME_ID)))
    wait_until(lambda: listed("us-west4-a")["fray-r6-a1"].state == "READY", what="READY")
    command = (f'echo "$(pwd) $HOME $TMPDIR" > {shared}/host-$TPU_WORKER_ID; '
               f'nohup sleep 300 > /dev/null 2>&1 & echo $! > {shared}/pid-$TPU_WORKER_ID')
    assert gcloud(command_lines.ssh_all("fray-r6-a1", "us-west4-a", command)).ok
    disks = [(shared / f"host-{i}").read_text().split() for i in range(4)]
    for i, (cwd, home, tmp) in enumerate(disks):
        assert cwd == home == str(sim / "vms" / "us-west4-a" / "fray-r6-a1" / str(i)) and tmp == f"{home}/tmp"
    pids = [int((shared / f"pid-{i}").read_text()) for i in range(4)]
    assert all(Path(f"/proc/{pid}").exists() for pid in pids)
    assert gcloud(command_lines.delete("fray-r6-a1", "us-west4-a")).ok
    wait_until(lambda: not any(running(pid) for pid in pids), what="every host's processes gone with the slice")
