"""The contract between the wrapper on the node and the shepherd on the login side.

File names inside an attempt folder, the wrapper's exit codes, and the
environment variables a workload sees. `shepherd` imports these names rather
than spelling them again, so the two sides cannot drift apart.
"""

from __future__ import annotations

# Files in runs/<run_id>/attempts/<n>/, each written only by the wrapper
# (or by the workload through `wrapper.report`).
STDOUT = "stdout.log"
STDERR = "stderr.log"
WRAPPER_LOG = "wrapper.log"  # the wrapper's own diagnostics
HEARTBEAT = "heartbeat"  # "<epoch_seconds>\n"
STARTED = "started.json"  # host, pid, started_at: written once the wrapper is up
PROGRESS = "progress.json"
PROBE = "probe.json"
RESULT = "result.json"  # what the workload passed to report.final()
FINAL = "final.json"  # run_once success marker
FAILURE = "failure.json"  # on every nonzero exit
EXIT = "exit.json"  # always, as the wrapper's last act

# Wrapper exit codes. A wrapper ended by a signal it received exits 128 + signum.
EXIT_OK = 0
EXIT_NODE_FAULT = 42
EXIT_FOREIGN_GPU_PROCESSES = 43
EXIT_CUDA_FAILURE = 44
EXIT_WORKLOAD_FAILURE = 50
EXIT_SIGNALLED_BASE = 128

NODE_FAULT_EXITS = frozenset({EXIT_NODE_FAULT, EXIT_FOREIGN_GPU_PROCESSES, EXIT_CUDA_FAILURE})

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
ENV_CLUSTER_SPEC_FRAY = "fray"  # the FRAY_CLUSTER_SPEC value for "the cluster behind FRAY_HOME"

# Defaults of the wrapper's command line (`python -m wrapper run ...`).
DEFAULT_HEARTBEAT_INTERVAL_SEC = 10.0
DEFAULT_STOP_GRACE_SEC = 30.0

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
