"""A training loop that survives preemption: a callable class whose checkpoint() fray calls.

    python examples/checkpointable_train.py

It submits `Train()` as a function run (`fray.submit`), lets it train a few
steps, then does what a preemption does to it: `fray control restart RUN`
(SIGUSR1, then SIGTERM; on Slurm the time-limit warning and scancel do the
same). On each of those signals fray calls `Train.checkpoint`, which returns
the call to resume with: `fray.Call(self, ...)`, this object with its state
as it is now. The next attempt makes that call, so training goes on from the
step it had reached instead of from zero, and the result says where each
attempt started. TRAIN_STEPS and TRAIN_STEP_SEC set its length.
"""

import os
import subprocess
import sys
import time

import fray
from fray import report

STEPS = int(os.environ.get("TRAIN_STEPS", "60"))
STEP_SEC = float(os.environ.get("TRAIN_STEP_SEC", "0.05"))


class Train:
    """Gradient descent on (w - 3)^2 / 2, one step at a time."""

    def __init__(self) -> None:
        # (step, weight) in one attribute: a checkpoint, which can come between any two
        # bytecodes, never sees a step counted without its weight update, or the reverse.
        self.state = (0, 0.0)
        self.starts: list[int] = []  # the step each attempt started from

    def __call__(self, steps: int, lr: float) -> dict:
        self.starts = [*self.starts, self.state[0]]
        print(f"attempt {os.environ.get('FRAY_ATTEMPT', '-')} starts at step {self.state[0]}", flush=True)
        while self.state[0] < steps:
            step, weight = self.state
            self.state = (step + 1, weight - lr * (weight - 3.0))
            report.progress(step=step + 1, loss=(self.state[1] - 3.0) ** 2 / 2)
            print(f"step {step + 1}", flush=True)
            time.sleep(STEP_SEC)
        return {"steps": self.state[0], "weight": round(self.state[1], 4), "starts": self.starts}

    def checkpoint(self, steps: int, lr: float) -> fray.Call:
        """Called by fray on SIGUSR1/SIGTERM: the call the next attempt makes (self, state and all)."""
        return fray.Call(self, steps, lr)


if __name__ == "__main__":
    future = fray.submit(Train(), STEPS, 0.1, name="checkpointable-train")
    print("run", future.run_id, flush=True)
    while "step 10\n" not in future.logs() and not future.done():  # let it train a little
        time.sleep(0.1)
    # What a preemption does, by hand: `fray control restart RUN`.
    subprocess.run([sys.executable, "-m", "fray", "control", "restart", future.run_id], check=True)
    result = future.result(timeout=300)
    print(f"trained {result['steps']} steps to w={result['weight']}; attempts started at steps {result['starts']}")
