"""Benchmark: from a wrapper's death, or its attempt's fence, to its whole process tree's - on each backend.

The bound docs/state.md states (its Fencing section), and docs/performance.md sums up.

A workload whose tree escapes its process group three ways (`setsid cmd &`, a
double-forked daemon, `cmd &`) runs on the local backend, on the real Slurm
test cluster (tests/slurm) and on the TPU simulator's hosts (tests/fakes/gcloud).
Times are taken by scanning /proc every 2 ms for the processes tagged with the
attempt. Each backend is measured five ways:

  with the daemon     a real daemon serves the run. The wrapper is SIGKILLed (as
                      the OOM killer would). On this one-machine Slurm cluster
                      and simulator the daemon's sweeper sees the "nodes'"
                      processes, which it cannot on a real cluster: so also
  alone               the daemon is stopped before the kill; only what runs on
                      the node acts (parent-death signal, the guardian, and on
                      Slurm whatever slurmstepd kills as the job ends);
  fence alone         the daemon is stopped; the bench closes the attempt in
                      meta.json as the daemon does; the wrapper's fence thread
                      kills its tree (--heartbeat-interval 0.5 s);
  the daemon's sweeper alone
                      as "with the daemon", but the attempt's guardian is
                      SIGKILLed first: the sweeper's own bound (on Slurm and
                      TPU only because this cluster is one machine);
  baseline            as "alone", but the attempt's guardian is SIGKILLed first:
                      what was left before the guardian existed (the escaped
                      processes live until a sweep: at most --survival seconds
                      are waited here).

    python tests/bench/bench_fence.py [--backends local,slurm,tpu] [--repeats 3] [--survival 3]

Slurm needs the test cluster (`bash tests/slurm/cluster.sh start`; FRAY_SLURM_DIR
and FRAY_SLURM_PORT are honoured), TPU only the simulator in this repository.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from fray.state import meta_file, runs, store
from fray.state.layout import Home
from fray.wrapper import tags

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))
from _common import report  # noqa: E402

ESCAPING = """#!/bin/bash
#FRAY --heartbeat-interval 0.5 --heartbeat-timeout 5 --stop-grace 1 --backoff-base 0 --startup-grace 0
#SBATCH --time=5
setsid sleep 300 </dev/null >/dev/null 2>&1 &
( setsid sleep 301 </dev/null >/dev/null 2>&1 & )
sleep 302 &
while true; do sleep 0.2; done
"""
TREE = 4  # the workload and its three sleeps
ZONE = "us-west4-a"


def wait_for(predicate: Callable[[], object], timeout: float = 60.0, interval: float = 0.002, what: str = "it"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"waited {timeout:g}s for {what}")


class Bench:
    """One FRAY_HOME of one backend, its daemon (started and stopped at will) and its runs."""

    def __init__(self, root: Path, backend: str) -> None:
        self.home = Home(root / "home")
        self.backend = backend
        self.script = root / "tree.sh"
        self.script.write_text(ESCAPING)
        self.overrides: dict = {"backend": backend}
        store.ensure_home(self.home)
        if backend == "slurm":
            self.home.config.write_text(json.dumps({"slurm": {"poll_interval_sec": 0.5, "min_snapshot_interval_sec": 0.3,
                                                              "sinfo_ttl_sec": 2}}))
        elif backend == "tpu":
            self.home.config.write_text(json.dumps({"tpu": {"poll_interval_sec": 0.3, "zones": [ZONE]}}))
            self.overrides.update(tpu="v4-8", zones=[ZONE], runtime_version="tpu-ubuntu2204-base", spot=True,
                                  skip_probes=["tpu"])
        self.daemon: subprocess.Popen[bytes] | None = None

    def start_daemon(self) -> None:
        self.daemon = subprocess.Popen([sys.executable, "-m", "fray.daemon", "--home", str(self.home.root)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        pid = self.daemon.pid
        wait_for(lambda: self.home.daemon_lease.exists() and json.loads(self.home.daemon_lease.read_text())["pid"] == pid,
                 interval=0.02, what="the daemon's lease")

    def stop_daemon(self) -> None:
        if self.daemon is not None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(30)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()
            self.daemon = None

    def alive(self, run_id: str) -> list[int]:
        return [pid for pid, tag in tags.tagged(str(self.home.root)).items() if (tag.run_id, tag.attempt) == (run_id, 1)]

    def start_run(self) -> tuple[str, dict]:
        """A run whose attempt 1 runs with its whole tree; its started.json."""
        run_id = runs.create_run(self.home, runs.SubmitOptions(script=self.script, overrides=self.overrides,
                                                               workdir=str(self.script.parent))).run_id
        paths = self.home.run(run_id)
        wait_for(lambda: paths.attempt(1).started.exists() and len(self.alive(run_id)) >= TREE, interval=0.02,
                 what="attempt 1 and its escaped tree")
        return run_id, json.loads(paths.attempt(1).started.read_text())

    def end_run(self, run_id: str) -> None:
        """Stop the run through the daemon and wait until nothing of it is left."""
        if self.daemon is None:
            self.start_daemon()
        runs.request(self.home, run_id, "stop")
        wait_for(lambda: json.loads(self.home.run(run_id).meta.read_text())["phase"] == "ended", interval=0.05,
                 what="the run to end")
        wait_for(lambda: not tags.tagged(str(self.home.root)), timeout=20, interval=0.05, what="its processes to go")

    def fenced_at(self, run_id: str) -> float | None:
        """When the daemon closed attempt 1 (its attempt_ended event), None while it has not."""
        events = [json.loads(line) for line in self.home.run(run_id).events.read_text().splitlines()]
        return next((e["at"] for e in events if e["kind"] == "attempt_ended" and e["attempt"] == 1), None)


def dead(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except OSError:
        return True


def guardian_of(run_id: str) -> int:
    """The guardian of the run's attempt 1: `python -m fray.wrapper.guardian FD RUN_ID 1 ...`."""
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as handle:
                    argv = handle.read().split(b"\0")
            except OSError:
                continue
            if b"fray.wrapper.guardian" in argv and argv[argv.index(b"fray.wrapper.guardian") + 2:][:2] == [
                    run_id.encode(), b"1"]:
                return int(name)
    raise LookupError(f"no guardian for run {run_id}")


