"""The one-machine Slurm test cluster itself works: partitions, GRES, jobs, node faults.

Uses the real cluster from tests/slurm (fixture `slurm_cluster`); see tests/slurm/README.md.
"""

from __future__ import annotations

import pytest

from tests.slurm.fixture import SLURMD_TIMEOUT_S, SlurmCluster

pytestmark = pytest.mark.slow


def test_partitions_and_gres(slurm_cluster: SlurmCluster) -> None:
    out = slurm_cluster.run("sinfo", "-h", "-N", "-o", "%P %N %c %m %G").stdout
    rows = {tuple(line.split()) for line in out.splitlines() if line.strip()}
    a100 = {(n, "4", "2000", "gpu:a100:2") for n in ("n1", "n2")}
    h100 = {(n, "4", "2000", "gpu:h100:4") for n in ("n3", "n4")}
    # The default partition is printed with a trailing '*'.
    assert rows == (
        {("cpu*", *r) for r in a100 | h100} | {("a100", *r) for r in a100} | {("h100", *r) for r in h100}
    ), out
    # Summary view: what a backend reading `sinfo -o %P %G` would see.
    summary = slurm_cluster.run("sinfo", "-h", "-o", "%P %G").stdout.split("\n")
    assert "a100 gpu:a100:2" in summary and "h100 gpu:h100:4" in summary, summary


def test_gpu_job_runs_on_h100_node(slurm_cluster: SlurmCluster) -> None:
    out = slurm_cluster.root / "jobs" / "h100-gres.out"
    out.unlink(missing_ok=True)
    job = slurm_cluster.sbatch(
        "-p", "h100", "--gres=gpu:h100:2", "-t", "1", "-J", "gres-test", "-o", str(out),
        "--wrap", 'echo "node=$SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES"',
    )
    info = slurm_cluster.wait_job(job, timeout=30)
    assert info["JobState"] == "COMPLETED", info
    assert info["ExitCode"] == "0:0", info
    assert info["NodeList"] in ("n3", "n4"), info
    assert "gpu:h100:2" in info.get("TresPerNode", ""), info
    text = out.read_text()
    assert f"node={info['NodeList']} " in text
    gpus = text.split("gpus=", 1)[1].strip().split(",")
    assert len(gpus) == 2 and set(gpus) <= {"0", "1", "2", "3"}, text


def test_gpu_request_beyond_a_node_is_rejected(slurm_cluster: SlurmCluster) -> None:
    proc = slurm_cluster.run("sbatch", "-p", "a100", "--gres=gpu:a100:3", "--wrap", "true", check=False)
    assert proc.returncode != 0
    assert "Requested node configuration is not available" in proc.stderr


def test_killed_slurmd_shows_node_down_and_comes_back(slurm_cluster: SlurmCluster) -> None:
    node = "n3"
    slurm_cluster.wait_node(lambda s: s.usable, node, timeout=30)
    slurm_cluster.kill_slurmd(node)
    try:
        # The controller pings every ~SlurmdTimeout/3 and flags the node
        # NOT_RESPONDING once a ping fails after SlurmdTimeout (~5.5 s measured);
        # DOWN follows a few seconds later.
        st = slurm_cluster.wait_node(lambda s: s.not_responding or s.down, node, timeout=SLURMD_TIMEOUT_S + 15)
        assert st.not_responding or st.down
        sinfo_state = slurm_cluster.run("sinfo", "-h", "-N", "-n", node, "-o", "%t").stdout.split()[0]
        assert sinfo_state.endswith("*") or sinfo_state.startswith("down"), sinfo_state
    finally:
        slurm_cluster.restart_slurmd(node)
    # ReturnToService=2: the node re-registers and is schedulable again.
    st = slurm_cluster.wait_node(lambda s: s.usable, node, timeout=30)
    assert st.base == "IDLE"
    job = slurm_cluster.sbatch("-p", "h100", "-w", node, "-t", "1", "-o", "/dev/null", "--wrap", "true")
    assert slurm_cluster.wait_job(job, timeout=30)["JobState"] == "COMPLETED"
