"""The contract between the wrapper on the node and the shepherd on the login side.

File names inside an attempt folder, the wrapper's exit codes, and the
environment variables a workload sees. `shepherd` imports these names rather
than spelling them again, so the two sides cannot drift apart.
"""

from __future__ import annotations

import os

# FRAY_HOME/runs/<run_id>/meta.json: the run's state, written only by the daemon;
# the wrapper reads it to know whether its attempt is still current (fray.wrapper.fence).
RUNS_DIR = "runs"
META = "meta.json"
# Its last good copy, written beside it with it: what a corrupt meta.json is read and restored from.
META_COPY = "meta.last-good.json"

# Files in runs/<run_id>/attempts/<n>/, each written only by the wrapper
# (or by the workload through `fray.wrapper.report`).
STDOUT = "stdout.log"
STDERR = "stderr.log"
WRAPPER_LOG = "wrapper.log"  # the wrapper's own diagnostics
HEARTBEAT = "heartbeat"  # "<epoch_seconds>\n"
STARTED = "started.json"  # host, pid, started_at: written once the wrapper is up
PROGRESS = "progress.json"
HISTORY = "history.jsonl"  # every step and checkpoint, appended and thinned (fray.wrapper.history)
PROBE = "probe.json"  # preflight probe results (fray.wrapper.probes)
HEALTH = "health.json"  # the --health-cmd checks so far (fray.wrapper.health)
HEALTH_OUTPUT = "health.out"  # what the last health check printed
RESULT = "result.json"  # what the workload passed to report.final()
FINAL = "final.json"  # run_once success marker
FAILURE = "failure.json"  # on every nonzero exit
WATCH = "watch.json"  # what the hang watch sees: I/O waits, what it could not see, stacks taken (fray.wrapper.hangwatch)
STACKS = "stacks.txt"  # the workload's Python stacks, taken before ending it for a hang or a stall
EXIT = "exit.json"  # always, as the wrapper's last act

# Code snapshots (fray.state.snapshots writes them, fray.wrapper.code materializes them):
# <FRAY_HOME>/snapshots/objects/<sha[:2]>/<sha>[.x] (a file's bytes, read-only; `.x`: executable) and
# <FRAY_HOME>/snapshots/trees/<tree hash>.json (which file is which object); a run's copy is runs/<id>/code/.
SNAPSHOTS_DIR = "snapshots"
SNAPSHOT_OBJECTS = "objects"
SNAPSHOT_TREES = "trees"
EXECUTABLE_SUFFIX = ".x"
CODE_DIR = "code"
# runs/<run_id>/left-out.json, written at submit (schemas/left-out.json): what the run's snapshot left out, by
# which rule; the wrapper reads it when the workload fails on a missing file (fray.wrapper.left_out).
LEFT_OUT = "left-out.json"


def snapshot_object(home: str, sha: str, executable: bool) -> str:
    """Where a snapshot keeps one file's bytes: by content, executable files apart (a hard link shares its mode)."""
    name = sha + (EXECUTABLE_SUFFIX if executable else "")
    return os.path.join(home, SNAPSHOTS_DIR, SNAPSHOT_OBJECTS, sha[:2], name)


def snapshot_tree(home: str, tree: str) -> str:
    return os.path.join(home, SNAPSHOTS_DIR, SNAPSHOT_TREES, tree + ".json")

# Wrapper exit codes. A wrapper ended by a signal it received exits 128 + signum.
EXIT_OK = 0
EXIT_NODE_FAULT = 42
EXIT_FOREIGN_GPU_PROCESSES = 43
EXIT_CUDA_FAILURE = 44
EXIT_FENCED = 45  # this attempt was superseded: the workload was killed and nothing more was written
EXIT_WORKLOAD_FAILURE = 50
EXIT_SIGNALLED_BASE = 128

NODE_FAULT_EXITS = frozenset({EXIT_NODE_FAULT, EXIT_FOREIGN_GPU_PROCESSES, EXIT_CUDA_FAILURE})

# The descriptor on which a local function host (fray.warm.function_host) holds the folder of the attempt it
# serves: how the local backend finds that attempt's process, the host's working folder being the function's.
ATTEMPT_FD = 1000

# Environment a workload sees (set by the wrapper from its arguments).
ENV_HOME = "FRAY_HOME"
ENV_RUN_ID = "FRAY_RUN_ID"
ENV_JOB_ID = "FRAY_JOB_ID"
ENV_JOB_NAME = "FRAY_JOB_NAME"
ENV_ATTEMPT = "FRAY_ATTEMPT"
ENV_ATTEMPT_DIR = "FRAY_ATTEMPT_DIR"
ENV_NAMESPACE = "FRAY_NAMESPACE"
ENV_PARENT_JOB_ID = "FRAY_PARENT_JOB_ID"
ENV_CLUSTER_SPEC = "FRAY_CLUSTER_SPEC"
ENV_RESUME = "FRAY_RESUME"
ENV_CHECKPOINT_DIR = "FRAY_CHECKPOINT_DIR"
ENV_COMMANDS_DIR = "FRAY_COMMANDS_DIR"  # runs/<run_id>/commands: runtime commands (fray.wrapper.commands)
# "<run_id>:<attempt>:<FRAY_HOME>", inherited by every descendant of the workload: the stray killer
# finds what a closed attempt left running by it (fray.wrapper.tags).
ENV_ATTEMPT_TAG = "FRAY_ATTEMPT_TAG"
ENV_CLUSTER_SPEC_FRAY = "fray"
# The experiment trackers' variables the wrapper set (fray.wrapper.trackers), comma-separated: a job launched
# from inside this one knows them for fray's, not the user's.
ENV_TRACKER_VARS = "FRAY_TRACKER_VARS"
# How the wrapper and the workload write the attempt's records (fray.wrapper.versions):
# unset or "rename" (atomic rename: NFS, Filestore, local disk), or "write-once" (gcsfuse).
ENV_RECORDS = "FRAY_RECORDS"
RECORDS_RENAME = "rename"
RECORDS_WRITE_ONCE = "write-once"
RECORDS_MODES = (RECORDS_RENAME, RECORDS_WRITE_ONCE)  # the FRAY_CLUSTER_SPEC value for "the cluster behind FRAY_HOME"

