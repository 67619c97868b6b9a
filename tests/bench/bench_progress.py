"""Benchmark: what `report.progress` costs a training loop, beside what the same loop pays for other ways to log.

Part 1, per call, in this process, inside a fray job's environment (an attempt folder and a meta.json the
writer's fence reads): `report.progress(step=i, loss=...)` for CALLS increasing steps (so the history's
thinning keeps its first few thousand points whole, as in a real run), beside a plain open+write+close of
one line (the floor of writing anything), TensorBoard's `SummaryWriter.add_scalar` (when torch is
installed) and `wandb.log` in offline mode (when wandb is). Target: report.progress <= 20 us a call.

Part 2, a training-like loop under a real `fray submit --wait` on the local backend: ITERATIONS steps of
a small numpy layer (`x = tanh(x @ w)`, 64x256 by 256x256, one BLAS thread), with and without a `report.progress` call per
step, the two in turn REPEATS times (a shared machine drifts). The job times its own loop; the bench
prints both medians and the slowdown. Target: within 2%.

    python tests/bench/bench_progress.py [--calls 100000] [--iterations 20000] [--repeats 3]
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
from typing import Callable

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from tests.bench._common import FRAY  # noqa: E402

TARGET_US = 20.0
TARGET_SLOWDOWN = 0.02

LOOP = """\
import os, sys, time
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core a step: a BLAS pool on a shared machine only thrashes
import numpy as np
from fray import report
iterations, with_progress = int(sys.argv[1]), sys.argv[2] == "1"
rng = np.random.default_rng(0)
w = rng.standard_normal((256, 256)) / 16
x = rng.standard_normal((64, 256))
start, cpu = time.perf_counter(), time.process_time()
for i in range(iterations):
    x = np.tanh(x @ w)
    if with_progress:
        report.progress(step=i, loss=float(x[0, 0]))
report.flush()  # the last write is part of the cost
took, cpu = time.perf_counter() - start, time.process_time() - cpu
print(f"RESULT {iterations / took:.1f} {iterations / cpu:.1f}", flush=True)
"""


ROUNDS = 5


def per_call_us(calls: dict[str, Callable[[int], object]], total: int) -> dict[str, float]:
    """Microseconds a call of each, the median of ROUNDS rounds taken in turn (a shared machine drifts); the
    argument counts up across rounds, as a step does."""
    per_round = max(1, total // ROUNDS)
    samples: dict[str, list[float]] = {label: [] for label in calls}
    for round_number in range(ROUNDS):
        for label, call in calls.items():
            first = round_number * per_round
            start = time.perf_counter()
            for i in range(first, first + per_round):
                call(i)
            samples[label].append((time.perf_counter() - start) / per_round * 1e6)
    return {label: statistics.median(values) for label, values in samples.items()}


def fray_job_env(scratch: Path) -> None:
    """This process as attempt 1 of a running run: what the writer's fence reads."""
    run = scratch / "home" / "runs" / "r-bench"
    (run / "attempts" / "1").mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({"attempts": [{"number": 1, "state": "running"}]}))
    os.environ.update({"FRAY_HOME": str(scratch / "home"), "FRAY_RUN_ID": "r-bench", "FRAY_ATTEMPT": "1",
                       "FRAY_ATTEMPT_DIR": str(run / "attempts" / "1")})


def plain_write(path: Path) -> Callable[[int], None]:
    def call(i: int) -> None:
        with open(path, "w") as out:
            out.write(f'{{"step": {i}, "loss": {1.0 / (i + 1)}}}\n')
    return call


def tensorboard_call(scratch: Path) -> Callable[[int], object] | str:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as exc:
        return f"not installed ({exc.name})"
    writer = SummaryWriter(str(scratch / "tb"))
    return lambda i: writer.add_scalar("loss", 1.0 / (i + 1), i)


def wandb_call(scratch: Path) -> Callable[[int], object] | str:
    try:
        import wandb
    except ImportError:
        return "not installed"
    run = wandb.init(mode="offline", dir=str(scratch), project="bench-progress")
    return lambda i: run.log({"loss": 1.0 / (i + 1)}, step=i)


