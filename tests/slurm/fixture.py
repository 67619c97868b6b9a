"""Start/stop the one-machine Slurm test cluster (tests/slurm/cluster.sh) from Python.

No pytest needed here; the pytest fixture lives in tests/slurm/plugin.py.

    from tests.slurm.fixture import start_cluster
    c = start_cluster()              # reuses a running cluster, else starts one
    c.run("sbatch", "--parsable", "-p", "h100", "--wrap", "true")
    c.kill_slurmd("n3"); c.wait_node(lambda s: s.not_responding, "n3", timeout=30)
    c.restart_slurmd("n3"); c.wait_node(lambda s: s.usable, "n3", timeout=30)
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, Mapping, Sequence

SCRIPT = Path(__file__).resolve().parent / "cluster.sh"
DEFAULT_DIR = Path(os.environ.get("FRAY_SLURM_DIR", "/tmp/fray-slurm"))
NODES = ("n1", "n2", "n3", "n4")
SLURMD_TIMEOUT_S = 5  # keep in sync with cluster.sh

# Job states after which a job never runs again.
TERMINAL_JOB_STATES = frozenset(
    {
        "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
        "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT",
    }
)


class SlurmClusterError(RuntimeError):
    pass


def slurm_installed() -> bool:
    """True when the daemons and client commands this cluster needs are on PATH."""
    extra = os.pathsep + "/usr/sbin:/sbin"
    path = os.environ.get("PATH", "") + extra
    return all(shutil.which(b, path=path) for b in ("slurmctld", "slurmd", "sbatch", "munged"))


def _root_prefix() -> list[str]:
    return [] if os.geteuid() == 0 else ["sudo", "-n"]


@dataclasses.dataclass(frozen=True)
class NodeState:
    """One node as `scontrol show node` reports it."""

    name: str
    state: str  # e.g. "IDLE", "IDLE+NOT_RESPONDING", "DOWN+NOT_RESPONDING", "MIXED"
    reason: str

    @property
    def flags(self) -> frozenset[str]:
        return frozenset(self.state.split("+"))

    @property
    def base(self) -> str:
        return self.state.split("+", 1)[0]

    @property
    def not_responding(self) -> bool:
        return "NOT_RESPONDING" in self.flags

    @property
    def down(self) -> bool:
        return self.base == "DOWN"

    @property
    def usable(self) -> bool:
        """Up and schedulable: idle/mixed/allocated, responding, not drained."""
        bad = {"NOT_RESPONDING", "DRAIN", "DRAINING", "DRAINED", "FAIL", "MAINTENANCE", "REBOOT_REQUESTED"}
        return self.base in {"IDLE", "MIXED", "ALLOCATED", "COMPLETING"} and not (self.flags & bad)


@dataclasses.dataclass(frozen=True)
class SlurmCluster:
    """A running test cluster. `env` holds what a Slurm client needs (SLURM_CONF)."""

    root: Path
    conf: Path
    env: Mapping[str, str]
    started_here: bool = False
    nodes: tuple[str, ...] = NODES

    # -- client commands ---------------------------------------------------

    def environ(self) -> dict[str, str]:
        """os.environ plus `env`: pass as env= to subprocesses that call Slurm."""
        return {**os.environ, **self.env}

    def run(self, *args: str, check: bool = True, timeout: float = 30, **kw) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command (sinfo, sbatch, ...) against this cluster."""
        kw.setdefault("cwd", self.root / "jobs")
        proc = subprocess.run(
            list(args), env=self.environ(), capture_output=True, text=True, timeout=timeout, **kw
        )
        if check and proc.returncode != 0:
            raise SlurmClusterError(
                f"{' '.join(args)} exited {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
            )
        return proc

    def sbatch(self, *args: str) -> str:
        """Submit with `sbatch --parsable ARGS`; returns the job id."""
        out = self.run("sbatch", "--parsable", *args).stdout.strip()
        return out.split(";", 1)[0]

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job -o` as a dict ({} once the job has aged out, MinJobAge=30 s)."""
        proc = self.run("scontrol", "show", "job", "-o", job_id, check=False)
        if proc.returncode != 0:
            return {}
        return _parse_kv(proc.stdout)

    def wait_job(self, job_id: str, timeout: float = 60, poll: float = 0.25) -> dict[str, str]:
        """Poll until the job reaches a terminal state; returns its scontrol record."""
        deadline = time.monotonic() + timeout
        info: dict[str, str] = {}
        while time.monotonic() < deadline:
            info = self.job(job_id)
            if info.get("JobState") in TERMINAL_JOB_STATES:
                return info
            time.sleep(poll)
        raise SlurmClusterError(f"job {job_id} not finished after {timeout}s: {info}")

    def node(self, name: str) -> NodeState:
        kv = _parse_kv(self.run("scontrol", "show", "node", "-o", name).stdout)
        return NodeState(name=name, state=kv.get("State", ""), reason=kv.get("Reason", ""))

    def wait_node(
        self, pred: Callable[[NodeState], bool], name: str, timeout: float = 30, poll: float = 0.25
    ) -> NodeState:
        """Poll `scontrol show node NAME` until pred(state) holds; returns that state."""
        deadline = time.monotonic() + timeout
        st = self.node(name)
        while not pred(st):
            if time.monotonic() >= deadline:
                raise SlurmClusterError(f"node {name} still {st.state!r} (reason {st.reason!r}) after {timeout}s")
            time.sleep(poll)
            st = self.node(name)
        return st

    # -- node faults -----------------------------------------------------------

    def slurmd_pid(self, name: str) -> int | None:
        try:
            pid = int((self.root / "run" / f"slurmd-{name}.pid").read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        # "pid (comm) S ..." -- a zombie (Z) is dead already.
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        state = stat[stat.rindex(")") + 2 :].split()[0]
        return pid if comm == "slurmd" and state not in ("Z", "X") else None

    def kill_slurmd(self, name: str, sig: int = signal.SIGKILL, timeout: float = 10) -> None:
        """Simulate a node fault: kill that node's slurmd (default SIGKILL) and wait till it is gone."""
        pid = self.slurmd_pid(name)
        if pid is None:
            raise SlurmClusterError(f"slurmd for {name} is not running")
        subprocess.run([*_root_prefix(), "kill", f"-{int(sig)}", str(pid)], check=True)
        deadline = time.monotonic() + timeout
        while self.slurmd_pid(name) is not None:
            if time.monotonic() >= deadline:
                raise SlurmClusterError(f"slurmd for {name} (pid {pid}) did not exit")
            time.sleep(0.05)

    def signal(self, pid: int, sig: int) -> None:
        """Send `sig` to one of the cluster's root-owned processes (a slurmstepd: freeze a job's step daemon)."""
        subprocess.run([*_root_prefix(), "kill", f"-{int(sig)}", str(pid)], check=True)

    def restart_slurmd(self, name: str) -> None:
        """Start that node's slurmd again (it re-registers; ReturnToService=2 brings it back)."""
        if self.slurmd_pid(name) is not None:
            return
        subprocess.run(
            [*_root_prefix(), "env", f"FRAY_SLURM_DIR={self.root}", f"SLURM_CONF={self.conf}",
             "slurmd", "-N", name, "-f", str(self.conf)],
            check=True, capture_output=True, text=True, timeout=30,
        )


def _parse_kv(text: str) -> dict[str, str]:
    """Parse one `scontrol show ... -o` record: Key=Value tokens; a token without
    '=' continues the previous value (e.g. "Reason=Not responding [root@...]")."""
    out: dict[str, str] = {}
    key = None
    for tok in text.split():
        k, sep, v = tok.partition("=")
        if sep and k:
            key = k
            out[k] = v
        elif key is not None:
            out[key] += " " + tok
    return out


def _script(cmd: str, root: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), cmd, str(root)], capture_output=True, text=True, timeout=timeout
    )


def cluster_running(root: Path | str = DEFAULT_DIR) -> bool:
    """True when this DIR's slurmctld is alive (cheap; does not ask it anything)."""
    root = Path(root)
    try:
        pid = int((root / "run" / "slurmctld.pid").read_text().strip())
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return False
    return "(slurmctld)" in stat and stat[stat.rindex(")") + 2 :].split()[0] not in ("Z", "X")


def start_cluster(root: Path | str = DEFAULT_DIR, timeout: float = 120) -> SlurmCluster:
    """Start the cluster in ROOT (or reuse the one running there) and wait until it works.

    `started_here` tells whether this call had to start slurmctld (then the
    caller owns it and should stop it)."""
    if not slurm_installed():
        raise SlurmClusterError("real Slurm not installed: run `bash tests/slurm/cluster.sh install`")
    root = Path(root)
    was_running = cluster_running(root)
    proc = _script("start", root, timeout)
    if proc.returncode != 0:
        raise SlurmClusterError(f"cluster.sh start {root} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    root = root.resolve()
    conf = root / "etc" / "slurm.conf"
    return SlurmCluster(root=root, conf=conf, env={"SLURM_CONF": str(conf)}, started_here=not was_running)


def stop_cluster(root: Path | str = DEFAULT_DIR, timeout: float = 60) -> None:
    proc = _script("stop", Path(root), timeout)
    if proc.returncode != 0:
        raise SlurmClusterError(f"cluster.sh stop {root} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")


__all__: Sequence[str] = (
    "NODES", "SLURMD_TIMEOUT_S", "NodeState", "SlurmCluster", "SlurmClusterError",
    "cluster_running", "slurm_installed", "start_cluster", "stop_cluster",
)
