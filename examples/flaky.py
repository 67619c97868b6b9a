#!/usr/bin/env python3
#FRAY --name flaky
#FRAY --max-retries 3 --backoff-base 1s --backoff-max 4s --heartbeat-interval 2
"""A job that crashes twice and still finishes: checkpoint, resume, retry.

Each attempt resumes from the checkpoint in $FRAY_CHECKPOINT_DIR, does a few
steps, and (on its first two attempts) dies with an error. fray retries it
with a short backoff; the third attempt resumes and completes.

    fray submit examples/flaky.py --follow
"""

import json
import os
import sys
from pathlib import Path

from fray import report

attempt = int(os.environ.get("FRAY_ATTEMPT", "1"))
checkpoint_dir = report.checkpoint_dir() or Path("flaky-checkpoints")
checkpoint_dir.mkdir(parents=True, exist_ok=True)
checkpoint = checkpoint_dir / "state.json"

step = json.loads(checkpoint.read_text())["step"] if checkpoint.exists() else 0
print(f"attempt {attempt}: {'resuming from step ' + str(step) if step else 'starting fresh'}", flush=True)

for _ in range(3):
    step += 1
    report.progress(step=step, checkpoint_version=step)
    tmp = checkpoint.with_suffix(".tmp")
    tmp.write_text(json.dumps({"step": step}))
    tmp.replace(checkpoint)  # atomic, so a crash never leaves half a checkpoint
    print(f"step {step} done, checkpoint saved", flush=True)

if attempt < 3:
    print(f"attempt {attempt}: simulated crash (e.g. a NaN, an OOM, a flaky filesystem)", file=sys.stderr, flush=True)
    sys.exit(1)

report.final(steps=step)
print(f"finished at step {step} on attempt {attempt}", flush=True)
