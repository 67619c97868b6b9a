"""Benchmark: what reading a job's output as progress costs the job (--progress-pattern).

A job that prints a matching line up to 10,000 times a second (`iter N: loss X, time Yms`, paced:
each iteration spins 50 microseconds of CPU and prints one line, flushed) runs ITERATIONS iterations under a real
daemon and the local backend, with and without `--progress-pattern`, the two in turn REPEATS times
each (a shared VM drifts). The job measures its own time (the figure a user would notice: its
iterations per second) and prints it last; the bench prints both medians, their ratio, and what the
reader made of it (the last step in progress.json and the points in the history).

    python tests/bench/bench_progress_pattern.py [--iterations 50000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from tests.bench._common import FRAY  # noqa: E402

JOB = """\
import sys, time
iterations = int(sys.argv[1])
start = time.perf_counter()
for i in range(iterations):
    spin = time.perf_counter() + 0.00005
    while time.perf_counter() < spin:
        pass
    print(f"iter {i}: loss {1.0 / (i + 1):.4f}, time 0.10ms", flush=True)
took = time.perf_counter() - start
print(f"RESULT {iterations / took:.1f}", flush=True)
"""
PATTERN = "iter (?P<step>\\d+): loss (?P<loss>[0-9.]+), time (?P<iter_ms>[0-9.]+)ms"


def one_run(home: Path, job: Path, iterations: int, with_pattern: bool, env: dict[str, str]) -> tuple[float, dict]:
    extra = ["--progress-pattern", PATTERN] if with_pattern else []
    proc = subprocess.run([FRAY, "submit", "--json", "--wait", str(job), "--code", "none",
                           "--python", sys.executable, *extra, "--", str(iterations)],
                          env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"the run failed: {proc.stdout}\n{proc.stderr}")
    run_id = json.loads(proc.stdout)["run_id"]
    attempt = home / "runs" / run_id / "attempts" / "1"
    rate = float((attempt / "stdout.log").read_text().rsplit("RESULT ", 1)[1])
    seen: dict = {}
    if with_pattern:
        seen["step"] = json.loads((attempt / "progress.json").read_text())["step"]
        seen["points"] = len((attempt / "history.jsonl").read_text().splitlines())
    return rate, seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-progress-") as scratch:
        home = Path(scratch) / "home"
        job = Path(scratch) / "job.py"
        job.write_text(JOB)
        env = {**os.environ, "FRAY_HOME": str(home)}
        rates: dict[bool, list[float]] = {False: [], True: []}
        seen: dict = {}
        try:
            for _ in range(args.repeats):
                for with_pattern in (False, True):
                    rate, found = one_run(home, job, args.iterations, with_pattern, env)
                    rates[with_pattern].append(rate)
                    seen = found or seen
        finally:
            subprocess.run([FRAY, "daemon", "stop"], env=env, capture_output=True, timeout=60)
    without, with_ = statistics.median(rates[False]), statistics.median(rates[True])
    print(f"job printing a matching line per iteration, {args.iterations} iterations, {args.repeats} runs each, "
          f"in turn (the job's own iterations per second, median):")
    print(f"  without --progress-pattern  {without:9.0f} lines/s  (runs: {', '.join(f'{r:.0f}' for r in rates[False])})")
    print(f"  with --progress-pattern     {with_:9.0f} lines/s  (runs: {', '.join(f'{r:.0f}' for r in rates[True])})")
    print(f"  ratio with/without          {with_ / without:9.3f}")
    print(f"  what fray read: last step {seen.get('step')} of {args.iterations - 1}, "
          f"{seen.get('points')} points in the history")


if __name__ == "__main__":
    started = time.time()
    main()
    print(f"  (bench took {time.time() - started:.0f}s)")
