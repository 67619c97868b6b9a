"""Benchmark: goodput under a fixed fault schedule on the real Slurm test cluster, fray against `sbatch --requeue`.

One checkpointing training loop (STEPS steps of STEP_SEC seconds, a checkpoint
every EVERY steps, each step appended to a log with its time, job and pid) runs
under the same schedule of faults, each injected the first time its step is reached:

  - node failure at NODE_AT: the job's processes, its slurmstepd and the node's
    slurmd are killed (as a node that loses power);
  - crash at CRASH_AT: the script exits 1;
  - hang at HANG_AT: the script stops itself (SIGSTOP: as a stray `kill -STOP`, a
    debugger, a terminal's Ctrl-Z would) and never goes on.

Once by fray (`#FRAY --backend slurm`, the heartbeat timeout below, every hang
setting at its default),
once by plain `sbatch --requeue` of the same script (the #FRAY lines are comments
there), and once by submitit (a `submitit.helpers.Checkpointable` whose call runs
the same script, with submitit's defaults) when submitit is installed in the
bench's own venv (it is never a fray dependency). For each it prints: finished
or not, wall time (submit to the last step), goodput from the steps (STEPS x STEP_SEC of work over the wall time; an
unfinished run counts the distinct steps it made by the deadline), steps redone,
and each fault's time to recovery (the fault to the first step after it). Then
the schedule's ideal goodput, where each fault costs only its detection window
(the heartbeat timeout for the node, nothing for the crash, the wrapper's
stopped-process threshold for the hang) plus the steps since the last checkpoint, and fray's ratio to it,
and fray's own figure (`fray status`, fray.core.goodput) beside the steps' one.

    export FRAY_SLURM_DIR=/tmp/fray-slurm-i24 FRAY_SLURM_PORT=20817   # optional: a cluster of your own
    python tests/bench/bench_goodput.py [--steps 240] [--step-sec 0.5] [--backoff-base 2s] [--only fray]

    # with the submitit row: a venv of its own
    python3 -m venv /tmp/bench-venv && /tmp/bench-venv/bin/pip install -e . submitit
    /tmp/bench-venv/bin/python tests/bench/bench_goodput.py
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from fray.state import runs, store  # noqa: E402
from fray.state.layout import Home  # noqa: E402
from tests.slurm.fixture import SlurmCluster, start_cluster  # noqa: E402
from fray.wrapper.hangwatch import STOPPED_AFTER_SEC  # noqa: E402

EVERY = 10
HEARTBEAT_TIMEOUT = 8.0
FAST = {"poll_interval_sec": 0.5, "min_snapshot_interval_sec": 0.3, "command_timeout_sec": 60, "sinfo_ttl_sec": 5}

TRAIN = '''#!{python}
#FRAY --backend slurm --name goodput --max-retries 10 --backoff-base {backoff} --startup-grace 30s
#FRAY --heartbeat-interval 1 --heartbeat-timeout {heartbeat}s
#SBATCH --partition=cpu
"""A training loop that checkpoints every {every} steps and resumes from its newest checkpoint."""
import json, os, signal, sys, time
from pathlib import Path

WORK = Path({work!r})
STEPS, STEP_SEC, EVERY = {steps}, {step_sec}, {every}
FAULTS = {{"crash": {crash_at}, "hang": {hang_at}}}
try:
    from fray import report
except ImportError:
    report = None

start = 0
found = sorted(WORK.glob("ckpt-*.json"))
if found:
    start = json.loads(found[-1].read_text())["step"]
log = os.open(WORK / "steps.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
job = os.environ.get("SLURM_JOB_ID", "-")
node = os.environ.get("SLURMD_NODENAME", "-")
for step in range(start + 1, STEPS + 1):
    time.sleep(STEP_SEC)
    os.write(log, f"{{time.time():.3f}} {{step}} {{job}} {{node}} {{os.getpid()}}\\n".encode())
    if report is not None:
        report.progress(step=step, loss=1.0 / step)
    if step % EVERY == 0:
        tmp = WORK / f".ckpt-{{step:06d}}.tmp"
        tmp.write_text(json.dumps({{"step": step}}))
        os.replace(tmp, WORK / f"ckpt-{{step:06d}}.json")
    for kind, at in FAULTS.items():
        marker = WORK / f"fault-{{kind}}"
        if step == at and not marker.exists():
            marker.write_text(str(time.time()))
            if kind == "crash":
                sys.exit(f"crash at step {{step}}")
            os.kill(os.getpid(), signal.SIGSTOP)  # the hang: stopped, never to go on by itself
'''


@dataclass(frozen=True)
class Line:
    t: float
    step: int
    job: str
    node: str
    pid: int


def read_log(work: Path) -> list[Line]:
    try:
        text = (work / "steps.log").read_text()
    except FileNotFoundError:
        return []
    lines = []
    for raw in text.splitlines():
        parts = raw.split()
        if len(parts) == 5:
            lines.append(Line(float(parts[0]), int(parts[1]), parts[2], parts[3], int(parts[4])))
    return lines


def job_pids(job: str) -> list[int]:
    """Every process of Slurm job `job`: its slurmstepd and what runs in it (by the job id in their environment)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if f"[{job}.".encode() in cmdline or f"[{job}]".encode() in cmdline or \
                f"SLURM_JOB_ID={job}\0".encode() in environ:
            found.append(int(entry))
    return found


