"""The probes' pure parts and small seams: nvidia-smi parsers, CUDA_VISIBLE_DEVICES, probe
selection, the command runner's deadline, TPU device holders, the node probe."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fray.wrapper import contract
from fray.wrapper.probes import nvidia, node, preflight, runner, tpu
from fray.wrapper.probes.probe import FAILED, PASSED, SKIPPED, TIMEOUT, Finding, ProbeContext

A = "GPU-5e7f1c3a-1111-2222-3333-444455556666"
B = "GPU-7a4d2e3f-0000-1111-2222-333344445555"
MIG_0 = "MIG-c6d3e0f1-aaaa-bbbb-cccc-ddddeeeeffff"
MIG_1 = "MIG-11111111-aaaa-bbbb-cccc-ddddeeeeffff"
# As `nvidia-smi -L` prints it (R470+): GPU 0 in MIG mode with two devices, GPU 1 whole.
LISTING = f"""\
GPU 0: NVIDIA A100-SXM4-80GB (UUID: {A})
  MIG 3g.40gb     Device  0: (UUID: {MIG_0})
  MIG 1g.10gb     Device  1: (UUID: {MIG_1})
GPU 1: NVIDIA A100-SXM4-80GB (UUID: {B})
"""
# Drivers R450/R460 name MIG devices after their GPU, GPU instance and compute instance.
OLD_DRIVER = """\
GPU 0: A100-SXM4-40GB (UUID: GPU-e91edf3b-b297-37c1-a2a7-7601c3238fa2)
  MIG 1g.5gb Device 0: (UUID: MIG-GPU-e91edf3b-b297-37c1-a2a7-7601c3238fa2/7/0)
