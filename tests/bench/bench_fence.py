"""Benchmark: from a wrapper's death to its whole process tree's, on the local backend (the bound docs/state.md states).

A real daemon runs a workload whose tree escapes its process group three ways
(`setsid cmd &`, a double-forked daemon, `cmd &`). The wrapper is SIGKILLed
(as the OOM killer would); timed until no process tagged with that attempt is
alive (/proc scanned every 2 ms): "workload" is the wrapper's direct child
(killed by the kernel's parent-death signal), "whole tree" every process
(the escaped ones are the sweeper's). Measured twice: with the daemon that
started the wrapper (it is told at once that its child died) and with a daemon
restarted since (it notices on its timer, poll_interval_sec = 1 s). "fence ->
tree dead" is from the daemon closing the attempt (its attempt_ended event) to
the last process's death.

    python tests/bench/bench_fence.py [--repeats 5]
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
from pathlib import Path

from fray.state import runs, store
from fray.state.layout import Home
from fray.wrapper import tags

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import report  # noqa: E402

ESCAPING = """#!/bin/bash
#FRAY --heartbeat-interval 0.5 --heartbeat-timeout 5 --stop-grace 1 --backoff-base 0 --startup-grace 0
setsid sleep 300 </dev/null >/dev/null 2>&1 &
( setsid sleep 301 </dev/null >/dev/null 2>&1 & )
sleep 302 &
while true; do sleep 0.2; done
"""


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.002):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("the benchmarked condition never came true")


def start_daemon(home: Home) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "fray.daemon", "--home", str(home.root)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_for(lambda: home.daemon_lease.exists() and json.loads(home.daemon_lease.read_text())["pid"] == proc.pid,
             interval=0.02)
    return proc


def stop_daemon(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:  # a loaded machine: the bench's figures are taken already
        proc.kill()
        proc.wait()


def alive(home: Home, run_id: str, attempt: int) -> list[int]:
    return [pid for pid, tag in tags.tagged(str(home.root)).items() if (tag.run_id, tag.attempt) == (run_id, attempt)]


def one(home: Home, script: Path, restart_daemon: bool, daemon: subprocess.Popen[bytes]) -> tuple[float, float, float, subprocess.Popen[bytes]]:
    """(kill -> workload dead, kill -> tree dead, fence -> tree dead) in seconds; the daemon now serving."""
    run_id = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(script.parent))).run_id
    paths = home.run(run_id)
    wait_for(lambda: paths.attempt(1).started.exists() and len(alive(home, run_id, 1)) >= 5, interval=0.02)
    started = json.loads(paths.attempt(1).started.read_text())
    if restart_daemon:
        stop_daemon(daemon)
        daemon = start_daemon(home)
    killed_at = time.time()
    os.kill(started["pid"], signal.SIGKILL)
    wait_for(lambda: not os.path.exists(f"/proc/{started['workload_pid']}")
             or open(f"/proc/{started['workload_pid']}/stat").read().rpartition(")")[2].split()[0] == "Z")
    workload_dead = time.time()
    wait_for(lambda: not alive(home, run_id, 1))
    tree_dead = time.time()
    events = [json.loads(line) for line in paths.events.read_text().splitlines()]
    fenced_at = next(e["at"] for e in events if e["kind"] == "attempt_ended" and e["attempt"] == 1)
    runs.request(home, run_id, "stop")
    wait_for(lambda: json.loads(paths.meta.read_text())["phase"] == "ended", interval=0.02)
    return workload_dead - killed_at, tree_dead - killed_at, tree_dead - fenced_at, daemon


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fray-bench-fence-") as tmp:
        home = Home(Path(tmp) / "home")
        store.ensure_home(home)
        script = Path(tmp) / "tree.sh"
        script.write_text(ESCAPING)
        daemon = start_daemon(home)
        try:
            for restart in (False, True):
                who = "a daemon restarted since" if restart else "the daemon that started it"
                samples: list[tuple[float, float, float]] = []
                for _ in range(args.repeats):
                    *sample, daemon = one(home, script, restart, daemon)
                    samples.append(tuple(sample))
                print(f"wrapper SIGKILLed, {who}:")
                report("  kill -> workload dead (parent-death signal)", [s[0] for s in samples])
                report("  kill -> whole tree dead (sweeper)", [s[1] for s in samples])
                report("  fence -> whole tree dead", [s[2] for s in samples])
        finally:
            stop_daemon(daemon)
            for pid, tag in tags.tagged(str(home.root)).items():
                tags.kill(pid, tag)


if __name__ == "__main__":
    main()
