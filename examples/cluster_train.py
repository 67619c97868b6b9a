#!/usr/bin/env python3
#FRAY --name cluster-train
# The driver only waits on the jobs it launches: it holds no core (--cpus 0).
#FRAY --cpus 0 --heartbeat-interval 2
"""Use case 1: a driver launches a training job and follows it.

The training function runs as its own job: under fray a child run that the
daemon restarts on failure (it checkpoints and resumes), locally a thread.

    python examples/cluster_train.py            # LocalCluster: jobs are threads here
    fray submit examples/cluster_train.py --wait  # the driver is a fray job, training a child run
"""

import json
import os

from fray import Entrypoint, JobRequest, ResourceConfig, current_cluster


def train(steps: int, lr: float) -> dict:
    """A toy training loop that checkpoints every step and resumes from the last checkpoint."""
    from fray import report

    ckpt_dir = report.checkpoint_dir()  # None outside fray: no checkpoints then
    state = {"step": 0, "loss": 1.0}
    if ckpt_dir is not None and (ckpt_dir / "state.json").exists():
        state = json.loads((ckpt_dir / "state.json").read_text())
        print(f"resuming from step {state['step']}", flush=True)
    while state["step"] < steps:
        state["step"] += 1
        state["loss"] = round(state["loss"] * (1 - lr), 5)
        report.progress(step=state["step"], loss=state["loss"])
        if ckpt_dir is not None:
            ckpt_dir.mkdir(parents=True, exist_ok=True)
            (ckpt_dir / "state.json").write_text(json.dumps(state))
    print(f"trained {steps} steps, loss {state['loss']}", flush=True)
    return state


def main() -> None:
    cluster = current_cluster()
    job = cluster.launch(JobRequest("train", Entrypoint.from_callable(train, (20, 0.1)),
                                    resources=ResourceConfig(cpus=1), max_retries=2))
    info = cluster.monitor(job) if os.environ.get("FRAY_RUN_ID") else cluster.wait(job)
    if info.status.value != "succeeded":
        raise SystemExit(f"training {info.status.value}: {info.reason}\n{info.error or ''}")
    print(f"driver: training finished at step {info.result['step']} with loss {info.result['loss']}", flush=True)


if __name__ == "__main__":
    main()
