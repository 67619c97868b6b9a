"""Benchmark: `fray list --json` with 1,000 runs on disk (target: median <= 150 ms wall), and with a sweep waiting.

Prints the figure beside `python -c pass` and `python -c "import click"`, measured
in the same run on the same machine, the commands taken in turn. 900 runs have ended, 100 are running with a
heartbeat and progress, so the listing reads what a busy user's FRAY_HOME holds.

Then (issue 39) a real daemon runs a `--sweep` of `--sweep-points` points (default 10,000) with
`--max-parallel 2`: two points run, the others wait. Printed as multiples of `python -c pass` in the same
run, the commands taken in turn: `fray list --json` as the first listing (the row cache deleted before it,
as after the daemon ran the sweep) and as the second, and `fray status <point's name> --json`. Targets:
list <= 3x, status <= 2x. Then what the waiting sweep costs the daemon (its CPU time over DAEMON_WINDOW_SEC
of steady cycles, a full scan among them, as a share of one core) and how long `fray control pause --group`
and `unpause --group` of the whole sweep take.

    python tests/bench/bench_list.py [--runs 1000] [--repeats 21] [--sweep-points 10000] [--sweep-repeats 11]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import FRAY, env_for, report, time_command, time_interleaved, warm_up  # noqa: E402

from fray.state import list_summary, runs, store  # noqa: E402
from fray.state.layout import Home  # noqa: E402
from fray.core.model import Attempt, End, Meta  # noqa: E402

DAEMON_WINDOW_SEC = 40.0  # over a full scan (every 30 s) and the steady cycles around it


def populate(home: Home, count: int) -> None:
    store.ensure_home(home)
    script = Path(home.root).parent / "project" / "job.py"  # beside the home, not in it: its snapshot is the folder
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text("#FRAY --cpus 1\nprint('hi')\n")
    now = time.time()
    for i in range(count):
        meta = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, name=f"job-{i}"), now=now - count + i)
        paths = home.run(meta.run_id)
        attempt = Attempt(number=1, state="ended", backend="local", submitted_at=now - 100, started_at=now - 99,
                          ended_at=now - 50, exit_code=0, cause="success", node="vm")
        if i % 10 == 0:  # running: heartbeat and progress on disk
            attempt = Attempt(number=1, state="running", backend="local", submitted_at=now - 100, started_at=now - 99,
                              node="vm", backend_ref={"pid": 1})
            meta = Meta.from_dict({**meta.to_dict(), "phase": "active", "attempts": [attempt.to_dict()]})
            store.make_dirs(paths.attempt(1).dir)
            paths.attempt(1).heartbeat.write_text(f"{now}\n")
            store.write_json(paths.attempt(1).progress, {"updated_at": now, "step": i, "loss": 0.5}, "progress")
        else:
            meta.attempts = [attempt]
            meta.phase = "ended"
            meta.end = End(status="completed_success", reason="attempt 1 succeeded", at=now - 50)
        store.write_json(paths.meta, meta.to_dict(), "meta")


def waiting_sweep(home: Home, points: int, env: dict[str, str]) -> str:
    """A daemon serving `home` with a sweep of `points` points, two running and the others waiting, every
    waiting one in the daemon's summary; the name of a point in the middle."""
    project = Path(home.root).parent / "project"
    project.mkdir(parents=True)
    (project / "point.py").write_text("#FRAY --cpus 0\nimport time\ntime.sleep(3600)\n")
    subprocess.run([FRAY, "daemon", "start"], env=env, check=True, stdout=subprocess.DEVNULL)
    subprocess.run([FRAY, "submit", str(project / "point.py"), "--sweep", f"i=0..{points - 1}", "--max-parallel",
                    "2", "--json"], env=env, check=True, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        summary = list_summary.load(home)
        if summary is not None and len(summary.entries) >= points - 2:
            break
        time.sleep(1.0)
    else:
        raise TimeoutError("the daemon never summarized the waiting points")
    width = len(str(points - 1))
    return f"point-{points // 2:0{width}d}"


def stop_all(home: Home, env: dict[str, str]) -> None:
    """The daemon stopped, and the points it left running killed (their command lines name this home)."""
    subprocess.run([FRAY, "daemon", "stop"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    needle = str(home.root).encode()
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                if needle in Path(f"/proc/{name}/cmdline").read_bytes():
                    os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass


def sweep_section(tmp: Path, points: int, repeats: int) -> None:
    home = Home(tmp / "sweep" / "fray")
    env = env_for(home.root)
    try:
        name = waiting_sweep(home, points, env)
        listing, status = [FRAY, "list", "--json"], [FRAY, "status", name, "--json"]
        warm_up(listing, env)
        warm_up(status, env)
        samples: dict[str, list[float]] = {"python -c pass": [], "first": [], "second": [], "status": []}
        for _ in range(repeats):
            samples["python -c pass"] += time_command([sys.executable, "-c", "pass"], env, 1)
            home.list_cache.unlink(missing_ok=True)  # as after the daemon ran the sweep: no listing cached it
            samples["first"] += time_command(listing, env, 1)
            samples["second"] += time_command(listing, env, 1)
            samples["status"] += time_command(status, env, 1)
        lease = json.loads(home.daemon_lease.read_text())
        daemon_share = cpu_share(int(lease["pid"]), DAEMON_WINDOW_SEC)
        group = [FRAY, "control", "pause", "--group", "point", "--json"]
        pause = time_command(group, env, 1)[0]
        unpause = time_command([*group[:2], "unpause", *group[3:]], env, 1)[0]
    finally:
        stop_all(home, env)
    floor = statistics.median(samples["python -c pass"])
    print(f"\na sweep of {points} points, 2 running, {points - 2} waiting (daemon's last cycle "
          f"{lease.get('last_cycle_ms', 0):.0f} ms)")
    labels = {"python -c pass": ("baseline: python -c pass", None),
              "first": ("fray list --json, first listing", 3.0), "second": ("fray list --json, second listing", 3.0),
              "status": (f"fray status {name} --json", 2.0)}
    for key, (label, target) in labels.items():
        median = report(label, samples[key])
        verdict = "" if target is None else f"  [target <= {target:.0f}x: " + (
            "met]" if median <= target * floor * 1000 else "MISSED]")
        print(f"{'':<52} = {median / (floor * 1000):.2f}x python -c pass{verdict}")
    print(f"the daemon meanwhile: {daemon_share * 100:.1f}% of a core over {DAEMON_WINDOW_SEC:.0f} s")
    print(f"fray control pause --group (all {points} points): {pause:.1f} s; unpause --group: {unpause:.1f} s")


def cpu_share(pid: int, window: float) -> float:
    """The share of one core process `pid` used over the next `window` seconds (its user + system time)."""
    def cpu_seconds() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    before = cpu_seconds()
    time.sleep(window)  # the measured window itself, not a synchronisation
    return (cpu_seconds() - before) / window


def thousand_runs(tmp: Path, count: int, repeats: int) -> None:
    home = Home(tmp / "fray")
    populate(home, count)
    env = env_for(home.root)
    warm_up([FRAY, "list", "--json"], env)  # also builds the row cache, as any earlier `fray list` would
    print(f"fray list --json with {count} runs ({sys.version.split()[0]}, {FRAY})")
    listing = f"fray list --json ({count} runs)"
    samples = time_interleaved({
        "baseline: python -c pass": [sys.executable, "-c", "pass"],
        "baseline: python -c 'import click'": [sys.executable, "-c", "import click"],
        "fray --help": [FRAY, "--help"],
        listing: [FRAY, "list", "--json"],
        f"fray list ({count} runs, table)": [FRAY, "list"],
    }, env, repeats)
    for label, taken in samples.items():
        report(label, taken, target_ms=150 if label == listing else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--sweep-points", type=int, default=10_000, help="0: no sweep section")
    parser.add_argument("--sweep-repeats", type=int, default=11)
    parser.add_argument("--only-sweep", action="store_true", help="the sweep section alone")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if not args.only_sweep:
            thousand_runs(Path(tmp), args.runs, args.repeats)
        if args.sweep_points:
            sweep_section(Path(tmp), args.sweep_points, args.sweep_repeats)

if __name__ == "__main__":
    main()
