"""Benchmark: what fray costs a real third-party training loop, nanoGPT's CPU "baby GPT" recipe.

Three ways, taken in turn REPEATS times (a shared machine drifts), the same iterations each:

- `python train.py ...` in the shell, no fray (the baseline);
- `fray submit --wait train.py --python PY -- ...` on the local backend, the repo as it is;
- the same, with one `report.progress(step=iter_num, loss=lossf)` call a logged iteration (log_interval=1, so
  every iteration), the two lines the docs show added to a copy of train.py.

Each is timed by the repo itself: the sum of the `time X ms` its log prints for every iteration after the
first few (iteration 0 includes an evaluation; nanoGPT's timer spans everything between two logged
iterations, a report.progress call included). The job runs in PY, an interpreter with torch and without
fray. The data is the repo's own `data/shakespeare_char/prepare.py` over a local text (the bench cannot
download tiny Shakespeare): the first MB of this Python's standard library sources.

    python tests/bench/bench_nanogpt.py --repo PATH/TO/nanoGPT --python PATH/TO/python-with-torch
        [--iters 600] [--repeats 3]

Target (issue 39): with a call per iteration within 2% of the speed without fray.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from tests.bench._common import FRAY  # noqa: E402

TARGET_SLOWDOWN = 0.02
SKIP_ITERATIONS = 5  # iteration 0 evaluates; the next few warm torch's allocator
ITERATION = re.compile(r"^iter (\d+): loss [0-9.]+, time ([0-9.]+)ms", re.MULTILINE)
RECIPE = ["config/train_shakespeare_char.py", "--device=cpu", "--compile=False", "--eval_iters=20",
          "--log_interval=1", "--block_size=64", "--batch_size=12", "--n_layer=4", "--n_head=4", "--n_embd=128",
          "--dropout=0.0", "--always_save_checkpoint=False"]
THE_CALL = "        report.progress(step=iter_num, loss=lossf)\n"


def local_text(size: int = 1_000_000) -> str:
    """The first `size` characters of this Python's standard library sources, in a fixed order."""
    chunks, total = [], 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        text = path.read_text(errors="replace")
        chunks.append(text)
        total += len(text)
        if total >= size:
            break
    return "".join(chunks)[:size]


def prepared_repo(source: Path, scratch: Path, python: str) -> Path:
    repo = scratch / "nanoGPT"
    shutil.copytree(source, repo, ignore=shutil.ignore_patterns(".git", "out*", "__pycache__"))
    data = repo / "data" / "shakespeare_char"
    (data / "input.txt").write_text(local_text())
    subprocess.run([python, "prepare.py"], cwd=data, check=True, stdout=subprocess.DEVNULL)
    with_call = (repo / "train.py").read_text()
    printed = re.search(r"^        print\(f\"iter \{iter_num\}.*\n", with_call, re.MULTILINE)
    if printed is None:
        raise SystemExit("this nanoGPT's train.py has no `print(f\"iter {iter_num}...` line to put the call after")
    with_call = ("from fray import report\n" + with_call[:printed.end()] + THE_CALL + with_call[printed.end():])
    (repo / "train_with_progress.py").write_text(with_call)
    return repo


def iteration_seconds(log: str, iters: int) -> float:
    times = {int(step): float(ms) / 1000 for step, ms in ITERATION.findall(log)}
    missing = [step for step in range(iters + 1) if step not in times]
    if missing:
        raise SystemExit(f"the log lacks iterations {missing[:5]}...:\n{log[-2000:]}")
    return sum(seconds for step, seconds in times.items() if step >= SKIP_ITERATIONS)


def plain(repo: Path, python: str, args: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run([python, "train.py", *args], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=1800)
    if proc.returncode:
        raise SystemExit(f"plain nanoGPT failed:\n{proc.stderr[-3000:]}")
    return proc.stdout


def under_fray(repo: Path, python: str, script: str, args: list[str], env: dict[str, str], home: Path) -> str:
    proc = subprocess.run([FRAY, "submit", "--wait", "--json", script, "--python", python, "--", *args],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode:
        raise SystemExit(f"nanoGPT under fray failed: {proc.stdout}\n{proc.stderr[-3000:]}")
    run_id = json.loads(proc.stdout.strip().splitlines()[-1])["run_id"]
    return (home / "runs" / run_id / "attempts" / "1" / "stdout.log").read_text()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help="a checkout of karpathy/nanoGPT")
    parser.add_argument("--python", required=True, help="an interpreter with torch, numpy and requests")
    parser.add_argument("--iters", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    recipe = [*RECIPE, f"--max_iters={args.iters}", f"--lr_decay_iters={args.iters}",
              f"--eval_interval={args.iters * 10}"]
    with tempfile.TemporaryDirectory(prefix="bench-nanogpt-") as scratch_name:
        scratch = Path(scratch_name)
        repo = prepared_repo(args.repo, scratch, args.python)
        home = scratch / "home"
        env = {k: v for k, v in os.environ.items() if not k.startswith("FRAY_")}
        env["FRAY_HOME"] = str(home)
        ways = {
            "python train.py (no fray)": lambda out: plain(repo, args.python, [*recipe, f"--out_dir={out}"], env),
            "fray submit --wait, unmodified": lambda out: under_fray(
                repo, args.python, "train.py", [*recipe, f"--out_dir={out}"], env, home),
            "fray, report.progress every iteration": lambda out: under_fray(
                repo, args.python, "train_with_progress.py", [*recipe, f"--out_dir={out}"], env, home),
        }
        seconds: dict[str, list[float]] = {label: [] for label in ways}
        try:
            for round_number in range(args.repeats):
                for index, (label, run) in enumerate(ways.items()):
                    log = run(f"out-{round_number}-{index}")
                    seconds[label].append(iteration_seconds(log, args.iters))
        finally:
            subprocess.run([FRAY, "daemon", "stop"], env=env, capture_output=True, timeout=60)
    counted = args.iters + 1 - SKIP_ITERATIONS
    print(f"nanoGPT CPU baby GPT, {counted} timed iterations a run, {args.repeats} runs each, in turn "
          "(iterations per second by the repo's own timer; median):")
    baseline = statistics.median(seconds["python train.py (no fray)"])
    for label, samples in seconds.items():
        rate = counted / statistics.median(samples)
        slowdown = statistics.median(samples) / baseline - 1
        runs = ", ".join(f"{counted / s:.1f}" for s in samples)
        verdict = ""
        if label.startswith("fray, report"):
            verdict = (f"  [target within {TARGET_SLOWDOWN * 100:.0f}%: "
                       f"{'met' if slowdown <= TARGET_SLOWDOWN else 'MISSED'}]")
        print(f"  {label:<40} {rate:6.1f} it/s  ({slowdown * 100:+.2f}% time vs no fray; runs {runs}){verdict}")


if __name__ == "__main__":
    started = time.time()
    main()
    print(f"  (bench took {time.time() - started:.0f}s)")
