"""The TPU backend's pure pieces: accelerator table, gcloud JSON reading, command lines, parallel calls."""

from __future__ import annotations

import json
import threading
import time

import pytest

from fray.backends.external import CommandResult
from fray.backends.tpu import command_lines, hosts, parse
from fray.backends.tpu.calls import CloudCalls, RateLimit
from fray.core.tpu_topology import shape

# One node as `gcloud compute tpus tpu-vm list --format=json` prints it (TPU API v2 Node).
NODE = {
    "name": "projects/p1/locations/us-west4-a/nodes/fray-r1-a2",
    "acceleratorType": "v5litepod-16", "state": "READY", "health": "HEALTHY",
    "networkEndpoints": [{"ipAddress": f"10.0.0.{i}", "port": 8470} for i in range(2, 6)],
    "schedulingConfig": {"spot": True}, "labels": {"fray-run": "r1", "fray-attempt": "2"},
}


@pytest.mark.parametrize("accel,chips,hosts", [
    ("v4-32", 16, 4), ("v4-8", 4, 1), ("v5litepod-16", 16, 4), ("v5litepod-8", 8, 1),
    ("v5p-8", 4, 1), ("v5p-128", 64, 16), ("v6e-256", 256, 64), ("v2-8", 4, 1), ("v3-32", 16, 4),
])
def test_hosts_and_chips_follow_the_documented_table(accel, chips, hosts):
    assert (shape(accel).chips, shape(accel).hosts) == (chips, hosts)


@pytest.mark.parametrize("bad", ["v9-8", "v4-3", "tpu", "v5litepod-18"])
def test_unknown_accelerator_types_are_refused(bad):
    with pytest.raises(ValueError):
        shape(bad)


def test_a_listed_node_becomes_a_slice_with_run_attempt_and_one_ip_per_host():
    [node] = parse.parse_nodes(json.dumps([NODE]))
    assert (node.name, node.zone, node.run_id, node.attempt, node.spot) == ("fray-r1-a2", "us-west4-a", "r1", 2, True)
    assert node.ips == ("10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5")
    assert parse.read_slice(node).phase == "ready"


@pytest.mark.parametrize("state,health,phase", [
    ("CREATING", None, "pending"), ("REPAIRING", None, "pending"), ("READY", "TIMEOUT", "lost"),
    ("READY", "UNHEALTHY_MAINTENANCE", "lost"), ("PREEMPTED", None, "lost"), ("TERMINATED", None, "lost"),
    ("HIDDEN", None, "lost"), ("STOPPED", None, "lost"), ("UNKNOWN", None, "lost"),
])
def test_documented_states_are_read_as_pending_ready_or_lost(state, health, phase):
    [node] = parse.parse_nodes(json.dumps([dict(NODE, state=state, health=health)]))
    assert parse.read_slice(node).phase == phase


def test_every_documented_node_state_has_a_reading():
    documented = {"CREATING", "READY", "RESTARTING", "REIMAGING", "DELETING", "REPAIRING", "STOPPED", "STOPPING",
                  "STARTING", "PREEMPTED", "TERMINATED", "HIDING", "HIDDEN", "UNHIDING", "UNKNOWN"}
    assert documented == parse.NODE_STATES


def test_queued_resources_are_read_from_state_state():
    text = json.dumps([{"name": "projects/p/locations/z1/queuedResources/q1",
                        "tpu": {"nodeSpec": [{"nodeId": "fray-r1-a1"}]},
                        "state": {"state": "WAITING_FOR_RESOURCES"}}])
    [queued] = parse.parse_queued(text)
    assert (queued.name, queued.zone, queued.node_ids) == ("q1", "z1", ("fray-r1-a1",))
    assert parse.read_queued(queued).phase == "pending"
    assert parse.read_queued(parse.QueuedResource("q", "z", "FAILED", ())).phase == "lost"


def test_quota_and_capacity_errors_are_recognised():
    assert parse.is_capacity_error("ERROR: (gcloud.compute.tpus.tpu-vm.create) RESOURCE_EXHAUSTED: Quota ...")
    assert parse.is_capacity_error("There is insufficient capacity in zone")
    assert not parse.is_capacity_error("ERROR: argument --zone: expected one argument")


