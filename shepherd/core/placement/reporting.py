"""Which task a failed multi-task attempt is reported by (pure).

The tasks of one attempt (`--replicas N`, `#SBATCH -N 2`, the hosts of a TPU
slice) only make sense together: a multi-host program whose worker 1 died
cannot go on with the others. So they live and die together: when one fails
for good, its backend stops the siblings still running (the local backend
kills their workloads, Slurm's `srun --kill-on-bad-exit` ends the step, the
TPU backend ends the attempt on the slice, `backends.tpu.hosts`), and the
attempt ends as a unit. The daemon then retries the whole group, all N tasks,
as the run's next attempt, under the run's own budgets (there is no separate
group budget): a workload failure spends `--max-retries`, a node fault
`--max-retries-preemption`; once spent, the run ends failed.

Task 0's exit is the attempt's, but a task 0 that was only killed because a
sibling failed says "killed by SIGKILL" (or "terminated by SIGTERM from outside
fray", which would read as a preemption, or nothing at all when it was killed
before it could write). `reporting_task` picks the task the attempt is
classified and described by instead: the one whose failure ended the group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from fray.wrapper import contract


@dataclass(frozen=True)
class TaskEnd:
    """What one task's wrapper wrote when it ended: its exit record and failure record."""

    index: int
    exit: dict[str, Any]
    failure: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        return self.exit.get("exit_code") != contract.EXIT_OK

    @property
    def killed(self) -> bool:
        """Ended by a signal (its own wrapper's or its workload's): maybe only because a sibling failed."""
        code = self.exit.get("exit_code")
        return bool(self.exit.get("workload_signal") or self.exit.get("received_signal")) or \
            (isinstance(code, int) and code >= contract.EXIT_SIGNALLED_BASE)


def reporting_task(task0: TaskEnd | None, others: Sequence[TaskEnd], count: int) -> tuple[TaskEnd | None, str]:
    """The task whose end the attempt is classified by, and the prefix of its detail (`task 1 of 3: `).

    `task0`: None when task 0 left no exit record (killed before it could write one); `others`: the
    ended tasks besides task 0; `count`: the attempt's tasks. A task 0 that succeeded speaks for itself
    (a sibling stopped after it finished is not a failure of the group). Else, of the tasks that
    failed, one that failed on its own goes before one that was killed, then the earliest. Without
    task 0's record only a task that failed on its own speaks; None then leaves it to the backend.
    """
    if count < 2 or (task0 is not None and not task0.failed):
        return task0, ""
    failed = [end for end in (task0, *others) if end is not None and end.failed and (task0 or not end.killed)]
    if not failed:
        return task0, ""
    chosen = min(failed, key=lambda end: (end.killed, _ended_at(end), end.index))
    return chosen, f"task {chosen.index} of {count}: "


def siblings_finishing(task0: TaskEnd, ended: Sequence[TaskEnd], count: int, gone: bool, now: float,
                       grace_sec: float) -> bool:
    """Whether to wait before ending an attempt whose task 0 succeeded while a sibling is still running.

    The hosts of one program finish together, give or take a few seconds; ending the attempt at task 0's
    exit would make the backend tear the rest down (the TPU backend deletes the slice) while host 3 still
    writes its shard of the last checkpoint or its last lines of output. So the attempt waits for every
    task that has a folder to write its exit record, for at most `grace_sec` (the run's stop grace) after
    task 0 ended, and not at all once the backend says the attempt is gone. What the siblings wrote does
    not change the verdict: task 0's success speaks for the group (`reporting_task`).
    """
    if count < 2 or task0.failed or gone or len(ended) >= count - 1:
        return False
    at = task0.exit.get("ended_at")
    return isinstance(at, (int, float)) and now - at < grace_sec


def _ended_at(end: TaskEnd) -> float:
    at = end.exit.get("ended_at")
    return float(at) if isinstance(at, (int, float)) else math.inf