def inject_node_failure(cluster: SlurmCluster, work: Path, at: int, deadline: float) -> tuple[float, str]:
    """Wait for step `at`, then kill the node it runs on: the job's processes, then its slurmd."""
    while time.monotonic() < deadline:
        hit = next((line for line in read_log(work) if line.step == at), None)
        if hit is not None:
            for pid in job_pids(hit.job):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            cluster.kill_slurmd(hit.node)
            return time.time(), hit.node
        time.sleep(0.05)
    raise TimeoutError(f"step {at} never came")


@dataclass
class Outcome:
    finished: bool
    wall: float
    distinct: int
    redone: int
    recoveries: dict[str, float | None]


def outcome(work: Path, submitted: float, steps: int, step_sec: float, faults: dict[str, float | None]) -> Outcome:
    lines = read_log(work)
    distinct = len({line.step for line in lines})
    last = max((line.t for line in lines), default=submitted)
    recoveries: dict[str, float | None] = {}
    for kind, at in faults.items():
        if at is None:
            recoveries[kind] = None
            continue
        faulted = [line for line in lines if line.t <= at + 1e-3]
        before = faulted[-1].pid if faulted else None
        after = next((line for line in lines if line.t > at and line.pid != before), None)
        recoveries[kind] = None if after is None else after.t - at
    return Outcome(distinct == steps, last - submitted, distinct, len(lines) - distinct, recoveries)


def fault_times(work: Path, node_fault: float | None) -> dict[str, float | None]:
    """When each fault happened: the node's from the bench, the others from the markers the script wrote."""
    found: dict[str, float | None] = {"node": node_fault}
    for kind in ("crash", "hang"):
        marker = work / f"fault-{kind}"
        found[kind] = float(marker.read_text()) if marker.exists() else None
    return found


def script_for(work: Path, args: argparse.Namespace) -> str:
    return TRAIN.format(python=sys.executable, heartbeat=HEARTBEAT_TIMEOUT, every=EVERY, backoff=args.backoff_base,
                        work=str(work), steps=args.steps, step_sec=args.step_sec, crash_at=args.crash_at,
                        hang_at=args.hang_at)