def killed_wrapper(bench: Bench, daemon: bool, guardian: bool, survival: float) -> dict[str, float]:
    """SIGKILL attempt 1's wrapper; seconds from the kill to its workload's death and its whole tree's."""
    bench.start_daemon()
    run_id, started = bench.start_run()
    if not daemon:
        bench.stop_daemon()
    if not guardian:
        os.kill(guardian_of(run_id), signal.SIGKILL)
    killed = time.time()
    os.kill(started["pid"], signal.SIGKILL)
    wait_for(lambda: dead(started["workload_pid"]), what="the workload to die")
    times = {"kill -> workload dead": time.time() - killed}
    try:
        wait_for(lambda: not bench.alive(run_id), timeout=60 if guardian or daemon else survival, what="the tree to die")
        times["kill -> whole tree dead"] = time.time() - killed
    except TimeoutError:
        times["escaped processes alive after the wait"] = len(bench.alive(run_id))
    if daemon:
        times["kill -> fence (the daemon closes the attempt)"] = wait_for(lambda: bench.fenced_at(run_id),
                                                                         interval=0.05, what="the close") - killed
    bench.end_run(run_id)
    bench.stop_daemon()
    return times


def fenced_alone(bench: Bench) -> dict[str, float]:
    """Close attempt 1 in meta.json as the daemon does, with no daemon: seconds until its whole tree is dead."""
    bench.start_daemon()
    run_id, started = bench.start_run()
    bench.stop_daemon()
    paths = bench.home.run(run_id)
    meta = json.loads(paths.meta.read_text())
    meta["attempts"][0].update(state="ended", cause="heartbeat_stall", ended_at=time.time())
    meta["phase"] = "queued"
    closed = time.time()
    meta_file.write(paths, meta)
    wait_for(lambda: not bench.alive(run_id), what="the fenced tree to die")
    times = {"fence -> whole tree dead": time.time() - closed}
    wait_for(lambda: dead(started["pid"]), what="the fenced wrapper to exit")
    bench.end_run(run_id)
    bench.stop_daemon()
    return times


def measure(bench: Bench, repeats: int, survival: float) -> None:
    ways: dict[str, Callable[[], dict[str, float]]] = {
        "with the daemon (its sweeper sees this machine's 'nodes')": lambda: killed_wrapper(bench, True, True, survival),
        "alone (daemon stopped): what acts on a real node": lambda: killed_wrapper(bench, False, True, survival),
        "fence alone (daemon stopped, attempt closed in meta.json)": lambda: fenced_alone(bench),
        "the daemon's sweeper alone (guardian SIGKILLed first)": lambda: killed_wrapper(bench, True, False, survival),
        "baseline: alone, the guardian SIGKILLed first": lambda: killed_wrapper(bench, False, False, survival),
    }
    for label, way in ways.items():
        samples: dict[str, list[float]] = {}
        for _ in range(repeats):
            for name, value in way().items():
                samples.setdefault(name, []).append(value)
        print(f"{bench.backend}, {label}:")
        for name, values in samples.items():
            if name.startswith("escaped"):
                print(f"  {name:<50} {values} (in {len(values)} of {repeats} runs)")
            else:
                report(f"  {name}", values)


def reach(backend: str, root: Path) -> None:
    """Make `backend` reachable from this process and its children (the Slurm cluster is started if need be)."""
    if backend == "slurm":
        from tests.slurm.fixture import DEFAULT_DIR, start_cluster

        cluster = start_cluster(DEFAULT_DIR)
        os.environ.update(cluster.env)
    elif backend == "tpu":
        state = root / "gcloud-state"
        state.mkdir()
        (state / "config.json").write_text(json.dumps({"ready_after_sec": 0.3}))
        os.environ["FRAY_GCLOUD_SIM"] = str(state)
        os.environ["PATH"] = f"{REPO / 'tests' / 'fakes' / 'gcloud'}{os.pathsep}{os.environ['PATH']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="local,slurm,tpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--survival", type=float, default=3.0, help="seconds the baseline waits for escaped processes")
    args = parser.parse_args()
    for backend in args.backends.split(","):
        with tempfile.TemporaryDirectory(prefix=f"fray-bench-fence-{backend}-") as tmp:
            reach(backend, Path(tmp))
            bench = Bench(Path(tmp), backend)
            try:
                measure(bench, args.repeats, args.survival)
            finally:
                bench.stop_daemon()
                for pid, tag in tags.tagged(str(bench.home.root)).items():
                    tags.kill(pid, tag)


if __name__ == "__main__":
    main()
