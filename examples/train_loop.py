#!/usr/bin/env python3
#FRAY --name train-loop
#FRAY --max-retries 3 --heartbeat-interval 2 --stop-grace 20s --backoff-base 1s
"""A small training-style loop: it reports progress, checkpoints, resumes, and obeys commands.

    fray submit examples/train_loop.py --follow
    fray control tune train-loop --set learning_rate=3e-4 --set notes="warmup over"
    fray control pause train-loop --in-process      # keeps its allocation, stops stepping
    fray control resume train-loop
    fray control terminate train-loop --reason "good enough" --final-checkpoint
    fray status train-loop                          # commands not yet acknowledged, and their age

Each step it reads new runtime commands (report.commands()) and acknowledges
them; it checkpoints every CHECKPOINT_EVERY steps and whenever fray sends
SIGUSR1 ("checkpoint now", which fray sends before any planned stop), and a
restarted attempt resumes from the latest checkpoint. TRAIN_STEPS and
TRAIN_STEP_SEC (e.g. `fray submit ... --env TRAIN_STEPS=1000`) set its length.
"""

import json
import math
import os
import signal
import sys
import time
from pathlib import Path

from fray import report

STEPS = int(os.environ.get("TRAIN_STEPS", "300"))
STEP_SEC = float(os.environ.get("TRAIN_STEP_SEC", "0.05"))
CHECKPOINT_EVERY = 25

folder = report.checkpoint_dir() or Path("train-loop-checkpoints")
folder.mkdir(parents=True, exist_ok=True)
checkpoint = folder / "state.json"
state = {"step": 0, "checkpoint_version": 0, "learning_rate": 1e-3, "entropy_coef": 0.01, "clip_epsilon": 0.2}
if checkpoint.exists():
    state.update(json.loads(checkpoint.read_text()))
    print(f"resuming from step {state['step']} (checkpoint {state['checkpoint_version']})", flush=True)

signals = {"checkpoint": False, "stop": False}
paused = {"now": False}
signal.signal(signal.SIGUSR1, lambda signum, frame: signals.update(checkpoint=True))
signal.signal(signal.SIGTERM, lambda signum, frame: signals.update(stop=True))


def save() -> None:
    state["checkpoint_version"] += 1
    tmp = checkpoint.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(checkpoint)  # atomic: a crash never leaves half a checkpoint
    report.progress(step=state["step"], checkpoint_version=state["checkpoint_version"])


def obey(command) -> bool:
    """Apply one runtime command and acknowledge it; False when it says to finish."""
    print(f"command {command.id}: {command.type} {command.payload}", flush=True)
    if command.type == "tune":
        changed = {k: v for k, v in command.payload.items() if k in state}
        state.update(changed)
        command.ack(applied=changed)
    elif command.type in ("pause", "resume"):
        paused["now"] = command.type == "pause"
        command.ack(paused=paused["now"])
    elif command.type == "terminate":
        if command.payload.get("final_checkpoint"):
            save()
        command.ack(step=state["step"])
        report.final(step=state["step"], terminated=command.payload["reason"])
        return False
    return True


started = time.monotonic()
while state["step"] < STEPS:
    if not all(obey(command) for command in report.commands()):
        sys.exit(0)
    if signals["checkpoint"] or signals["stop"]:
        save()
        signals["checkpoint"] = False
        if signals["stop"]:
            print(f"stopping at step {state['step']}, checkpoint saved", flush=True)
            sys.exit(0)
    if paused["now"]:
        report.progress(paused=True)
        time.sleep(STEP_SEC)
        continue
    time.sleep(STEP_SEC)  # the "training step"
    state["step"] += 1
    loss = 2.0 * math.exp(-state["learning_rate"] * 50 * state["step"]) + 0.1
    report.progress(step=state["step"], loss=loss, samples_per_sec=state["step"] / (time.monotonic() - started),
                    learning_rate=state["learning_rate"], paused=False)
    if state["step"] % CHECKPOINT_EVERY == 0:
        save()

report.final(step=state["step"], loss=loss)
print(f"finished at step {state['step']}", flush=True)
