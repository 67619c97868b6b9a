"""Fencing on the real Slurm test cluster: a cut-off attempt, frozen and then thawed, writes nothing after its fence,
and its process tree - escaped processes included - is never alive beside the next attempt's.

The issue this answers: kill a node's slurmd so the run is resubmitted elsewhere, SIGSTOP the old wrapper,
SIGCONT it after attempt 2 started: the old wrapper rewrote its heartbeat 11 s after the fence, and its
workload kept rewriting progress.json. The test cluster's nodes are processes on this machine, so /proc shows
every node's processes (tests/slurm).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from conftest import running, wait_until
from fray.state.layout import Home
from tests.backends.local.test_process_tree import TagWatch
from test_slurm_backend import attempt, ended, events, slurm_home, submit, write  # noqa: F401 (slurm_home: autouse)
from fray.state import meta_file as run_meta, runs
from fray.wrapper import tags

pytestmark = pytest.mark.slow

# A Python workload reporting progress ten times a second, with a daemonized child that escapes its group.
TRAINS = """#FRAY --backend slurm --heartbeat-interval 0.5 --stop-grace 2 --backoff-base 0 --heartbeat-timeout 30
#SBATCH --time=5
import subprocess
import time
from fray import report
subprocess.Popen(["setsid", "sleep", "300"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL)
step = 0
while True:
    step += 1
    report.progress(step=step)
    time.sleep(0.1)
"""


def files_of(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.rglob("*") if p.is_file()}


def test_a_cut_off_frozen_then_thawed_attempt_writes_nothing_after_its_fence(home: Home, daemon, tmp_path,
                                                                              slurm_cluster):
    run_id = submit(home, write(tmp_path, "train.py", TRAINS), gpus=4)  # a whole h100 node: attempt 2 goes elsewhere
    paths = home.run(run_id)
    with TagWatch(home) as watch:
        first = wait_until(lambda: attempt(home, run_id, 1), timeout=30, what="attempt 1")
        started = wait_until(lambda: paths.attempt(1).progress.exists() and len(watch.alive(run_id, 1)) >= 2
                             and json.loads(paths.attempt(1).started.read_text()), what="attempt 1's workload")
        node = first["node"]
        os.kill(started["pid"], signal.SIGSTOP)  # the old wrapper freezes (a VM paused, a process stopped)
        slurm_cluster.kill_slurmd(node)  # Slurm loses the job; its processes live on
        try:
            wait_until(lambda: attempt(home, run_id, 2), timeout=60, what="attempt 2 on another node")
            closed = next(e for e in events(home, run_id) if e["kind"] == "attempt_ended" and e["attempt"] == 1)
            wait_until(lambda: not watch.alive(run_id, 1), timeout=10, what="attempt 1's whole tree to die")
            time.sleep(1.0)  # attempt 2 runs; the old wrapper stays frozen past its fence
            os.kill(started["pid"], signal.SIGCONT)
            wait_until(lambda: not running(started["pid"]), timeout=10, what="the thawed wrapper to exit")
        finally:
            if running(started["pid"]):
                os.kill(started["pid"], signal.SIGCONT)
            slurm_cluster.restart_slurmd(node)
        wait_until(lambda: paths.attempt(2).progress.exists(), timeout=30, what="attempt 2 to report progress")
        # A write whose fence check passed just before the close may land just after it, whole: allow 0.2 s.
        late = {name: round(mtime / 1e9 - closed["at"], 3) for name, (_size, mtime) in files_of(paths.attempt(1).dir).items()
                if mtime / 1e9 > closed["at"] + 0.2 and name not in ("stderr.log", "stdout.log")}
        assert not late, f"attempt 1 wrote after its fence (seconds after): {late}"
        assert not paths.attempt(1).exit.exists()
        runs.request(home, run_id, "stop")
        wait_until(lambda: ended(home, run_id), timeout=30, what="the stop")
        wait_until(lambda: not tags.tagged(str(home.root)), timeout=15, what="every process of the run to die")
    assert not watch.overlaps, watch.overlaps[:5]
    slurm_cluster.wait_node(lambda s: s.usable, node, timeout=30)


def test_a_live_slurm_run_whose_meta_json_is_overwritten_keeps_its_name_and_stops(home: Home, daemon, tmp_path,
                                                                                   slurm_cluster):
    from conftest import run_fray
    from test_slurm_backend import SERVE

    run_id = submit(home, write(tmp_path, "serve.sh", SERVE))
    wait_until(lambda: attempt(home, run_id, 1), timeout=30, what="attempt 1")
    started = wait_until(lambda: home.run(run_id).attempt(1).started.exists()
                         and json.loads(home.run(run_id).attempt(1).started.read_text()), what="attempt 1's workload")
    home.run(run_id).meta.write_text("[1,2]\n")
    shown = run_fray("status", run_id, "--json", home=home.root)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert json.loads(shown.stdout)["run"]["name"] == "serve"
    stop = run_fray("control", "stop", "serve", home=home.root)  # by its name
    assert stop.returncode == 0, stop.stderr
    # Read as fray's readers read it: meta.json was moved aside by the first reader, and until the daemon puts
    # its last good copy back, the copy is the run (fray.state.meta_file).
    meta = wait_until(lambda: (m := run_meta.read(home.run(run_id))[0]) is not None and m["phase"] == "ended" and m,
                      timeout=30, what="the stop")
    assert meta["end"]["status"] == "stopped_manual" and len(meta["attempts"]) == 1
    assert (ended(home, run_id) or {}).get("end") == meta["end"]  # the daemon that ended it wrote meta.json again
    wait_until(lambda: not running(started["pid"]) and not tags.tagged(str(home.root)), what="the job's processes to go")
    # The job leaves the queue once slurmd reports its end to slurmctld, a moment after its processes died.
    wait_until(lambda: f"fray-{run_id}-" not in slurm_cluster.run("squeue", "-h", "-o", "%j").stdout, timeout=30,
               what="the job to leave Slurm's queue")