"""


def test_gpu_list_with_mig_devices() -> None:
    listing = nvidia.parse_gpu_list(LISTING)
    assert [(g.index, g.name, g.uuid) for g in listing.gpus] == [(0, "NVIDIA A100-SXM4-80GB", A), (1, "NVIDIA A100-SXM4-80GB", B)]
    assert [(m.index, m.profile, m.uuid) for m in listing.gpus[0].migs] == [(0, "3g.40gb", MIG_0), (1, "1g.10gb", MIG_1)]
    assert listing.device_count == 3  # two MIG devices and one whole GPU
    assert listing.unrecognized == ()


def test_gpu_list_old_driver_mig_names_and_noise() -> None:
    listing = nvidia.parse_gpu_list(OLD_DRIVER + "No devices were found\n\n")
    assert listing.gpus[0].migs[0].uuid == "MIG-GPU-e91edf3b-b297-37c1-a2a7-7601c3238fa2/7/0"
    assert listing.unrecognized == ("No devices were found",)
    assert nvidia.parse_gpu_list("").gpus == ()


def test_compute_apps_from_both_ends() -> None:
    text = f"4242, python, {B}, 1024\n77, my, odd, name, {A}, [N/A]\nnot a line\n\n"
    apps, unreadable = nvidia.parse_compute_apps(text)
    assert apps == [nvidia.ComputeApp(4242, "python", B, 1024), nvidia.ComputeApp(77, "my, odd, name", A, None)]
    assert unreadable == ["not a line"]


@pytest.mark.parametrize(
    ("declared", "devices", "problem"),
    [
        (None, [MIG_0, MIG_1, "1"], None),  # unset: every GPU, a MIG-mode one as its devices
        ("1", ["1"], None),
        (f"{MIG_1},{B}", [MIG_1, B], None),
        ("GPU-7a4d", ["GPU-7a4d"], None),  # a unique prefix, as CUDA accepts
        ("", [], None),
        ("3", [], "nvidia-smi shows no GPU 3 (it shows 2 GPUs)"),
        ("0", [], "names GPU 0, which is in MIG mode"),
        ("GPU-", [], "names 2 devices (give more of the UUID)"),
        ("MIG-ffff", [], "names no device nvidia-smi shows"),
        ("1,1", ["1"], "names GPU 1 twice"),
        ("NoDevFiles", [], "is neither a GPU index nor a GPU or MIG UUID"),
    ],
)
def test_cuda_visible_devices_against_nvidia_smi(declared: str | None, devices: list[str], problem: str | None) -> None:
    seen = nvidia.visible_devices(declared, nvidia.parse_gpu_list(LISTING))
    assert [d.entry for d in seen.devices] == devices
    if problem is None:
        assert seen.problems == []
    else:
        assert len(seen.problems) == 1 and problem in seen.problems[0]


def test_old_driver_mig_names_resolve() -> None:
    listing = nvidia.parse_gpu_list(OLD_DRIVER)
    seen = nvidia.visible_devices("MIG-GPU-e91edf3b-b297-37c1-a2a7-7601c3238fa2/7/0", listing)
    assert seen.problems == [] and seen.devices[0].mig is not None


def test_probe_selection_follows_the_resources_then_the_options() -> None:
    def running(*args) -> list[str]:
        return [name for name, why in preflight.plan(*args) if why is None]

    assert running(0, 0, None, ()) == ["node"]
    assert running(2, 0, None, ()) == ["node", "gpu", "mig", "trespassers", "cuda"]
    assert running(0, 4, None, ()) == ["node", "tpu"]
    assert running(2, 0, None, ("trespassers", "node")) == ["gpu", "mig", "cuda"]
    assert running(0, 0, ("gpu",), ()) == ["gpu"]
    assert running(8, 0, (), ()) == []  # --probes none
    reasons = dict(preflight.plan(0, 0, None, ("node",)))
    assert reasons["node"] == "skipped by --skip-probes" and reasons["cuda"] == "the run asked for no GPUs"


def test_runner_kills_a_hung_command_and_its_children_at_the_deadline(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    started = time.monotonic()
    result = runner.run(["bash", "-c", f"echo partial; sleep 60 & echo $! > '{marker}'; wait"], timeout=2)
    assert result.timed_out and not result.ok and time.monotonic() - started < 10
    assert result.stdout == "partial\n"
    assert "did not answer within" in result.describe()
    child = int(marker.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not Path(f"/proc/{child}").exists(), "the hung command's child outlived the timeout"


def test_runner_reports_a_missing_program_and_a_failure() -> None:
    missing = runner.run(["fray-no-such-program"], timeout=5)
    assert missing.exit_code is None and "not found on PATH" in missing.describe()
    failed = runner.run([sys.executable, "-c", "import sys; print('driver gone'); sys.exit(9)"], timeout=10)
    assert failed.exit_code == 9 and failed.describe().endswith("exited with code 9: driver gone")


def test_a_hung_probe_is_a_timeout_and_a_crashed_one_is_not_the_nodes_fault() -> None:
    def hangs(ctx: ProbeContext, deadline: float) -> Finding:
        time.sleep(30)
        return Finding(PASSED, "never")

    def crashes(ctx: ProbeContext, deadline: float) -> Finding:
        raise KeyError("bug")

    logged: list[str] = []
    original = dict(preflight.PROBES)
    preflight.PROBES.update({"gpu": hangs, "node": crashes})
    preflight.JOIN_MARGIN_SEC, margin = 0.1, preflight.JOIN_MARGIN_SEC
    try:  # 2 s: long enough for the crashing probe to finish on a slow machine, far short of the hang
        entries, failure = preflight.run(ProbeContext(), [("node", None), ("gpu", None), ("cuda", None)], 2.0, logged.append)
    finally:
        preflight.PROBES.update(original)
        preflight.JOIN_MARGIN_SEC = margin
    assert [e["status"] for e in entries] == [SKIPPED, TIMEOUT, SKIPPED]
    assert "a bug in fray" in entries[0]["detail"] and any("KeyError" in line for line in logged)
    assert entries[2]["detail"] == "not run: the gpu probe failed first"
    assert failure is not None and failure.exit_code == contract.EXIT_NODE_FAULT and failure.cause == "node_fault"


def test_tpu_holders_are_found_through_proc(tmp_path: Path) -> None:
    devices = [tmp_path / "accel 0", tmp_path / "accel'1"]
    for device in devices:
        device.write_text("")
    holder = subprocess.Popen(["sleep", "60"], stdin=open(devices[1]))
    try:
        held, _ = tpu.holders([str(d) for d in devices], exclude={os.getpid()})
        assert held == {str(devices[1]): [holder.pid]}
        assert tpu.holders([str(d) for d in devices], exclude={os.getpid(), holder.pid})[0] == {}
    finally:
        holder.kill()
        holder.wait()
    assert tpu.device_files((str(tmp_path / "accel*"),)) == sorted(str(d) for d in devices)


def test_node_probe_checks_home_and_free_disk(tmp_path: Path) -> None:
    ok = node.basics(ProbeContext(home=str(tmp_path), min_free_disk_mb=1), time.monotonic() + 10)
    assert ok.status == PASSED and ok.data["home_writable"] is True
    assert not [p for p in tmp_path.iterdir()], "the probe's test file is removed"
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    bad = node.basics(ProbeContext(home=str(not_a_dir), min_free_disk_mb=1), time.monotonic() + 10)
    assert bad.status == FAILED and "FRAY_HOME is not usable" in bad.detail
    full = node.basics(ProbeContext(home=str(tmp_path), min_free_disk_mb=10**9), time.monotonic() + 10)
    assert full.status == FAILED and "less than --min-free-disk 1000000000 MB" in full.detail


@pytest.mark.parametrize(
    ("exit_code", "cause", "valid"),
    [(42, "node_fault", True), (43, "foreign_gpu_processes", True), (44, "cuda_failure", True),
     (50, "launch_failed", True), (143, "terminated", True), (43, "node_fault", False), (50, "cuda_failure", False),
     (42, "terminated", False), (0, "workload_failure", False)],
)
def test_failure_json_ties_each_exit_code_to_its_causes(exit_code: int, cause: str, valid: bool) -> None:
    import jsonschema

    from conftest import schema_validate
    from fray.core import validation

    document = {"run_id": "r", "attempt": 1, "exit_code": exit_code, "cause": cause, "message": "m", "host": "h",
                "started_at": 1.0, "ended_at": 2.0}
    assert (validation.errors("failure", document) == []) is valid
    if valid:
        schema_validate("failure", document)
    else:
        with pytest.raises(jsonschema.ValidationError):
            schema_validate("failure", document)
