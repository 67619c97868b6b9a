"""Benchmark: `fray list --json` with 1,000 runs on disk (target: median <= 150 ms wall).

Prints the figure beside `python -c pass` and `python -c "import click"`, measured
in the same run on the same machine, the commands taken in turn. 900 runs have ended, 100 are running with a
heartbeat and progress, so the listing reads what a busy user's FRAY_HOME holds.

    python tests/bench/bench_list.py [--runs 1000] [--repeats 21]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import FRAY, env_for, report, time_interleaved, warm_up  # noqa: E402

from fray.state import runs, store  # noqa: E402
from fray.state.layout import Home  # noqa: E402
from fray.core.model import Attempt, End, Meta  # noqa: E402


def populate(home: Home, count: int) -> None:
    store.ensure_home(home)
    script = Path(home.root) / "job.py"
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp) / "fray")
        populate(home, args.runs)
        env = env_for(home.root)
        warm_up([FRAY, "list", "--json"], env)  # also builds the row cache, as any earlier `fray list` would
        print(f"fray list --json with {args.runs} runs ({sys.version.split()[0]}, {FRAY})")
        listing = f"fray list --json ({args.runs} runs)"
        samples = time_interleaved({
            "baseline: python -c pass": [sys.executable, "-c", "pass"],
            "baseline: python -c 'import click'": [sys.executable, "-c", "import click"],
            "fray --help": [FRAY, "--help"],
            listing: [FRAY, "list", "--json"],
            f"fray list ({args.runs} runs, table)": [FRAY, "list"],
        }, env, args.repeats)
        for label, taken in samples.items():
            report(label, taken, target_ms=150 if label == listing else None)


if __name__ == "__main__":
    main()
