"""What happens to a coscheduled group when one of its tasks fails for good (pure).

The tasks of a coscheduled job (`group_by`) only make sense together: a
multi-host TPU program whose worker 2 died cannot go on with the other
hosts. So when one task fails terminally, its siblings that still run are
killed, and the whole group goes back to pending, to be placed again as a
unit, while the group's retry budget lasts; once it is spent the job ends
with the failure that spent it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

LIVE_STATES = frozenset({"pending", "assigned", "starting", "running"})


@dataclass(frozen=True)
class GroupDecision:
    kill: tuple[str, ...]  # sibling task ids still live, to stop now
    retry: bool  # put every task of the group back to pending
    end_reason: str = ""  # set when the budget is spent: the job ends with this


def on_task_failure(task_states: Mapping[str, str], failed_task: str, reason: str, failures_before: int,
                    budget: int) -> GroupDecision:
    """`task_states`: every task of the group -> its state; `failures_before`: group failures already
    counted against `budget` (this one not included)."""
    kill = tuple(sorted(t for t, state in task_states.items() if t != failed_task and state in LIVE_STATES))
    if failures_before + 1 > budget:
        return GroupDecision(kill, False, f"task {failed_task} failed ({reason}) and the group's "
                                          f"{budget} retries are spent")
    return GroupDecision(kill, True)
