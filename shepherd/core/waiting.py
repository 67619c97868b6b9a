"""What a person waiting on runs is told, and how the wait ends (pure).

`fray wait`, `fray submit --wait` and `--follow` poll the runs' rows (status,
reason, attempt) and print a line whenever one says something new:

    pending: can never start here: it asks for 3 CPUs (this machine offers 2); ...
    restarting: attempt 1 ended: workload_failure (exit 1: boom); retrying in 6s

A running run's reason changes with every heartbeat ("heartbeat 12s old"), so
only a change of status or attempt is news there; a waiting run's reason (what
it waits for, why it restarts) is news whenever it changes. Exit codes, the
same for every waiting command (docs/watching.md: Waiting for runs):

    0  every run completed_success
    1  a run ended otherwise (failed, failed_config, failed_dependency, stopped_manual, ...)
    3  a run can never start where it is (the wait gives up; the run is left as it is)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fray.core.status import ICONS, Status

EXIT_SUCCESS = 0
EXIT_FAILED = 1
EXIT_NEVER_STARTS = 3
EXIT_INTERRUPTED = 130  # Ctrl-C: the runs go on

NEVER_STARTS = "can never start"
# Statuses whose reason is worth printing each time it changes: what the run waits for, or why it restarts.
_WAITING = frozenset({Status.PENDING.value, Status.RESTARTING.value, Status.CRASH_LOOP.value})
_ENDED = frozenset({Status.COMPLETED_SUCCESS.value, Status.FAILED.value, Status.FAILED_CONFIG.value,
                    Status.FAILED_DEPENDENCY.value, Status.STOPPED_MANUAL.value, Status.ENDED_EXPIRED.value})


def news_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """What must change in a run's row for a waiting person to be told again."""
    status = row["status"]
    return status, row.get("attempt"), row["reason"] if status in _WAITING or status in _ENDED else ""


def news_line(row: Mapping[str, Any], several: bool) -> str:
    """`pending: <reason>`, with the run's name first when several runs are waited on."""
    who = f"{row['name']} ({row['run_id']}): " if several else ""
    return f"{who}{row['status']}: {row['reason']}"


def has_ended(row: Mapping[str, Any]) -> bool:
    return row.get("phase") == "ended" and row["status"] in _ENDED


def never_starts(row: Mapping[str, Any]) -> bool:
    """Waiting on something this backend will never have: no wait can end it."""
    return row["status"] == Status.PENDING.value and NEVER_STARTS in row["reason"]


def exit_code(rows: Iterable[Mapping[str, Any]]) -> int | None:
    """The wait's exit code once it is decided (every run ended, or one can never start); None: keep waiting."""
    rows = list(rows)
    if any(never_starts(row) for row in rows):
        return EXIT_NEVER_STARTS
    if not all(has_ended(row) for row in rows):
        return None
    return EXIT_SUCCESS if all(row["status"] == Status.COMPLETED_SUCCESS.value for row in rows) else EXIT_FAILED


def count_line(rows: Iterable[Mapping[str, Any]]) -> str:
    """`7/10 ended: 6 ✓ completed_success, 1 ✗ failed`: a sweep's progress in one line."""
    rows = list(rows)
    ended: dict[str, int] = {}
    for row in rows:
        if has_ended(row):
            ended[row["status"]] = ended.get(row["status"], 0) + 1
    parts = ", ".join(f"{count} {ICONS[Status(status)]} {status}" for status, count in sorted(ended.items()))
    return f"{sum(ended.values())}/{len(rows)} ended" + (f": {parts}" if parts else "")


def expected(row: Mapping[str, Any]) -> str:
    """What should happen next to a run waited on, in words ("" when nothing more can be said)."""
    status, reason = row["status"], row["reason"]
    if status in _ENDED:
        return ""
    if NEVER_STARTS in reason:
        return "nothing: no wait can change this"
    if "backing off: next attempt at " in reason:
        return f"attempt {(row.get('attempt') or 0) + 1} at {reason.rsplit('next attempt at ', 1)[1].split()[0]}"
    if reason.startswith("waiting for ") and status == Status.PENDING.value and row.get("attempt") is None:
        return "it starts once what it waits for is done"
    if "submitted, waiting for it to start" in reason or reason.startswith("Slurm: "):
        return f"attempt {row.get('attempt') or 1} starts on a node"
    if status == Status.HEALTHY_RUNNING.value:
        step = f", at step {row['step']}" if row.get("step") is not None else ""
        return f"it ends{step}"
    if status in (Status.RUNNING_DEGRADED.value, Status.UNRESPONSIVE.value):
        return "a heartbeat, or a restart at the heartbeat timeout"
    return ""


def live_line(rows: Iterable[Mapping[str, Any]], since: Mapping[str, float], now: float, started: float) -> str:
    """The one line a terminal shows while it waits, rewritten in place: for one run its status, for how long,
    why and what comes next; for several, the count and for how long the wait has lasted."""
    rows = list(rows)
    if len(rows) == 1:
        row = rows[0]
        elapsed = format_elapsed(now - since.get(row["run_id"], started))
        nxt = expected(row)
        return f"{ICONS[Status(row['status'])]} {row['status']} for {elapsed}: {row['reason']}" + \
            (f" · next: {nxt}" if nxt else "")
    going: dict[str, int] = {}
    for row in rows:
        if not has_ended(row):
            going[row["status"]] = going.get(row["status"], 0) + 1
    parts = ", ".join(f"{count} {status}" for status, count in sorted(going.items()))
    return f"{count_line(rows)}" + (f"; {parts}" if parts else "") + f" · waiting {format_elapsed(now - started)}"


def format_elapsed(seconds: float) -> str:
    """`45s`, `3m05s`, `2h03m`: a wait's elapsed time, to the second."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
