"""Each state file corrupted five ways under a live run on the real Slurm test cluster, then `fray control stop`.

One Slurm job serves the whole module (a job per case would cost a submission
and a start each). For every file the run, its daemon and its readers use -
meta.json and its last good copy, control.json, the attempt's started.json,
progress.json and heartbeat, events.jsonl, and the home's nodes.json,
daemon.json and blacklist.json - five damages in turn: emptied, cut short, one
byte changed, binary garbage, JSON of the wrong shape (`[1,2]`, the issue's).
After each: whoever reads the file first moves an invalid document aside (the
daemon puts meta.json back from its copy), `fray status` keeps the run's name
and lists what was moved aside, the daemon keeps cycling, and the attempt runs
on - the wrapper's fence on the node is not tripped by one lost record (for
meta.json the daemon is frozen for two heartbeats, so that the job side reads
the damaged file, not the daemon's repair), so the run never gets a second
attempt. Last, with every file damaged at once (but
meta.json's copy: both lost is the one case where the attempt stops itself),
`fray control stop` still stops the job. The local backend's version, with
arbitrary bytes from hypothesis, is tests/state/test_corrupt_files.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from conftest import _kill_everything_of, run_fray, running, wait_until
from fray.ops import views
from fray.state import runs, store
from fray.state.layout import Home
from fray.wrapper import tags
from tests.state import test_corrupt_files
from tests.state.test_corrupt_files import aside, is_valid
from tests.backends.local.test_process_tree import TagWatch
from test_slurm_backend import FAST

pytestmark = pytest.mark.slow

SERVES = """#FRAY --backend slurm --heartbeat-interval 0.5 --heartbeat-timeout 1h --stop-grace 2 --backoff-base 0
#SBATCH --time=10
import subprocess
import time
from fray import report
subprocess.Popen(["setsid", "sleep", "600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL)
step = 0
while True:
    step += 1
    report.progress(step=step)
    time.sleep(0.2)
"""

# file -> (its schema, where it lives: the run's folder, the attempt's, or the home)
FILES = {
    "meta.json": ("meta", "run"),
    "meta.last-good.json": ("meta", "run"),
    "control.json": ("control", "run"),
    "events.jsonl": (None, "run"),
    "started.json": ("started", "attempt"),
    "progress.json": ("progress", "attempt"),
    "heartbeat": (None, "attempt"),
    "nodes.json": ("nodes", "home"),
    "daemon.json": ("daemon", "home"),
    "blacklist.json": ("blacklist", "home"),
}


def _one_byte_changed(good: bytes) -> bytes:
    at = good.find(b'"', len(good) // 2)
    at = at if at >= 0 else len(good) // 2
    return good[:at] + b"\x00" + good[at + 1:] if good else b"\x00"


WAYS: dict[str, Callable[[bytes], bytes]] = {
    "emptied": lambda good: b"",
    "cut short": lambda good: good[:len(good) // 2] or b"{",
    "one byte changed": _one_byte_changed,
    "binary garbage": lambda good: b"\xff\xfe\x00 garbage {[",
    "wrong shape": lambda good: b"[1,2]\n",
}


@dataclass
class Served(test_corrupt_files.Served):
    files: ClassVar[dict[str, tuple[str | None, str]]] = FILES
    watch: TagWatch | None = None

    def attempts(self) -> list[dict]:
        return json.loads(self.home.run(self.run_id).meta_copy.read_bytes())["attempts"]

    def row(self) -> dict:
        """The run as `fray list` and `fray status` show it (their views, which must never raise)."""
        assert [r["run_id"] for r in views.list_view(self.home)["runs"]].count(self.run_id) == 1
        return views.status_view(self.home, self.run_id)["run"]


@pytest.fixture(scope="module")
def served(slurm_cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("corrupt-slurm")
    home = Home(base / "fray home's; dir")
    store.ensure_home(home)
    home.config.write_text(json.dumps({"slurm": {**FAST, "poll_interval_sec": 0.2}}))
    daemon = subprocess.Popen([sys.executable, "-m", "fray.daemon", "--home", str(home.root)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    script = base / "serve.py"
    script.write_text(SERVES)
    run_id = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(base))).run_id
    try:
        with TagWatch(home) as watch:
            served = Served(home, daemon, run_id, watch=watch)
            wait_until(lambda: served.path("progress.json").exists() and served.attempts()[-1]["state"] == "running"
                       and served.row()["status"] == "healthy_running", timeout=60, what="the Slurm run to serve")
            yield served
    finally:
        daemon.kill()
        daemon.wait()
        jobs = slurm_cluster.run("squeue", "-h", "-o", "%i|%j").stdout.splitlines()
        ours = [line.split("|")[0] for line in jobs if f"fray-{run_id}-" in line]
        if ours:
            slurm_cluster.run("scancel", *ours, check=False)
        _kill_everything_of(home.root)


def job_side_reads(served: Served) -> None:
    """Leave the damaged meta.json to the job side alone for two heartbeats - the wrapper's fence reads it once
    per beat, the workload's report.progress before each write - by freezing the daemon, which would otherwise
    move it aside and restore it within one of its cycles."""
    os.kill(served.daemon.pid, signal.SIGSTOP)
    try:
        beat = served.path("heartbeat")
        for _ in range(2):
            last = beat.stat().st_mtime_ns
            wait_until(lambda: beat.stat().st_mtime_ns != last, timeout=10, what="the wrapper's next heartbeat")
    finally:
        os.kill(served.daemon.pid, signal.SIGCONT)


def damage_is_handled(served: Served, name: str, blob: bytes, before: set[Path], cycles: int) -> None:
    schema, _ = FILES[name]
    target = served.path(name)
    row = served.row()  # possibly the first reader of the damaged file
    if schema is not None and name != "meta.last-good.json":  # the copy is read only when meta.json is lost
        replaced = (lambda: (lease := served.lease()) is not None and lease["cycles"] > cycles) if name == "daemon.json" else None
        wait_until(lambda: set(aside(target)) - before or (replaced and replaced()), timeout=15,
                   what=f"the damaged {name} to be moved aside")
        assert all(moved.read_bytes() == blob for moved in set(aside(target)) - before)
    if name in ("meta.json", "control.json", "started.json"):
        row = served.row()
        assert row["status"] != "error_unknown" and row["name"] == "serve", row
        listed = views.status_view(served.home, served.run_id)["corrupt_files"]
        assert any(Path(p).name.startswith(name + ".corrupt-") for p in listed), listed
    if name == "meta.json":
        wait_until(lambda: target.exists() and is_valid("meta", target.read_bytes()),
                   what="the daemon to put meta.json back from its copy")
    assert served.daemon.poll() is None
    wait_until(lambda: (lease := served.lease()) is not None and lease["cycles"] > cycles + 1,
               what="the daemon to keep cycling")


def restore(served: Served, name: str, good: bytes | None) -> None:
    """Put back what the test broke, as its writer would (the wrapper's and the daemon's own files heal alone)."""
    if name == "control.json":
        runs.request(served.home, served.run_id, "unpause")  # the CLI rewrites it on the next request
    elif name in ("meta.json", "meta.last-good.json", "started.json", "progress.json") and good is not None:
        store.write_bytes_atomic(served.path(name), good)


@pytest.mark.parametrize("name", list(FILES))
def test_a_state_file_damaged_five_ways_never_stops_the_slurm_run_nor_its_daemon(served, name):
    target = served.path(name)
    for way, damage in WAYS.items():
        good = target.read_bytes() if target.exists() else None
        blob = damage(good or b"")
        cycles = wait_until(served.lease, what="a readable lease")["cycles"]
        before = set(aside(target))
        store.write_bytes_atomic(target, blob)
        if name == "meta.json":
            job_side_reads(served)
        try:
            damage_is_handled(served, name, blob, before, cycles)
        except AssertionError as exc:
            raise AssertionError(f"{name} {way}: {exc}") from exc
        finally:
            restore(served, name, good)
        row = wait_until(lambda: (r := served.row())["status"] == "healthy_running" and r, timeout=15,
                         what=f"{name} {way}: the run to look healthy again once its files are good")
        assert row["attempt"] == 1 and len(served.attempts()) == 1, (way, served.attempts())
    assert not served.watch.overlaps, served.watch.overlaps[:5]


def test_with_every_file_damaged_at_once_fray_control_stop_still_stops_the_slurm_job(served, slurm_cluster):
    started = json.loads(served.path("started.json").read_bytes())
    for name in FILES:
        if name != "meta.last-good.json":
            store.write_bytes_atomic(served.path(name), b"[1,2]\n")
    shown = run_fray("status", "serve", "--json", home=served.home.root)  # by its name, meta.json damaged
    assert shown.returncode == 0 and json.loads(shown.stdout)["run"]["run_id"] == served.run_id, shown.stdout
    stop = run_fray("control", "stop", "serve", "--json", home=served.home.root)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    meta = wait_until(lambda: (m := json.loads(served.home.run(served.run_id).meta_copy.read_bytes()))["phase"] == "ended"
                      and m, timeout=40, what="the damaged run to stop")
    assert meta["end"]["status"] == "stopped_manual" and len(meta["attempts"]) == 1, meta["end"]
    wait_until(lambda: not running(started["pid"]) and not tags.tagged(str(served.home.root)), timeout=20,
               what="the job's processes to be gone")
    wait_until(lambda: f"fray-{served.run_id}-" not in slurm_cluster.run("squeue", "-h", "-o", "%j").stdout,
               what="the job to leave Slurm's queue (it may be completing a moment)")
    assert not served.watch.overlaps, served.watch.overlaps[:5]
    assert os.path.exists(served.home.run(served.run_id).meta)  # put back by the daemon
