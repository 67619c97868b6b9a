"""A local run of `--replicas N`: N wrappers side by side on this machine, one per task.

Task 0 is the attempt as the daemon sees it (its wrapper reports in the
attempt folder, its exit is the attempt's); task i reports in
`attempts/<n>/tasks/<i>/`, as on Slurm. Each task's environment names its
index, the task count and a coordinator address on this machine, and gets its
share of the GPUs the ledger handed out.

The tasks live and die together, like `srun --kill-on-bad-exit`: when one
ends without success while others run, or task 0 is gone without a success,
the rest are stopped (`to_stop`): their workloads are killed, so each
wrapper reports a workload failure, and the daemon retries the whole run
under its --max-retries budget, as it would a single task that failed.
Once task 0 succeeded the others may finish: the daemon waits for them up to
the stop grace, then stops what is left with the attempt.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Mapping, Sequence

from fray.wrapper import contract

TASKS_DIR = "tasks"
COORDINATOR_PORT_BASE = 20000


def task_dir(attempt_dir: Path, index: int) -> Path:
    return attempt_dir if index == 0 else attempt_dir / TASKS_DIR / str(index)


def task_index(attempt_dir: str, attempt: int) -> int:
    """Which task a wrapper's --attempt-dir belongs to (0 unless it is `attempts/<n>/tasks/<i>`)."""
    path = Path(attempt_dir)
    if path.parent.name == TASKS_DIR and path.parent.parent.name == str(attempt) and path.name.isdigit():
        return int(path.name)
    return 0


def task_env(run_id: str, index: int, count: int) -> dict[str, str]:
    port = COORDINATOR_PORT_BASE + zlib.crc32(run_id.encode()) % 10000
    return {"FRAY_TASK_INDEX": str(index), "FRAY_NUM_TASKS": str(count),
            "FRAY_COORDINATOR_ADDRESS": f"127.0.0.1:{port}"}


def gpu_share(gpu_ids: Sequence[int], index: int, count: int) -> tuple[int, ...]:
    per_task = len(gpu_ids) // count
    return tuple(gpu_ids[index * per_task:(index + 1) * per_task])


def exit_code(attempt_dir: Path, index: int) -> int | None:
    """The task's wrapper exit code from its exit record; None when it wrote none (yet)."""
    code = _record(attempt_dir, index, contract.EXIT).get("exit_code")
    return code if isinstance(code, int) else None


def workload_pid(attempt_dir: Path, index: int) -> int | None:
    """The task's workload pid (its process group) from the wrapper's started record; None before it."""
    pid = _record(attempt_dir, index, contract.STARTED).get("workload_pid")
    return pid if isinstance(pid, int) and pid > 0 else None


def _record(attempt_dir: Path, index: int, name: str) -> dict:
    try:
        record = json.loads((task_dir(attempt_dir, index) / name).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def to_stop(count: int, alive: Mapping[int, int], exit_codes: Mapping[int, int | None]) -> list[int]:
    """Indexes of the tasks still alive that must stop: a task (task 0 too) ended without success.

    `alive`: task index -> pid of each live wrapper; `exit_codes`: index -> exit code of the ended ones."""
    if not alive:
        return []
    failed = [i for i in range(count) if i not in alive and exit_codes.get(i) != contract.EXIT_OK]
    if failed:
        return sorted(alive)
    return []