def part_one(scratch: Path, calls: int) -> None:
    fray_job_env(scratch)
    from fray.wrapper import report

    timed: dict[str, Callable[[int], object]] = {
        "report.progress(step=i, loss=...)": lambda i: report.progress(step=i, loss=1.0 / (i + 1)),
        "plain open+write+close of one line": plain_write(scratch / "plain.json"),
    }
    missing: dict[str, str] = {}
    for label, make in (("SummaryWriter.add_scalar", tensorboard_call), ("wandb.log (mode=offline)", wandb_call)):
        call = make(scratch)
        if isinstance(call, str):
            missing[label] = call
        else:
            timed[label] = call
    figures = per_call_us(timed, calls)
    report.flush()
    print(f"per call, {calls} calls each in {ROUNDS} rounds taken in turn, this process (median of the rounds):")
    for label, value in figures.items():
        print(f"  {label:<38} {value:9.1f} us")
    for label, why in missing.items():
        print(f"  {label:<38}    {why}")
    ours = figures["report.progress(step=i, loss=...)"]
    print(f"  [target report.progress <= {TARGET_US:.0f} us: {'met' if ours <= TARGET_US else 'MISSED'}]")
    written = json.loads((Path(os.environ["FRAY_ATTEMPT_DIR"]) / "progress.json").read_text())
    print(f"  progress.json after flush: step {written['step']} of {ROUNDS * (calls // ROUNDS) - 1}")


def one_run(home: Path, job: Path, iterations: int, with_progress: bool, env: dict[str, str]) -> tuple[float, float]:
    """The job's steps per second of wall time and of its own CPU time (every thread of it, the writer's too)."""
    proc = subprocess.run([FRAY, "submit", "--json", "--wait", str(job), "--code", "none", "--python", sys.executable,
                           "--", str(iterations), "1" if with_progress else "0"],
                          env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"the run failed: {proc.stdout}\n{proc.stderr}")
    attempt = home / "runs" / json.loads(proc.stdout)["run_id"] / "attempts" / "1"
    wall, cpu = (attempt / "stdout.log").read_text().rsplit("RESULT ", 1)[1].split()
    return float(wall), float(cpu)


def part_two(scratch: Path, iterations: int, repeats: int) -> None:
    home = scratch / "loop-home"
    job = scratch / "loop.py"
    job.write_text(LOOP)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FRAY_")}
    env["FRAY_HOME"] = str(home)
    rates: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    try:
        for _ in range(repeats):
            for with_progress in (False, True):
                rates[with_progress].append(one_run(home, job, iterations, with_progress, env))
    finally:
        subprocess.run([FRAY, "daemon", "stop"], env=env, capture_output=True, timeout=60)
    print(f"a training-like loop under `fray submit --wait` (local), {iterations} steps, {repeats} runs each, in turn "
          "(the job's own steps per second, median):")
    for index, clock in enumerate(("wall time", "CPU time")):
        without = statistics.median(r[index] for r in rates[False])
        with_ = statistics.median(r[index] for r in rates[True])
        slowdown = 1 - with_ / without
        print(f"  by its {clock}: without report.progress {without:7.0f} steps/s ({1e6 / without:.0f} us a step; runs: "
              f"{', '.join(f'{r[index]:.0f}' for r in rates[False])}), with one call a step {with_:7.0f} (runs: "
              f"{', '.join(f'{r[index]:.0f}' for r in rates[True])}): slowdown {slowdown * 100:.2f}%  "
              f"[target <= {TARGET_SLOWDOWN * 100:.0f}%: {'met' if slowdown <= TARGET_SLOWDOWN else 'MISSED'}]")
    print("  (CPU time counts every thread of the job, the writer's too; wall time drifts with a shared machine's load)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--iterations", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-progress-") as scratch:
        part_two(Path(scratch), args.iterations, args.repeats)  # first: part one makes this process a job's
        part_one(Path(scratch), args.calls)


if __name__ == "__main__":
    started = time.time()
    main()
    print(f"  (bench took {time.time() - started:.0f}s)")