def run_fray(cluster: SlurmCluster, root: Path, args: argparse.Namespace) -> tuple[Outcome, dict]:
    work = root / "fray-work"
    work.mkdir()
    home = Home(root / "fray-home")
    store.ensure_home(home)
    home.config.write_text(json.dumps({"slurm": FAST}))
    code = root / "fray-code"  # the script alone: fray snapshots the folder it is in
    code.mkdir()
    script = code / "train.py"
    script.write_text(script_for(work, args))
    script.chmod(0o755)
    env = cluster.environ()
    daemon = subprocess.Popen([sys.executable, "-m", "fray.daemon", "--home", str(home.root)], env=env,
                              start_new_session=True)
    node = None
    try:
        submitted = time.time()
        run_id = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(code))).run_id
        deadline = time.monotonic() + args.deadline
        node_at, node = inject_node_failure(cluster, work, args.node_at, deadline)
        while time.monotonic() < deadline:
            meta = store.read_json(home.meta_file(run_id), "meta") or {}
            if meta.get("phase") == "ended":
                break
            time.sleep(0.2)
        result = outcome(work, submitted, args.steps, args.step_sec, fault_times(work, node_at))
        status = subprocess.run([sys.executable, "-m", "fray.cli.main", "status", run_id, "--json"], env={
            **env, "FRAY_HOME": str(home.root)}, capture_output=True, text=True, check=True)
        return result, json.loads(status.stdout)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=30)
        cleanup(cluster, node)


def run_sbatch(cluster: SlurmCluster, root: Path, args: argparse.Namespace) -> Outcome:
    work = root / "sbatch-work"
    work.mkdir()
    script = root / "train-sbatch.py"
    script.write_text(script_for(work, args))
    submitted = time.time()
    job = cluster.run("sbatch", "--parsable", "--requeue", f"--output={work}/slurm-%j.out",
                      f"--chdir={work}", str(script)).stdout.strip().split(";")[0]
    return follow_job(cluster, job, work, submitted, args)


def follow_job(cluster: SlurmCluster, job: str, work: Path, submitted: float, args: argparse.Namespace) -> Outcome:
    """Inject the node failure into Slurm job `job`, then wait until it is gone or has made every step."""
    node = None
    try:
        deadline = time.monotonic() + args.deadline
        node_at, node = inject_node_failure(cluster, work, args.node_at, deadline)
        while time.monotonic() < deadline:  # squeue: this cluster has no accounting (sacct) to ask
            state = cluster.run("squeue", "-h", "-j", job, "-o", "%T", check=False).stdout.strip()
            if not state:
                break  # gone: completed, or failed and not requeued (a crash is not requeued by Slurm)
            if len({line.step for line in read_log(work)}) == args.steps:
                break
            time.sleep(0.5)
        cluster.run("scancel", job, check=False)
        return outcome(work, submitted, args.steps, args.step_sec, fault_times(work, node_at))
    finally:
        cleanup(cluster, node)


def run_submitit(cluster: SlurmCluster, root: Path, args: argparse.Namespace) -> Outcome:
    """The same script as a submitit Checkpointable on the same cluster. submitit checkpoints and requeues
    on Slurm's preemption or time-limit signal; a node failure is requeued by Slurm itself (JobRequeue
    defaults to 1); nothing restarts a crash or notices a hang."""
    import runpy

    import submitit

    class Train(submitit.helpers.Checkpointable):
        def __init__(self, script: str) -> None:
            self.script = script

        def __call__(self) -> None:
            runpy.run_path(self.script, run_name="__main__")

    work = root / "submitit-work"
    work.mkdir()
    script = root / "train-submitit.py"
    script.write_text(script_for(work, args))
    executor = submitit.AutoExecutor(folder=work / "submitit", cluster="slurm")
    executor.update_parameters(slurm_partition="cpu", timeout_min=60)
    submitted = time.time()
    return follow_job(cluster, executor.submit(Train(str(script))).job_id, work, submitted, args)


def have_submitit() -> bool:
    import importlib.util

    return importlib.util.find_spec("submitit") is not None


def cleanup(cluster: SlurmCluster, node: str | None) -> None:
    if node is not None:
        cluster.restart_slurmd(node)
        cluster.wait_node(lambda s: s.usable, node, timeout=60)


