#!/usr/bin/env python3
#FRAY --name train
#FRAY --heartbeat-interval 1 --backoff-base 1s
"""Step 1 of the pipeline: train, checkpointing every few steps, resuming where the last attempt stopped.

    fray submit examples/pipeline/train.py -- --steps 50
"""

import argparse
import json
import os
import time

from fray import report

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=50)
parser.add_argument("--step-sec", type=float, default=0.2)
options = parser.parse_args()

step, latest = 0, report.latest_checkpoint()
if latest is not None:
    step = json.loads((latest / "state.json").read_text())["step"]
print(f"attempt {os.environ.get('FRAY_ATTEMPT', '?')}: from step {step}", flush=True)
while step < options.steps:
    time.sleep(options.step_sec)  # one training step
    step += 1
    report.progress(step=step, loss=1.0 / step)
    if step % 5 == 0 or step == options.steps:
        with report.checkpoint(f"step-{step:06d}") as folder:  # promoted whole, only by the current attempt
            (folder / "state.json").write_text(json.dumps({"step": step, "weights": [0.1 * step]}))
report.final(steps=step)
