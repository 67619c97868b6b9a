"""Benchmark: many hosts, one shared folder, on the cluster in a box (tests/box): takeover, churn, late files.

What docs/state.md states (its "Many hosts share the folder" section):

  takeover    daemons on login-a and login-b; the acting one is SIGKILLed; time until the other holds the
              lease and has completed a cycle (watched from the file server's side), against the bound
              stated: the lease timeout + the standby's poll + a cycle. The killed daemon is started again
              (it stands by) before the next round, so each round is a real handover, both ways.
  churn       daemons on both login hosts, runs that fail and are retried at once (Slurm jobs of 1.6 s) for
              --churn-minutes, the acting host frozen (every process SIGSTOPped, a paused VM) every
              --freeze-every seconds until the other takes over, then thawed: attempts run, takeovers, and
              how many attempt numbers ran twice and how many pairs of one run's workloads lived at once
              (both must be 0).
  late files  login-a's client hides a new file for --hide seconds (`negative_timeout`, what NFS's
              lookupcache and acdirmax do); quick Slurm jobs are submitted there. With the tolerance
              (`daemon.file_latency_sec`) each ends `success` in one attempt after a wait for its exit
              record; the baseline, the same with the tolerance 0, is what fray did before: how many
              successes turned into `lost` and a retry.

    python tests/bench/bench_hosts.py [--timeout 4] [--rounds 5] [--churn-minutes 3] [--freeze-every 20]
                                      [--jobs 4] [--hide 6]

Needs what the box needs (root, /dev/fuse, sshfs, slurm-wlm, gcc: `.ci/run` installs them).
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.box import churn, procs  # noqa: E402
from tests.box.box import Box, attach, default_root, start_box  # noqa: E402
from tests.box.fray_on_box import FAST_SLURM, FrayHome  # noqa: E402
from tests.box.share import Cache  # noqa: E402
from tests.conftest import wait_until  # noqa: E402

STANDBY_POLL_SEC = 0.5


def lease(home: FrayHome) -> dict | None:
    try:
        return json.loads((home.server / "daemon.json").read_text())
    except (OSError, ValueError):
        return None


def daemon_pids(box: Box, host: str, home: FrayHome) -> list[int]:
    return [pid for pid, argv in box.login(host).processes().items()
            if "fray.daemon" in " ".join(argv) and str(home.path) in argv]


def takeovers(box: Box, timeout: float, rounds: int) -> list[float]:
    home = FrayHome.create(box, "bench-takeover", {"slurm": FAST_SLURM, "daemon": {"lease_timeout_sec": timeout}})
    try:
        for host in ("login-a", "login-b"):
            home.fray(box.login(host), "daemon", "start", check=True)
        seconds = []
        for _ in range(rounds):
            holder = wait_until(lambda: (l := lease(home)) and l.get("cycles", 0) >= 1 and l["host"], timeout=60,
                                what="a daemon to act")
            other = "login-b" if holder == "login-a" else "login-a"
            wait_until(lambda: json.loads((home.server / "daemon" / "hosts" / f"{other}.json").read_text())["role"]
                       == "standby", timeout=30, what=f"{other} to stand by")
            generation = lease(home)["generation"]
            procs.send(daemon_pids(box, holder, home), signal.SIGKILL)
            killed = time.monotonic()
            wait_until(lambda: (l := lease(home)) and l["generation"] > generation and l["host"] == other
                       and l.get("cycles", 0) >= 1, timeout=timeout + 30, interval=0.01, what="the takeover")
            seconds.append(time.monotonic() - killed)
            home.fray(box.login(holder), "daemon", "start", check=True)  # back, standing by
        return seconds
    finally:
        home.clean()


def churning(box: Box, timeout: float, minutes: float, freeze_every: float) -> tuple[int, int, dict, list]:
    """(attempts run, takeovers, attempt numbers run twice, overlapping workloads) over `minutes` of churn."""
    home = FrayHome.create(box, "bench-churn", {"slurm": FAST_SLURM, "daemon": {"lease_timeout_sec": timeout}})
    try:
        for host in ("login-a", "login-b"):
            home.fray(box.login(host), "daemon", "start", check=True)
        script = home.project("proj", {"churn.py": churn.SCRIPT}) / "churn.py"
        runs = [home.submit(box.login("login-a"), script, "--name", f"churn-{i}")["run_id"] for i in range(6)]
        takeovers, deadline = 0, time.monotonic() + minutes * 60
        while time.monotonic() < deadline:
            time.sleep(freeze_every)
            holder = box.login(lease(home)["host"])
            generation = lease(home)["generation"]
            holder.freeze()
            wait_until(lambda: (l := lease(home)) and l["generation"] > generation, timeout=timeout + 30,
                       what="a takeover")
            holder.thaw()
            takeovers += 1
        for run_id in runs:
            home.fray(box.login("login-a"), "control", "stop", run_id, check=True)
        for run_id in runs:
            home.wait_ended(box.login("login-a"), run_id, timeout=120)
        seen = churn.workloads(home)
        return sum(len(v) for v in seen.values()), takeovers, churn.duplicates(seen), churn.overlaps(seen)
    finally:
        home.clean()


def late_files(box: Box, hide: float, jobs: int, tolerance: float) -> list[list[tuple[int, str]]]:
    """Each quick job's attempts, (number, cause), with the daemon on login-a whose client hides new files."""
    home = FrayHome.create(box, f"bench-late-{tolerance:g}",
                           {"slurm": FAST_SLURM, "daemon": {"file_latency_sec": tolerance}})
    a = box.login("login-a")
    box.remount(a, Cache(missing_names=hide))
    try:
        home.fray(a, "daemon", "start", check=True)
        script = home.project("proj", {"quick.py": "#FRAY --backend slurm --max-retries-preemption 3\nprint('ok')\n"})
        run_ids = [home.submit(a, script / "quick.py", "--name", f"quick-{i}")["run_id"] for i in range(jobs)]
        ended = [home.wait_ended(a, run_id, timeout=120 + hide * 4) for run_id in run_ids]
        return [[(t["number"], t["cause"]) for t in shown["attempts"]] for shown in ended]
    finally:
        home.clean()
        box.remount(a, Cache())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=4.0, help="daemon.lease_timeout_sec (default 4)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--churn-minutes", type=float, default=3.0)
    parser.add_argument("--freeze-every", type=float, default=20.0, help="seconds between freezes of the acting host")
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--hide", type=float, default=6.0, help="seconds login-a's client hides a new file")
    args = parser.parse_args()
    box = attach(default_root())
    started = box is None
    box = box or start_box()
    try:
        seconds = takeovers(box, args.timeout, args.rounds)
        bound = args.timeout + STANDBY_POLL_SEC + 1.0
        print(f"takeover after the acting daemon's SIGKILL, lease timeout {args.timeout:g}s, {len(seconds)} rounds:")
        print(f"  median {statistics.median(seconds):.2f}s  min {min(seconds):.2f}s  max {max(seconds):.2f}s"
              f"  [stated bound: timeout + poll + a cycle = {bound:.1f}s: "
              f"{'met' if max(seconds) <= bound else 'MISSED'}; never before the timeout: "
              f"{'yes' if min(seconds) >= args.timeout else 'NO'}]")
        attempts, takeovers, twice, overlapping = churning(box, args.timeout, args.churn_minutes, args.freeze_every)
        print(f"churn for {args.churn_minutes:g} min, 6 runs retried nonstop, the acting host frozen every "
              f"{args.freeze_every:g}s: {attempts} attempts run, {takeovers} takeovers; attempt numbers run twice: "
              f"{sum(len(v) for v in twice.values())}, workloads of one run alive at once: {len(overlapping)} "
              f"[{'both 0: met' if not twice and not overlapping else 'MISSED'}]")
        print(f"late files: login-a's client hides a new file for {args.hide:g}s; {args.jobs} quick Slurm jobs each")
        for label, tolerance in (("with file_latency_sec 60", 60.0), ("baseline, file_latency_sec 0", 0.0)):
            runs = late_files(box, args.hide, args.jobs, tolerance)
            retried = sum(len(r) > 1 for r in runs)
            lost = sum(cause == "lost" for r in runs for _, cause in r)
            print(f"  {label:<30} {retried}/{len(runs)} runs retried, {lost} attempts judged lost: {runs}")
    finally:
        if started:
            box.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
