"""The command `tpu-vm ssh --worker=all --command` runs on every host of a READY slice.

Each host learns its worker id from the TPU VM (TPU_WORKER_ID where the image
sets it, else the metadata server's `agent-worker-number`), finds the task
placement gave it (task i on worker i, as `--group-by tpu-name` says), exports the task and JAX
variables with host 0 as coordinator, and starts the wrapper detached, so the
ssh returns at once and no cloud call is held for the run's lifetime. Host 0
writes into the attempt folder, host i into its `tasks/i` folder, as on Slurm:
one heartbeat per host in the shared FRAY_HOME.
"""

from __future__ import annotations

import shlex
from typing import Sequence

from fray.backends import wrapper_command
from fray.backends.protocol import SubmitRequest
from fray.state import layout
from fray.wrapper import contract

COORDINATOR_PORT = 8476  # JAX's customary coordinator port
_WORKER_NUMBER = ("curl -sf -H 'Metadata-Flavor: Google' "
                  "http://metadata.google.internal/computeMetadata/v1/instance/attributes/agent-worker-number")


COORDINATOR_PLACEHOLDER = "@FRAY_HOST0@"


def host_command(python: str, request: SubmitRequest, host_of_task: Sequence[int],
                 host0: str = COORDINATOR_PLACEHOLDER, records: str = contract.RECORDS_RENAME) -> str:
    """One shell line for every host; `host0` (host 0's internal address) coordinates.

    `host_of_task[t]` is the tpu-worker-id of the host that runs task t, as
    placement (`fray.core.placement.tpu`) assigned them; each host looks its
    task up by its own worker id. `records` is how the hosts write their
    records (FRAY_RECORDS: write-once where FRAY_HOME is a gcsfuse bucket).

    Built at submit time with the placeholder and kept in the attempt's reference,
    so a restarted daemon can still launch a slice that became READY meanwhile
    (`with_host0` fills in the address of task 0's host from `networkEndpoints`).
    """
    q = shlex.quote
    coordinator = f"{host0}:{COORDINATOR_PORT}"
    task_dir = '"$task_dir"'
    hosts = len(host_of_task)
    tasks = " ".join(f"{host}) i={task};;" for task, host in enumerate(host_of_task))
    per_host = "; ".join([
        f'w="${{TPU_WORKER_ID:-$({_WORKER_NUMBER})}}"',
        f'case "$w" in {tasks} *) echo "fray: no task for TPU worker $w" >&2; exit 1;; esac',
        f'export FRAY_TASK_INDEX="$i" FRAY_NUM_TASKS={hosts}',
        f"export FRAY_COORDINATOR_ADDRESS={q(coordinator)} JAX_COORDINATOR_ADDRESS={q(coordinator)}",
        f'export JAX_PROCESS_ID="$i" JAX_NUM_PROCESSES={hosts}',
        f"export {contract.ENV_RECORDS}={q(records)}",
        *(f"export {key}={q(value)}" for key, value in sorted(request.spec.env.items())),
        f"task_dir={q(str(request.attempt_dir))}",
        f'[ "$i" = 0 ] || task_dir="$task_dir/{layout.TASKS_DIR}/$i"',
        'mkdir -p "$task_dir"',
        "exec " + wrapper_command.shell_command(
            wrapper_command.wrapper_argv(python, request, task_dir), task_dir),
    ])
    # Detached: the wrapper outlives the ssh session; its own output goes to the attempt's folder.
    log = q(str(request.attempt_dir / "launch-host-")) + '"${TPU_WORKER_ID:-x}".log'
    return f"nohup bash -c {q(per_host)} > {log} 2>&1 < /dev/null &"


def with_host0(command: str, ip: str) -> str:
    return command.replace(COORDINATOR_PLACEHOLDER, ip)
