"""The runs a daemon cycle decides from, looked up by id: every run's meta without a pass over all of them.

A cycle asks about other runs by name: a child's parent, an `--after`
upstream, the other members of a job group or a sweep, an actor endpoint's
run. With 10,000 runs in FRAY_HOME, building a run id -> meta table of every
run, or scanning every run for a group's members, cost a steady cycle tens of
milliseconds and made it grow with the runs that ended long ago. `RunView`
answers those questions from the run index as it stands (`fray.daemon.run_index`):
a lookup by id, the runs still going (the only ones a parent, a group or a
sweep can order or hold), and each group's members from an index kept as runs
are read. Iterating the view still visits every run; only the rare questions
that need all of them do (priority credits, a sweep named by `--after`, the
housekeeping at its own pace).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Set

from fray.core.model import Meta
from fray.daemon.cycle_state import RunState


def group_ids(meta: Meta | None) -> tuple[str, ...]:
    """The job group or sweep a run belongs to (its group's id), if any."""
    group = meta.group if meta is not None else None
    return (group["id"],) if group is not None and group.get("id") else ()


class RunView(Mapping[str, "Meta | None"]):
    """run id -> meta (None: unreadable) of every run the index holds, and the questions a cycle asks."""

    def __init__(self, runs: Mapping[str, RunState], going: Set[str], members: Mapping[str, Set[str]]) -> None:
        self._runs = runs
        self._going = going  # run ids not settled (not ended, unreadable, or asked to start again) nor resting
        self._members = members  # group id -> the run ids whose meta names that group

    def __getitem__(self, run_id: str) -> Meta | None:
        return self._runs[run_id].meta

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._runs

    def __iter__(self) -> Iterator[str]:
        return iter(self._runs)

    def __len__(self) -> int:
        return len(self._runs)

    def state(self, run_id: str) -> RunState | None:
        return self._runs.get(run_id)

    def going(self) -> dict[str, Meta | None]:
        """run id -> meta of the runs not settled: every run not ended is among them, but a paused one resting
        (fray.daemon.quiet: no parent, group, sweep gate or --after can order or hold it)."""
        runs = self._runs
        return {run_id: runs[run_id].meta for run_id in self._going if run_id in runs}

    def members(self, group_id: str) -> list[RunState]:
        """Every run of a job group or sweep (ended ones too), in run id order."""
        runs = self._runs
        return [runs[run_id] for run_id in sorted(self._members.get(group_id, ())) if run_id in runs]

    def metas(self) -> Iterator[Meta | None]:
        """Every run's meta (a pass over all of them: for what needs every run)."""
        return (state.meta for state in self._runs.values())
