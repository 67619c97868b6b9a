"""Probes and the health command end to end: real daemon, local backend, wrapper, fake nvidia-smi.

A node that fails a probe is a node fault: the attempt ends before the
workload starts, the node is blacklisted, the node budget pays. A health
command that keeps failing holds the heartbeat, so the daemon sees a stall.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import REPO, schema_validate, wait_until
from fray.state import runs, store
from fray.state.layout import Home

pytestmark = pytest.mark.slow

GPU = "GPU-7a4d2e3f-0000-1111-2222-333344445555"


@pytest.fixture
def fake_gpu_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH finds tests/fakes/nvidia-smi (one A100) for the daemon, its backend and the wrappers it starts."""
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"gpus": [{"name": "NVIDIA A100-SXM4-80GB", "uuid": GPU}]}))
    monkeypatch.setenv("PATH", f"{REPO / 'tests' / 'fakes'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_SCENARIO", str(scenario))
    return scenario


def meta_of(home: Home, run_id: str) -> dict:
    return json.loads(home.run(run_id).meta.read_text())


def submit(home: Home, tmp_path: Path, body: str, **overrides) -> str:
    script = tmp_path / "job.sh"
    script.write_text(body)
    return runs.create_run(home, runs.SubmitOptions(script=script, overrides=overrides, workdir=str(tmp_path))).run_id


def test_a_trespassed_gpu_is_a_node_fault_and_the_workload_never_starts(home: Home, fake_gpu_node: Path, daemon,
                                                                       tmp_path: Path) -> None:
    # Someone else's process (pid 1 is never ours) computes on the only GPU.
    fake_gpu_node.write_text(json.dumps({
        "gpus": [{"name": "NVIDIA A100-SXM4-80GB", "uuid": GPU}],
        "processes": [{"pid": 1, "name": "python", "gpu_uuid": GPU, "used_mib": 70000}],
    }))
    run_id = submit(home, tmp_path, "#!/bin/bash\ntouch \"$FRAY_ATTEMPT_DIR/ran\"\n", gpus=1,
                    max_retries_preemption=0)
    meta = wait_until(lambda: (m := meta_of(home, run_id))["phase"] == "ended" and m, timeout=30, what="the run to end")
    schema_validate("meta", meta)
    [attempt] = meta["attempts"]
    assert attempt["exit_code"] == 43 and attempt["cause"] == "node_fault"
    assert "preflight probe trespassers failed" in attempt["detail"]
    assert meta["counters"] == {"workload_failures": 0, "node_failures": 1, "consecutive_fast_failures": 1, "since": None}
    assert meta["end"]["status"] == "failed"
    files = home.run(run_id).attempt(1)
    assert not (files.dir / "ran").exists()
    probe = json.loads(files.probe.read_text())
    schema_validate("probe", probe)
    assert probe["requested"]["gpus"] == 1 and probe["exit_code"] == 43
    failure = json.loads(files.failure.read_text())
    schema_validate("failure", failure)
    assert failure["cause"] == "foreign_gpu_processes"
    banned = wait_until(lambda: store.read_json(home.blacklist, "blacklist"), what="the node to be blacklisted")
    [(node, entry)] = banned["nodes"].items()
    assert node == attempt["node"] and entry["source_run"] == run_id and "trespassers" in entry["reason"]


def test_a_healthy_gpu_run_gets_its_probes_and_its_gpu(home: Home, fake_gpu_node: Path, daemon, tmp_path: Path) -> None:
    run_id = submit(home, tmp_path, "#!/bin/bash\necho \"gpus=$CUDA_VISIBLE_DEVICES\"\n", gpus=1)
    meta = wait_until(lambda: (m := meta_of(home, run_id))["phase"] == "ended" and m, timeout=30, what="the run")
    assert meta["end"]["status"] == "completed_success"
    files = home.run(run_id).attempt(1)
    assert files.stdout.read_text() == "gpus=0\n"
    statuses = {p["name"]: p["status"] for p in json.loads(files.probe.read_text())["probes"]}
    assert statuses == {"node": "passed", "gpu": "passed", "mig": "passed", "trespassers": "passed",
                        "cuda": "skipped", "tpu": "skipped"}


HEALTH = """#!/bin/bash
#FRAY --health-cmd 'test -e "$FRAY_ATTEMPT_DIR/healthy"' --health-interval 0.3 --health-retries 2
#FRAY --heartbeat-interval 0.2 --heartbeat-timeout 2 --startup-grace 0 --stop-grace 2 --backoff-base 0
# Attempt 1 never becomes healthy; later ones do.
if [ "$FRAY_ATTEMPT" != 1 ]; then touch "$FRAY_ATTEMPT_DIR/healthy"; fi
trap 'exit 0' TERM
while true; do sleep 0.05; done
"""


def test_a_failing_health_command_is_a_heartbeat_stall(home: Home, daemon, tmp_path: Path) -> None:
    run_id = submit(home, tmp_path, HEALTH)
    def first_ended() -> dict | None:
        meta = meta_of(home, run_id)
        return meta if meta["attempts"] and meta["attempts"][0]["state"] == "ended" else None

    meta = wait_until(first_ended, timeout=40, what="the stall to end attempt 1")
    assert meta["attempts"][0]["cause"] == "heartbeat_stall"
    assert meta["counters"]["node_failures"] == 1
    health = json.loads(home.run(run_id).attempt(1).health.read_text())
    schema_validate("health", health)
    assert health["state"] == "unhealthy" and health["heartbeat_held"] is True
    banned = wait_until(lambda: store.read_json(home.blacklist, "blacklist"), what="the node to be suspected")
    assert next(iter(banned["nodes"].values()))["reason"].startswith("heartbeat_stall")
    second = home.run(run_id).attempt(2).health
    wait_until(lambda: second.exists() and json.loads(second.read_text())["state"] == "healthy", timeout=20,
               what="a healthy attempt 2")
    runs.request(home, run_id, "stop")
    wait_until(lambda: meta_of(home, run_id)["phase"] == "ended", what="the stop")
