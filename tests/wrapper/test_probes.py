"""Preflight probes through a real wrapper (`python -m fray.wrapper run ...`), on a node faked to order.

No GPU here: tests/fakes/nvidia-smi (a fake, reproducing the real output
formats) answers from a scenario file; TPU "devices" are files in tmp_path;
a fake torch module, written by the test, stands in for a broken CUDA. Every
probe.json and failure.json is validated against its schema.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, schema_validate, wait_until
from fray.wrapper import contract

FAKES = REPO / "tests" / "fakes"
A = "GPU-5e7f1c3a-1111-2222-3333-444455556666"
B = "GPU-7a4d2e3f-0000-1111-2222-333344445555"
MIG_0 = "MIG-c6d3e0f1-aaaa-bbbb-cccc-ddddeeeeffff"
TWO_GPUS = {"gpus": [{"name": "NVIDIA A100-SXM4-80GB", "uuid": A}, {"name": "NVIDIA A100-SXM4-80GB", "uuid": B}]}
MIG_NODE = {"gpus": [{"name": "NVIDIA A100-SXM4-80GB", "uuid": A, "mig": [{"profile": "3g.40gb", "uuid": MIG_0}]},
                     {"name": "NVIDIA A100-SXM4-80GB", "uuid": B}]}
WORKLOAD = "import os, pathlib; pathlib.Path(os.environ['FRAY_ATTEMPT_DIR'], 'ran').write_text('yes')\n"


class Node:
    """A wrapper attempt on a node whose nvidia-smi answers from `scenario`."""

    def __init__(self, tmp_path: Path, scenario: dict[str, Any] | None = None, pythonpath: list[Path] = ()) -> None:
        self.root = tmp_path
        self.dir = tmp_path / "attempt dir's; 1"
        self.script = tmp_path / "train.py"
        self.script.write_text(WORKLOAD)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("FRAY_") and k != "CUDA_VISIBLE_DEVICES"}
        self.env["PATH"] = f"{FAKES}{os.pathsep}{self.env.get('PATH', '')}"
        self.env["PYTHONPATH"] = os.pathsep.join([str(REPO), *map(str, pythonpath)])
        if scenario is not None:
            path = tmp_path / "scenario.json"
            path.write_text(json.dumps(scenario))
            self.env["FAKE_NVIDIA_SMI_SCENARIO"] = str(path)

    def argv(self, *options: str) -> list[str]:
        return [sys.executable, "-m", "fray.wrapper", "run", "--run-id", "r-probe", "--attempt", "1",
                "--attempt-dir", str(self.dir), "--script", str(self.script), "--home", str(self.root), *options]

    def run(self, *options: str, cuda_visible_devices: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        env = dict(self.env)
        if cuda_visible_devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices
        return subprocess.run(self.argv(*options), env=env, cwd=str(self.root), capture_output=True, text=True,
                              timeout=timeout)

    def probe(self) -> dict[str, Any]:
        document = json.loads((self.dir / contract.PROBE).read_text())
        schema_validate("probe", document)
        return document

    def statuses(self) -> dict[str, str]:
        return {p["name"]: p["status"] for p in self.probe()["probes"]}

    def entry(self, name: str) -> dict[str, Any]:
        return next(p for p in self.probe()["probes"] if p["name"] == name)

    def failure(self) -> dict[str, Any]:
        document = json.loads((self.dir / contract.FAILURE).read_text())
        schema_validate("failure", document)
        schema_validate("exit", json.loads((self.dir / contract.EXIT).read_text()))
        return document

    @property
    def workload_ran(self) -> bool:
        return (self.dir / "ran").exists()


def test_a_healthy_gpu_node_passes_and_the_workload_runs(tmp_path: Path) -> None:
    node = Node(tmp_path, TWO_GPUS)
    proc = node.run("--gpus", "2", cuda_visible_devices="0,1")
    assert proc.returncode == 0, proc.stderr
    assert node.workload_ran
    assert node.statuses() == {"node": "passed", "gpu": "passed", "mig": "passed", "trespassers": "passed",
                               "cuda": "skipped", "tpu": "skipped"}
    document = node.probe()
    assert document["ok"] is True and document["exit_code"] is None
    assert document["requested"] == {"gpus": 2, "tpu_devices": 0, "probes": None, "skip_probes": []}
    assert [g["uuid"] for g in node.entry("gpu")["data"]["gpus"]] == [A, B]
    # torch, cupy and numba are not installed here: the real "nothing to test with" path.
    assert node.entry("cuda")["detail"].startswith("no CUDA framework to test with: torch:")


def test_a_cpu_run_gets_no_gpu_probes(tmp_path: Path) -> None:
    node = Node(tmp_path, {"fail": True})  # a broken driver does not matter to a CPU run
    assert node.run().returncode == 0
    assert node.statuses()["node"] == "passed"
    assert node.entry("gpu") == {"name": "gpu", "status": "skipped", "seconds": 0.0, "detail": "the run asked for no GPUs"}


@pytest.mark.parametrize(
    ("scenario", "gpus", "visible", "probe", "detail"),
    [
        (TWO_GPUS, "3", None, "gpu", "nvidia-smi -L shows 2 GPU devices; the run asked for 3"),
        ({"fail": True}, "1", None, "gpu",
         "nvidia-smi -L exited with code 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"),
        (MIG_NODE, "1", "0", "mig", "names GPU 0, which is in MIG mode"),
        (TWO_GPUS, "2", "1,5", "mig", "CUDA_VISIBLE_DEVICES entry '5': nvidia-smi shows no GPU 5"),
        (TWO_GPUS, "2", "1", "mig", "gives CUDA 1 device; the run asked for 2"),
    ],
    ids=["fewer-gpus", "driver-gone", "mig-mode-gpu-whole", "container-mismatch", "too-few-visible"],
)
def test_a_bad_gpu_node_exits_42_before_the_workload(tmp_path: Path, scenario: dict[str, Any], gpus: str,
                                                     visible: str | None, probe: str, detail: str) -> None:
    node = Node(tmp_path, scenario)
    proc = node.run("--gpus", gpus, cuda_visible_devices=visible)
    assert proc.returncode == contract.EXIT_NODE_FAULT, proc.stderr
    assert not node.workload_ran
    assert node.entry(probe)["status"] == "failed" and detail in node.entry(probe)["detail"]
    assert node.probe()["ok"] is False and node.probe()["exit_code"] == 42
    failure = node.failure()
    assert failure["cause"] == "node_fault" and failure["exit_code"] == 42
    assert failure["message"].startswith(f"preflight probe {probe} failed: ")
    assert failure["workload_exit_code"] is None and failure["stderr_tail"] == []
    assert node.entry("cuda")["detail"] == f"not run: the {probe} probe failed first"


def test_a_mig_device_named_in_cuda_visible_devices_passes(tmp_path: Path) -> None:
    node = Node(tmp_path, MIG_NODE)
    assert node.run("--gpus", "2", cuda_visible_devices=f"{MIG_0},1").returncode == 0
    assert [d["mig_uuid"] for d in node.entry("mig")["data"]["visible"]] == [MIG_0, None]


def test_a_hung_nvidia_smi_is_a_node_fault_and_is_killed(tmp_path: Path) -> None:
    node = Node(tmp_path, {"hang": True})
    started = time.monotonic()
    proc = node.run("--gpus", "1", "--probe-timeout", "1")
    assert proc.returncode == contract.EXIT_NODE_FAULT
    assert time.monotonic() - started < 20
    assert node.entry("gpu")["status"] == "timeout" and "did not answer within" in node.entry("gpu")["detail"]
    assert node.failure()["message"].startswith("preflight probe gpu hung: ")
    assert not _fake_smi_processes(node), "the hung nvidia-smi was left running"


def _fake_smi_processes(node: Node) -> list[int]:
    """Fake nvidia-smi processes answering this test's scenario (only this test's own)."""
    needle = str(node.root / "scenario.json").encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"nvidia-smi" in (entry / "cmdline").read_bytes() and needle in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_a_stop_during_a_hung_probe_ends_the_attempt_at_once(tmp_path: Path) -> None:
    node = Node(tmp_path, {"hang": True})
    proc = subprocess.Popen(node.argv("--gpus", "1", "--probe-timeout", "60"), env=node.env, cwd=str(node.root),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: _fake_smi_processes(node), what="the fake nvidia-smi to hang")
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 128 + signal.SIGTERM
        assert time.monotonic() - sent < 10
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert node.failure()["cause"] == "terminated"
    assert node.entry("gpu")["status"] == "skipped" and node.entry("gpu")["detail"].startswith("interrupted")
    wait_until(lambda: not _fake_smi_processes(node), what="the hung nvidia-smi to be killed")
    assert not node.workload_ran


def test_foreign_gpu_processes_exit_43_and_are_left_running(tmp_path: Path) -> None:
    # A process of someone else's (here: one this test started, not the wrapper's) computing on GPU 1.
    stranger = subprocess.Popen(["sleep", "120"])
    try:
        scenario = {**TWO_GPUS, "processes": [
            {"pid": stranger.pid, "name": "python", "gpu_uuid": B, "used_mib": 30000},
            {"pid": stranger.pid + 1, "name": "other", "gpu_uuid": A, "used_mib": None},  # not on our GPU
        ]}
        node = Node(tmp_path, scenario)
        proc = node.run("--gpus", "1", cuda_visible_devices="1")
        assert proc.returncode == contract.EXIT_FOREIGN_GPU_PROCESSES, proc.stderr
        entry = node.entry("trespassers")
        assert entry["status"] == "failed"
        assert f"pid {stranger.pid} (python) on GPU 1 using 30000 MiB" in entry["detail"]
        assert [p["pid"] for p in entry["data"]["foreign"]] == [stranger.pid]
        assert node.failure()["cause"] == "foreign_gpu_processes"
        assert stranger.poll() is None, "fray must never kill a process it does not own"
        assert not node.workload_ran
    finally:
        stranger.kill()
        stranger.wait()


def test_skip_probes_and_probes_none(tmp_path: Path) -> None:
    stranger_scenario = {**TWO_GPUS, "processes": [{"pid": 1, "name": "init?", "gpu_uuid": A, "used_mib": 1}]}
    node = Node(tmp_path, stranger_scenario)
    assert node.run("--gpus", "1", "--skip-probes", "trespassers", cuda_visible_devices="0").returncode == 0
    assert node.entry("trespassers")["detail"] == "skipped by --skip-probes"
    assert node.probe()["requested"]["skip_probes"] == ["trespassers"]
    (tmp_path / "b").mkdir()
    broken = Node(tmp_path / "b", {"fail": True})
    assert broken.run("--gpus", "1", "--probes", "none").returncode == 0
    assert set(broken.statuses().values()) == {"skipped"} and broken.workload_ran


FAKE_TORCH = '''\
"""FAKE torch, written by tests/wrapper/test_probes.py: just enough of the API the CUDA smoke test uses.
It is not PyTorch. FAKE_TORCH_MODE=fail makes synchronize raise the error a broken GPU gives."""
import os


class version:
    cuda = "12.1"


class _Tensor:
    def __init__(self, value):
        self.value = value

    def __mul__(self, factor):
        return _Tensor([v * factor for v in self.value])

    def sum(self):
        return _Tensor(sum(self.value))

    def item(self):
        return self.value


def ones(n, device=None):
    return _Tensor([1.0] * n)


class cuda:
    @staticmethod
    def is_available():
        return True

    @staticmethod
    def device_count():
        return 2

    @staticmethod
    def synchronize(device=None):
        if os.environ.get("FAKE_TORCH_MODE") == "fail" and device == "cuda:1":
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
'''


@pytest.mark.parametrize("mode", ["fail", "pass"])
def test_cuda_smoke_test_with_a_fake_torch(tmp_path: Path, mode: str) -> None:
    fake = tmp_path / "fake-site"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text(FAKE_TORCH)
    node = Node(tmp_path, TWO_GPUS, pythonpath=[fake])
    node.env["FAKE_TORCH_MODE"] = mode
    proc = node.run("--gpus", "2", cuda_visible_devices="0,1")
    entry = node.entry("cuda")
    assert entry["data"]["framework"] == "torch"
    if mode == "pass":
        assert proc.returncode == 0 and entry["status"] == "passed" and entry["data"]["devices"] == 2
        return
    assert proc.returncode == contract.EXIT_CUDA_FAILURE
    assert entry["status"] == "failed"
    assert entry["detail"] == "torch: RuntimeError: CUDA error: an illegal memory access was encountered"
    failure = node.failure()
    assert failure["cause"] == "cuda_failure" and failure["exit_code"] == 44
    assert not node.workload_ran


def test_tpu_devices_held_by_a_stale_process_exit_42(tmp_path: Path) -> None:
    devices = tmp_path / "dev"
    devices.mkdir()
    for n in range(4):
        (devices / f"accel{n}").write_text("")
    node = Node(tmp_path)
    glob = str(devices / "accel*")
    stale = subprocess.Popen(["sleep", "120"], stdin=open(devices / "accel2"))  # a leftover of a preempted job
    try:
        proc = node.run("--tpu-devices", "4", "--tpu-device-glob", glob)
        assert proc.returncode == contract.EXIT_NODE_FAULT, proc.stderr
        entry = node.entry("tpu")
        assert entry["status"] == "failed" and f"{devices / 'accel2'} by pid {stale.pid}" in entry["detail"]
        assert node.failure()["cause"] == "node_fault"
        assert stale.poll() is None, "the holder is reported, never killed"
    finally:
        stale.kill()
        stale.wait()
    assert node.run("--tpu-devices", "4", "--tpu-device-glob", glob).returncode == 0
    assert node.entry("tpu")["status"] == "passed"
    assert node.entry("tpu")["data"]["jax"]["importable"] is False  # jax is not installed here
    assert node.run("--tpu-devices", "8", "--tpu-device-glob", glob).returncode == contract.EXIT_NODE_FAULT
    assert "4 accelerator device file(s)" in node.entry("tpu")["detail"] and "expected 8" in node.entry("tpu")["detail"]


def test_a_full_disk_is_a_node_fault(tmp_path: Path) -> None:
    node = Node(tmp_path)
    assert node.run("--min-free-disk", str(10**9)).returncode == contract.EXIT_NODE_FAULT
    assert "less than --min-free-disk" in node.entry("node")["detail"]
    assert node.failure()["message"].startswith("preflight probe node failed: ")


def test_probes_do_not_delay_the_first_heartbeat(tmp_path: Path) -> None:
    node = Node(tmp_path, {"hang": True})
    # The hung probe holds the wrapper for its whole timeout: 4 s, ample for a first heartbeat that needs none.
    proc = subprocess.Popen(node.argv("--gpus", "1", "--probe-timeout", "4"), env=node.env, cwd=str(node.root),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: (node.dir / contract.HEARTBEAT).exists(), timeout=10, what="the first heartbeat")
        assert not (node.dir / contract.PROBE).exists(), "the heartbeat comes before the (hanging) probes"
        assert proc.wait(timeout=30) == contract.EXIT_NODE_FAULT
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

