"""Benchmark: the Slurm backend against the real test cluster with 1,000 held jobs of ours.

Prints, measured in the same run on the same machine:
  - one cycle's `squeue` (one call for every run) against a per-run `squeue -j ID` loop over
    the same jobs: the ratio is the figure;
  - the daemon's CPU per cycle (its own plus its children's) with all those runs in flight;
  - node-fault recovery: from killing the slurmd of the node a run is on to that run running
    again on another node, with the timeouts used.

    bash tests/slurm/cluster.sh start
    python tests/bench/bench_slurm.py [--runs 1000] [--cycles 10]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from fray.state import runs, store  # noqa: E402
from fray.backends import external  # noqa: E402
from fray.backends.slurm.backend import SlurmBackend  # noqa: E402
from fray.backends.slurm.parse import SQUEUE_FORMAT  # noqa: E402
from fray.daemon.loop import Daemon  # noqa: E402
from fray.state.layout import Home  # noqa: E402
from tests.slurm.fixture import SLURMD_TIMEOUT_S, SlurmCluster, start_cluster  # noqa: E402

FAST = {"poll_interval_sec": 0.5, "min_snapshot_interval_sec": 0.0, "command_timeout_sec": 60, "sinfo_ttl_sec": 5}
HELD = "#!/bin/bash\n#FRAY --backend slurm\n#SBATCH --hold\ntrue\n"
SERVE = ("#!/bin/bash\n#FRAY --backend slurm --heartbeat-interval 0.5 --stop-grace 2 --backoff-base 0\n"
         "#FRAY --gpus 4\nwhile true; do sleep 0.1; done\n")


class Timed:
    """The real runner, remembering each call's wall time by command name."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = {}

    def __call__(self, argv, timeout) -> external.CommandResult:
        result = external.run(argv, timeout)
        self.seconds.setdefault(argv[0], []).append(result.seconds)
        return result


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:7.1f} ms (min {min(values) * 1000:.1f}, max {max(values) * 1000:.1f})"


def held_jobs(cluster: SlurmCluster, count: int, cycles: int, tmp: Path) -> None:
    home = Home(tmp / "held")
    store.ensure_home(home)
    script = tmp / "held.sh"
    script.write_text(HELD)
    for i in range(count):
        runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, name=f"held-{i}", workdir=str(tmp)))
    timed = Timed()
    daemon = Daemon(home, backends={"slurm": SlurmBackend(home, config=FAST, runner=timed)})
    started = time.perf_counter()
    daemon.cycle()
    print(f"submitted {count} held jobs with sbatch in {time.perf_counter() - started:.1f}s "
          f"({ms(timed.seconds['sbatch'])} each)")
    job_ids = [json.loads(home.run(r).meta.read_text())["attempts"][0]["backend_ref"]["job_id"] for r in home.run_ids()]
    try:
        walls, cpus = [], []
        for _ in range(cycles):
            cpu, wall = cpu_seconds(), time.perf_counter()
            daemon.cycle()
            walls.append(time.perf_counter() - wall)
            cpus.append(cpu_seconds() - cpu)
        one = timed.seconds["squeue"]
        print(f"one squeue for all {count} runs (per cycle)          {ms(one)}")
        print(f"daemon cycle with {count} runs in flight, wall        {ms(walls)}")
        print(f"daemon CPU per cycle (own + squeue), {count} runs     {ms(cpus)}")
        loop_started = time.perf_counter()
        for job_id in job_ids:
            external.run(["squeue", "--noheader", f"--jobs={job_id}", f"--Format={SQUEUE_FORMAT}"], 60)
        loop = time.perf_counter() - loop_started
        print(f"per-run loop: {count} x `squeue -j ID`                total {loop * 1000:9.1f} ms")
        print(f"ratio (per-run loop / one squeue)                     {loop / statistics.median(one):9.0f}x")
    finally:
        for start in range(0, len(job_ids), 500):
            cluster.run("scancel", *job_ids[start:start + 500], check=False)


def node_fault_recovery(cluster: SlurmCluster, tmp: Path) -> None:
    home = Home(tmp / "fault")
    store.ensure_home(home)
    home.config.write_text(json.dumps({"slurm": {**FAST, "min_snapshot_interval_sec": 0.3}}))
    script = tmp / "serve.sh"
    script.write_text(SERVE)
    env = {**os.environ, **cluster.env}
    daemon = subprocess.Popen([sys.executable, "-m", "fray.daemon", "--home", str(home.root)], env=env,
                              start_new_session=True)
    node = None
    try:
        run_id = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(tmp))).run_id

        def attempts() -> list[dict]:
            try:
                return json.loads(home.run(run_id).meta.read_text())["attempts"]
            except (OSError, ValueError):
                return []

        wait(lambda: attempts() and attempts()[0]["state"] == "running", 60)
        node = attempts()[0]["node"]
        killed = time.perf_counter()
        cluster.kill_slurmd(node)
        wait(lambda: len(attempts()) > 1 and attempts()[1]["state"] == "running", 120)
        recovered = time.perf_counter() - killed
        first, second = attempts()[0], attempts()[1]
        print(f"node fault: slurmd of {node} killed -> running on {second['node']} in {recovered:.1f}s "
              f"(attempt 1 ended: {first['cause']})")
        print(f"  timeouts: SlurmdTimeout={SLURMD_TIMEOUT_S}s (node DOWN -> NODE_FAIL), daemon poll "
              f"{FAST['poll_interval_sec']}s, squeue at most every 0.3s, heartbeat timeout 120s (not needed here)")
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=20)
        if node is not None:
            cluster.restart_slurmd(node)
            cluster.wait_node(lambda s: s.usable, node, timeout=60)
        ours = [line.split()[0] for line in cluster.run("squeue", "-h", "-o", "%i %j").stdout.splitlines()
                if "fray-" in line]
        if ours:
            cluster.run("scancel", *ours, check=False)


def wait(condition, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the benchmarked condition never came true")
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--cycles", type=int, default=10)
    args = parser.parse_args()
    cluster = start_cluster()
    os.environ.update(cluster.env)
    print(f"Slurm backend, real test cluster ({cluster.root}), Python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        held_jobs(cluster, args.runs, args.cycles, Path(tmp))
        node_fault_recovery(cluster, Path(tmp))


if __name__ == "__main__":
    main()
