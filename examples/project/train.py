#!/usr/bin/env python3
#FRAY --name project-train
#FRAY --max-retries 2 --backoff-base 1s --heartbeat-interval 2
"""A real project's training script: its own modules, a data file, checkpoints and resume.

    cd examples/project && fray submit --wait train.py -- --steps 30

fray snapshots this folder's project (the git work tree it is in) at submit, so
`import model` and `from tinynet import data` work in every attempt, and every
attempt runs the code as it was submitted. `--crash-at N` makes the first
attempt die at step N, to watch the next one resume from its checkpoint.
"""

import argparse
import json
import os
import sys

import model
from fray import report
from tinynet import data

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--crash-at", type=int, default=0, help="the first attempt dies at this step (0: never)")
args = parser.parse_args()

points = data.load_points()
weights = model.Linear()
start = 0
latest = report.latest_checkpoint()
if latest is not None:
    saved = json.loads((latest / "state.json").read_text())
    weights, start = model.Linear(**saved["weights"]), saved["step"]
print(f"attempt {os.environ.get('FRAY_ATTEMPT', '1')}: {len(points)} points from {data.DATA_FILE.name}, "
      f"{'resuming at step ' + str(start) if start else 'starting fresh'} "
      f"(python {sys.version.split()[0]} at {sys.executable})",
      flush=True)

for step in range(start + 1, args.steps + 1):
    loss = weights.train_step(points, args.lr)
    report.progress(step=step, loss=loss)
    if step % 5 == 0 or step == args.steps:
        with report.checkpoint(f"step-{step:06d}") as folder:
            (folder / "state.json").write_text(json.dumps({"step": step, "weights": weights.state()}))
    if step == args.crash_at and os.environ.get("FRAY_ATTEMPT", "1") == "1":
        sys.exit(f"simulated crash at step {step}")

report.final(loss=round(loss, 4), steps=args.steps, slope=round(weights.slope, 3))
print(f"done: loss {loss:.4f}, y = {weights.slope:.3f} x + {weights.bias:.3f}", flush=True)