# Defaults of the wrapper's command line (`python -m fray.wrapper run ...`).
DEFAULT_HEARTBEAT_INTERVAL_SEC = 10.0
DEFAULT_STOP_GRACE_SEC = 30.0
# The whole tree idle (no CPU, no progress) this long is a hang: longer than an ML job's quiet spells
# (a checkpoint to a slow file system, a collective waiting for a straggler, the first compile).
DEFAULT_IDLE_TIMEOUT_SEC = 600.0
DEFAULT_FENCE_GRACE_SEC = 60.0  # FRAY_HOME unreadable this long: the workload is killed (fray.wrapper.fence)

# Exit codes outside the table above: a command line the wrapper cannot use
# (argparse's convention), and a bug in the wrapper itself (sysexits EX_SOFTWARE).
EXIT_USAGE = 2
EXIT_WRAPPER_ERROR = 70

# failure.json `cause` values (schemas/failure.json).
CAUSE_WORKLOAD_FAILURE = "workload_failure"
CAUSE_WORKLOAD_SIGNALLED = "workload_signalled"
CAUSE_TERMINATED = "terminated"
CAUSE_NODE_FAULT = "node_fault"
CAUSE_FOREIGN_GPU_PROCESSES = "foreign_gpu_processes"
CAUSE_CUDA_FAILURE = "cuda_failure"
CAUSE_LAUNCH_FAILED = "launch_failed"
CAUSE_HANG_STOPPED = "hang_stopped"  # the main process stopped (state T) for seconds (fray.wrapper.hangwatch)
CAUSE_HANG_IDLE = "hang_idle"  # no CPU and no progress for --idle-timeout
HANG_CAUSES = (CAUSE_HANG_STOPPED, CAUSE_HANG_IDLE)
# It failed on a file its code snapshot left out (fray.wrapper.left_out): retrying cannot help.
CAUSE_SNAPSHOT_LEFT_OUT = "snapshot_left_out"

# Preflight probes (fray.wrapper.probes), in the order they run: cheap and general first.
PROBE_NODE = "node"  # FRAY_HOME writable, free disk
PROBE_GPU = "gpu"  # nvidia-smi -L works and shows the GPUs asked for
PROBE_MIG = "mig"  # CUDA_VISIBLE_DEVICES (GPU indices, GPU or MIG UUIDs) matches what nvidia-smi shows
PROBE_TRESPASSERS = "trespassers"  # no foreign processes on our GPUs
PROBE_CUDA = "cuda"  # allocate, run a kernel, synchronize (torch, cupy or numba)
PROBE_TPU = "tpu"  # accelerator device files present and not held by another process
PROBE_NAMES = (PROBE_NODE, PROBE_GPU, PROBE_MIG, PROBE_TRESPASSERS, PROBE_CUDA, PROBE_TPU)
GPU_PROBES = (PROBE_GPU, PROBE_MIG, PROBE_TRESPASSERS, PROBE_CUDA)
TPU_DEVICE_GLOBS = ("/dev/accel*", "/dev/vfio/[0-9]*")  # TPU v2-v4; v5e and later (VFIO)
DEFAULT_PROBE_TIMEOUT_SEC = 120.0  # a CUDA smoke test imports torch: seconds on a cold shared filesystem
DEFAULT_MIN_FREE_DISK_MB = 1024

# The health command (#FRAY --health-cmd): this many failures in a row hold the heartbeat.
DEFAULT_HEALTH_INTERVAL_SEC = 60.0
DEFAULT_HEALTH_RETRIES = 3

# Runtime commands (runs/<run_id>/commands/): one file per command and per receipt,
# each with a single writer. <id>.json: the envelope (the CLI); <id>.delivered.json
# and <id>.ack.json: the receipts (the workload, through fray.wrapper.report).
COMMAND_TYPES = ("tune", "pause", "resume", "terminate")
COMMAND_SUFFIX = ".json"
DELIVERED_SUFFIX = ".delivered.json"
ACK_SUFFIX = ".ack.json"
COMMAND_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"  # no dots: receipts add theirs

# Signals. SIGUSR1 to the workload means "checkpoint now" (it keeps running).
# SIGUSR2 to the wrapper is the shepherd's planned stop: "checkpoint, then stop"
# (fray.wrapper.stopping); SIGTERM/SIGINT are plain stops, forwarded at once.
PLANNED_STOP_SIGNAL = "SIGUSR2"