def show(label: str, result: Outcome, steps: int, step_sec: float) -> float:
    useful = result.distinct * step_sec
    goodput = useful / result.wall if result.wall > 0 else 0.0
    recovery = ", ".join(f"{kind} {'-' if s is None else f'{s:.1f}s'}" for kind, s in result.recoveries.items())
    print(f"{label:<16} finished: {'yes' if result.finished else 'no '}  wall {result.wall:6.1f}s  "
          f"steps {result.distinct}/{steps}  goodput {goodput:5.1%}  steps redone {result.redone:3d}  "
          f"recovery: {recovery}")
    return goodput


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=240)
    parser.add_argument("--step-sec", type=float, default=0.5)
    parser.add_argument("--node-at", type=int, default=55)
    parser.add_argument("--crash-at", type=int, default=125)
    parser.add_argument("--hang-at", type=int, default=195)
    parser.add_argument("--deadline", type=float, default=420.0, help="seconds each system gets")
    parser.add_argument("--only", choices=("fray", "sbatch", "submitit"))
    parser.add_argument("--backoff-base", default="2s", help="fray's --backoff-base (its default: 2s); an attempt "
                        "that made progress restarts without it, so the backoff should cost 0s here")
    args = parser.parse_args()
    cluster = start_cluster()
    os.environ.update(cluster.env)
    work = args.steps * args.step_sec
    redo = sum((at - at // EVERY * EVERY) * args.step_sec for at in (args.node_at, args.crash_at, args.hang_at))
    ideal = work / (work + redo + HEARTBEAT_TIMEOUT + 0.0 + STOPPED_AFTER_SEC)
    print(f"Goodput under faults, real Slurm test cluster ({cluster.root}); {args.steps} steps x {args.step_sec}s, "
          f"checkpoint every {EVERY}; node failure at step {args.node_at}, crash at {args.crash_at}, "
          f"hang at {args.hang_at}")
    with tempfile.TemporaryDirectory(prefix="bench-goodput-") as tmp:
        root = Path(tmp)
        os.chmod(root, 0o755)
        fray_goodput = None
        if args.only in (None, "fray"):
            result, status = run_fray(cluster, root, args)
            fray_goodput = show("fray", result, args.steps, args.step_sec)
            figures = status["goodput"]
            lost = ", ".join(f"{k} {v:.1f}s" for k, v in sorted(figures["lost_sec"].items(), key=lambda kv: -kv[1])
                             if v >= 0.05)
            print(f"{'':<16} fray status: goodput {figures['goodput']:.1%} from the {figures['basis']} "
                  f"(useful {figures['useful_sec']:.1f}s of {figures['wall_sec']:.1f}s; lost {lost}; "
                  f"{figures['redone_steps']} steps redone)")
            delays = [e.get("data", {}).get("delay_sec") for e in status["events"] if e["kind"] == "backoff"]
            print(f"{'':<16} backoff (--backoff-base {args.backoff_base}): "
                  f"{figures['lost_sec'].get('backoff', 0.0):.1f}s lost; the daemon's delays {delays}")
        if args.only in (None, "sbatch"):
            show("sbatch --requeue", run_sbatch(cluster, root, args), args.steps, args.step_sec)
        if args.only in (None, "submitit"):
            if have_submitit():
                show("submitit", run_submitit(cluster, root, args), args.steps, args.step_sec)
            else:
                print(f"{'submitit':<16} not installed in this venv ({sys.executable}): pip install submitit there")
    print(f"ideal for this schedule: {ideal:.1%} (work {work:.0f}s; redo since the last checkpoint {redo:.1f}s; "
          f"detection: node {HEARTBEAT_TIMEOUT:.0f}s heartbeat timeout, crash 0s, hang {STOPPED_AFTER_SEC:.0f}s "
          "stopped; no queue or start time)")
    if fray_goodput is not None:
        print(f"fray / ideal: {fray_goodput / ideal:.2f}")


if __name__ == "__main__":
    main()
