"""Benchmark: one daemon cycle over 10,000 runs (targets: cold <= 2 s, steady <= 100 ms).

A synthetic FRAY_HOME: 9,500 ended runs and 500 live ones held by `fray control
pause` (queued, so policy evaluates each every cycle but no process is needed).
"Cold" is the first cycle of a new daemon, in a fresh process as `fray daemon
start` gives it (every file read, parsed and validated; the median of three
processes); "steady" is a cycle where nothing changed, as the serving daemon
runs it (ended runs trusted to the file watcher); "full scan" is the steady
cycle it runs every 30 s as a safety net (every run's files stat-ed). Printed
with the per-run cost and, as the floor, the time to list the runs folder and
stat each meta.json in the same run.

    python tests/bench/bench_daemon.py [--runs 10000] [--live 500] [--repeats 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fray.state import runs, store
from fray.daemon.loop import Daemon
from fray.state.layout import Home
from fray.core.model import Attempt, Control, End, Meta


def populate(home: Home, count: int, live: int) -> None:
    store.ensure_home(home)
    script = home.root / "job.sh"
    script.write_text("#!/bin/bash\necho hi\n")
    template = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, name="template"))
    template_dir = home.run(template.run_id).dir
    now = time.time()
    for i in range(count):
        run_id = runs.make_run_id(f"job-{i}", now - count + i, suffix=f"{i % 65536:04x}")
        paths = home.run(run_id)
        store.make_dirs(paths.dir)
        (paths.dir / "script.sh").write_bytes((template_dir / template.script["frozen"]).read_bytes())
        meta = Meta.from_dict({**template.to_dict(), "run_id": run_id, "name": f"job-{i}",
                               "script": {**template.script, "frozen": "script.sh"}})
        control = Control(updated_at=now)
        if i < count - live:
            meta.attempts = [Attempt(number=1, state="ended", backend="local", submitted_at=now - 100,
                                     started_at=now - 99, ended_at=now - 50, exit_code=0, cause="success", node="vm")]
            meta.phase, meta.end = "ended", End(status="completed_success", reason="attempt 1 succeeded", at=now - 50)
        else:
            control.paused = True
        store.write_json(paths.meta, meta.to_dict(), "meta")
        store.write_json(paths.control, control.to_dict(), "control")
    import shutil

    shutil.rmtree(template_dir)


def floor_ms(home: Home) -> float:
    start = time.perf_counter()
    for entry in os.scandir(home.runs_dir):
        os.stat(os.path.join(entry.path, "meta.json"))
    return (time.perf_counter() - start) * 1000


COLD = """
import sys, time
from pathlib import Path
from fray.daemon.loop import Daemon
from fray.state.layout import Home
daemon = Daemon(Home(Path(sys.argv[1])))
start = time.perf_counter()
daemon.cycle()
print((time.perf_counter() - start) * 1000)
"""


def cold_cycle_ms(home: Home) -> float:
    """The first cycle of a daemon started afresh, timed inside that process."""
    done = subprocess.run([sys.executable, "-c", COLD, str(home.root)], capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--live", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp) / "fray")
        started = time.perf_counter()
        populate(home, args.runs, args.live)
        print(f"daemon cycle over {args.runs} runs ({args.live} live, paused), populated in "
              f"{time.perf_counter() - started:.1f}s, Python {sys.version.split()[0]}")
        floors = [floor_ms(home) for _ in range(args.repeats)]
        print(f"{'baseline: scandir + stat every meta.json':<44} median {statistics.median(floors):8.1f} ms")
        colds = [cold_cycle_ms(home) for _ in range(3)]
        cold = statistics.median(colds)
        verdict = "met" if cold <= 2000 else "MISSED"
        print(f"{'cold cycle (new daemon process)':<44} median {cold:8.1f} ms  {cold * 1000 / args.runs:6.1f} us/run"
              f"  (min {min(colds):.1f} / max {max(colds):.1f})  [target <= 2000 ms: {verdict}]")
        daemon = Daemon(home)
        daemon.cycle()
        for label, full, target in (("steady cycle (nothing changed)", False, 100.0),
                                    ("full-scan cycle (nothing changed)", True, None)):
            samples = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                daemon.cycle(full=full)
                samples.append((time.perf_counter() - start) * 1000)
            median = statistics.median(samples)
            verdict = "" if target is None else f"  [target <= {target:.0f} ms: {'met' if median <= target else 'MISSED'}]"
            print(f"{label:<44} median {median:8.1f} ms  {median * 1000 / args.runs:6.1f} us/run"
                  f"  (min {min(samples):.1f} / max {max(samples):.1f}){verdict}")


if __name__ == "__main__":
    main()
