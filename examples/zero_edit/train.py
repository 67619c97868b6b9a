"""A training script written the way nanoGPT's is, and never edited for fray: it prints
`iter N: loss X, time Yms` every iteration, checkpoints to out_dir/ckpt.pt every
checkpoint_interval iterations, resumes from it with --init_from=resume, reads its data from
data/train.bin (made by prepare.py) and logs to W&B with --wandb_log=True. Standard library
only (and wandb when asked), so it runs in any Python 3.8+.

    python prepare.py && python train.py --max_iters=200 --checkpoint_interval=20

`fray submit` runs it unchanged with docs/gallery/plain-pytorch.md's three #FRAY lines.
"""
import json
import math
import os
import sys
import time

# -- nanoGPT's configurator: --key=value overrides the defaults below
init_from = "scratch"  # or "resume": from out_dir/ckpt.pt
out_dir = "out"
data_dir = "data"
max_iters = 200
checkpoint_interval = 20
iter_time = 0.01  # seconds an iteration takes (a real one trains here)
wandb_log = False
wandb_project = "zero-edit"
for arg in sys.argv[1:]:
    key, _, value = arg.lstrip("-").partition("=")
    if key not in globals():
        sys.exit(f"unknown config key: {key}")
    default = globals()[key]
    globals()[key] = (value == "True") if isinstance(default, bool) else type(default)(value)

with open(os.path.join(data_dir, "train.bin"), "rb") as handle:  # nanoGPT's np.memmap of its data
    data = handle.read()

iter_num, weight = 0, 0.0
if init_from == "resume":
    with open(os.path.join(out_dir, "ckpt.pt")) as handle:
        checkpoint = json.load(handle)
    iter_num, weight = checkpoint["iter_num"], checkpoint["weight"]
    print(f"resuming from iteration {iter_num}", flush=True)

run = None
if wandb_log:
    import wandb

    run = wandb.init(project=wandb_project, config={"max_iters": max_iters})

target = sum(data) / max(1, len(data)) / 255.0
while iter_num <= max_iters:
    started = time.time()
    if iter_num % checkpoint_interval == 0 and iter_num > 0:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "ckpt.pt.tmp"), "w") as handle:
            json.dump({"iter_num": iter_num, "weight": weight}, handle)
        os.replace(os.path.join(out_dir, "ckpt.pt.tmp"), os.path.join(out_dir, "ckpt.pt"))
        print(f"saving checkpoint to {out_dir}", flush=True)
    weight += 0.05 * (target - weight)
    loss = (target - weight) ** 2 + 1.0 / math.sqrt(iter_num + 1)
    time.sleep(iter_time)
    print(f"iter {iter_num}: loss {loss:.4f}, time {(time.time() - started) * 1000:.2f}ms", flush=True)
    if run is not None:
        run.log({"iter": iter_num, "train/loss": loss})
    iter_num += 1
if run is not None:
    run.finish()
