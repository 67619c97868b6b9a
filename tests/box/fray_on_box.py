"""fray on the cluster in a box: a FRAY_HOME in the shared folder, its Slurm backend on the box's Slurm,
and the real `fray` command line run on any host, for scenario tests across hosts.

    home = FrayHome.create(box, "scenario")           # config.json: fast Slurm polling
    script = home.project("proj", {"train.py": TRAIN}) / "train.py"
    run = home.submit(box.login("login-a"), script)   # `fray submit --json` on login-a
    home.wait_ended(box.login("login-b"), run["run_id"])
    home.where(run["run_id"])                         # {"n2": [pids]}: which hosts run its processes
    home.clean()                                      # its daemons, workloads and Slurm jobs: gone

Every command runs inside its host, so it sees what that host sees: its own client's view of the home
(late, through its cache), its own /proc, its own clock. Assertions about files read the server's side
(`home.server`), where no cache is in the way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from tests.box import procs
from tests.box.box import Box
from tests.box.host import Host
from tests.conftest import _kill_everything_of, wait_until

# The Slurm backend's timings for a test cluster (tests/backends/slurm use the same).
FAST_SLURM = {"poll_interval_sec": 0.5, "min_snapshot_interval_sec": 0.3, "command_timeout_sec": 20, "sinfo_ttl_sec": 2}
HOSTILE = "fray home's; dir"  # as tests/conftest.py's `home`: quotes and a semicolon travel through sbatch


@dataclass(frozen=True)
class FrayHome:
    box: Box
    path: Path  # as every host sees it

    @classmethod
    def create(cls, box: Box, name: str, config: Mapping[str, Any] | None = None) -> "FrayHome":
        """A fresh FRAY_HOME at box.mount/NAME/<a hostile name>, with a config.json for the box's Slurm."""
        top = box.shared / name
        shutil.rmtree(top, ignore_errors=True)
        server = top / HOSTILE
        server.mkdir(parents=True, mode=0o700)
        (server / "config.json").write_text(json.dumps(config or {"slurm": FAST_SLURM}) + "\n")
        return cls(box, box.seen_by_hosts(server))

    @property
    def server(self) -> Path:
        """The home as the file server stores it."""
        return self.box.on_server(self.path)

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """FRAY_HOME, and this checkout's fray first on PATH (the machine's disk is every host's)."""
        return {"FRAY_HOME": str(self.path), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                **(extra or {})}

    def fray(self, host: Host, *args: str, timeout: float = 60, check: bool = False,
             cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """`fray ARGS` on `host`, as a user there types it."""
        return host.run(["fray", *args], env=self.env(), cwd=cwd or self.path.parent, timeout=timeout, check=check)

    def fray_json(self, host: Host, *args: str, timeout: float = 60) -> Any:
        return json.loads(self.fray(host, *args, "--json", timeout=timeout, check=True).stdout)

    def project(self, name: str, files: Mapping[str, str]) -> Path:
        """A project folder next to the home (the user's shared home folder), as the hosts see it."""
        folder = self.server.parent / name
        folder.mkdir(parents=True, exist_ok=True)
        for relative, text in files.items():
            (folder / relative).write_text(text)
        return self.box.seen_by_hosts(folder)

    def submit(self, host: Host, script: Path, *options: str) -> dict[str, Any]:
        """`fray submit --json SCRIPT OPTIONS` on `host` from the script's folder (schemas/cli-submit.json)."""
        proc = self.fray(host, "submit", "--json", *options, str(script), cwd=script.parent, check=True)
        return json.loads(proc.stdout)

    def status(self, host: Host, run_id: str) -> dict[str, Any]:
        """`fray status RUN --json` on `host` (schemas/cli-status.json)."""
        return self.fray_json(host, "status", run_id)

    def wait_ended(self, host: Host, run_id: str, timeout: float = 60) -> dict[str, Any]:
        """Poll `fray status` on `host` until it shows the run ended; that status."""
        return wait_until(lambda: (shown := self.status(host, run_id))["run"]["phase"] == "ended" and shown,
                          timeout=timeout, interval=0.3, what=f"{host.name} to show run {run_id} ended")

    def meta(self, run_id: str) -> dict[str, Any]:
        """The run's meta.json as the server has it."""
        return json.loads((self.server / "runs" / run_id / "meta.json").read_text())

    def where(self, run_id: str) -> dict[str, list[int]]:
        """Host name -> the root-namespace pids there of the run's tagged processes (its workloads)."""
        from fray.wrapper import tags

        found: dict[str, list[int]] = {}
        hosts = {host.namespace: host.name for host in self.box.hosts.values() if host.alive()}
        for pid, tag in tags.tagged(str(self.path)).items():
            if tag.run_id == run_id:
                found.setdefault(hosts.get(procs.namespace(pid) or "", "(the machine)"), []).append(pid)
        return found

    def clean(self, timeout: float = 30) -> None:
        """Kill every daemon and workload of this home on every host, and cancel its Slurm jobs."""
        runs = [p.name for p in (self.server / "runs").iterdir()] if (self.server / "runs").exists() else []
        queue = self.box.slurm.run("squeue", "-h", "-o", "%i|%j", check=False).stdout.splitlines()
        ours = [line.split("|")[0] for line in queue if any(f"fray-{run}-" in line for run in runs)]
        if ours:
            self.box.slurm.run("scancel", *ours, check=False)
        for host in self.box.hosts.values():  # a frozen process cannot die until it runs again
            host.thaw()
        _kill_everything_of(self.path)  # the machine's /proc sees every host's processes
        deadline = time.monotonic() + timeout
        wait_until(lambda: not any(f"fray-{run}-" in line for line in self.box.slurm.run(
            "squeue", "-h", "-o", "%j", check=False).stdout.splitlines() for run in runs),
                   timeout=max(1.0, deadline - time.monotonic()), what="the home's Slurm jobs to leave the queue")