def test_create_is_async_labelled_and_named_by_run_and_attempt():
    argv = command_lines.create(command_lines.SliceRequest("Run_7", 3, "us-west4-a", "v5litepod-16", "v2-alpha-tpuv5-lite",
                                                 "0123456789abcdef", provisioning="spot"))
    assert argv[:6] == ["gcloud", "compute", "tpus", "tpu-vm", "create", "fray-run-7-a3"]
    assert {"--async", "--spot", "--format=json"} <= set(argv)
    assert argv[argv.index("--labels") + 1] == "fray-run=run_7,fray-attempt=3,fray-home=0123456789abcdef"
    queued = command_lines.create(command_lines.SliceRequest("r", 1, "z", "v4-8", "v", "h", queued=True))
    assert queued[3:5] == ["queued-resources", "create"] and queued[queued.index("--node-id") + 1] == "fray-r-a1"


def test_slice_names_stay_valid_node_ids():
    name = command_lines.slice_name("X" * 100, 12)
    assert len(name) <= 63 and name.endswith("-a12") and name[0].isalpha()


def _slow_runner(log: list, delay: float):
    def run(argv, timeout):
        log.append(time.monotonic())
        time.sleep(delay)  # a slow cloud, not synchronisation
        return CommandResult(tuple(argv), 0, "", "", False, delay)
    return run


def test_a_batch_of_fifty_calls_costs_about_one_latency_not_fifty():
    started: list = []
    calls = CloudCalls(_slow_runner(started, 0.2), workers=50, create_rate=1000)
    t0 = time.monotonic()
    results = calls.run_all([command_lines.delete(f"n{i}", "z") for i in range(50)])
    elapsed = time.monotonic() - t0
    calls.close()
    assert len(results) == 50 and all(r.ok for r in results)
    assert elapsed < 2.0, f"50 calls took {elapsed:.2f}s: they ran serially"


def test_concurrency_is_bounded():
    running, peak, lock = [0], [0], threading.Lock()

    def run(argv, timeout):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1
        return CommandResult(tuple(argv), 0, "", "", False, 0.0)

    calls = CloudCalls(run, workers=4)
    calls.run_all([["gcloud", "x", str(i)] for i in range(20)])
    calls.close()
    assert peak[0] <= 4


def test_creates_are_spaced_by_the_rate_limit():
    now = [0.0]
    slept: list = []
    limit = RateLimit(10.0, clock=lambda: now[0], sleep=slept.append)
    for _ in range(5):
        limit.wait()
    assert slept == pytest.approx([0.1, 0.2, 0.3, 0.4])


def test_the_wrapper_on_each_host_checks_for_that_hosts_share_of_the_chips(tmp_path):
    from fray.backends.protocol import AttemptKey, SubmitRequest
    from fray.backends.wrapper_command import wrapper_argv
    from fray.core.model import RunSpec

    spec = RunSpec(backend="tpu", tpu="v4-32", zones=["z"], runtime_version="v", args=["x"])
    request = SubmitRequest(AttemptKey("r", 1), "r", spec, tmp_path, tmp_path / "s", tmp_path / "a", tmp_path / "c")
    argv = wrapper_argv("python", request)
    assert argv[argv.index("--tpu-devices") + 1] == "4"


@pytest.mark.parametrize("records,cause,detail", [
    ([hosts.HostRecord(1, 99.0, None), hosts.HostRecord(2, 98.0, None)], None, None),
    ([hosts.HostRecord(1, 99.0, None), hosts.HostRecord(2, 80.0, None)], "preempted", "host 2 of 4: no heartbeat for 20s (timeout 10s)"),
    ([hosts.HostRecord(1, 80.0, 0)], None, None),  # finished before host 0: not lost
    ([hosts.HostRecord(3, 99.0, 50)], "workload_failure", "host 3 of 4 exited 50"),
    ([hosts.HostRecord(1, 99.0, 42)], "node_fault", "host 1 of 4 exited 42"),
    ([hosts.HostRecord(1, 99.0, 137)], "preempted", "host 1 of 4 exited 137"),
])
def test_a_slice_is_as_alive_as_its_least_alive_other_host(records, cause, detail):
    found = hosts.verdict(records, 4, launched_at=0.0, now=100.0, timeout_sec=10.0, startup_grace_sec=10.0)
    assert (found.cause, found.detail) == (cause, detail) if cause else found is None


def test_a_host_that_never_reports_is_lost_only_after_grace_and_timeout_from_the_launch():
    silent = [hosts.HostRecord(1, None, None)]
    assert hosts.verdict(silent, 2, launched_at=0.0, now=19.0, timeout_sec=10.0, startup_grace_sec=10.0) is None
    late = hosts.verdict(silent, 2, launched_at=0.0, now=21.0, timeout_sec=10.0, startup_grace_sec=10.0)
    assert late is not None and late.detail == "host 1 of 2 never reported in 21s after the launch"
