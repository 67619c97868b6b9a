"""What the attempt's files say (started, heartbeat, exit, final, failure, progress, tasks' ends), as written: the
node's clock; fray.daemon.sightings puts them on the daemon's before the policy sees them.

A corrupt file reads as missing, and is said once in the run's events, so one
bad file never stops the cycle.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable

from fray.core.placement.reporting import TaskEnd
from fray.core.policy import AttemptFiles
from fray.errors import CorruptFileError
from fray.state import store
from fray.state.layout import RunPaths

log = logging.getLogger("fray.daemon")


def read_attempt_files(reader: store.CachedReader, paths: RunPaths, number: int, gone: bool,
                       event: Callable[[RunPaths, str, str, int], None]) -> AttemptFiles:
    """Attempt `number`'s files; the other tasks' ends only once task 0 ended or the backend lost the attempt."""
    attempt = paths.attempt(number)

    def safe(path: Path, schema: str) -> dict[str, Any] | None:
        try:
            return reader.read(path, schema)
        except CorruptFileError as exc:
            log.error("%s", exc)
            event(paths, "error", str(exc), number)
            return None

    exit_record = safe(attempt.exit, "exit")
    indexes = [0]
    tasks: list[TaskEnd] = []
    if exit_record is not None or gone:
        # In a group that failed the task that failed first says why; one whose task 0 succeeded waits
        # for the others to end (placement.reporting).
        indexes = attempt.task_indexes()
        for index in indexes[1:]:
            task_exit = safe(attempt.task(index).exit, "exit")
            if task_exit is not None:
                tasks.append(TaskEnd(index, task_exit, safe(attempt.task(index).failure, "failure")))
    beat, damaged = store.heartbeat_reading(attempt.heartbeat)
    return AttemptFiles(
        started=safe(attempt.started, "started"),
        heartbeat_at=beat,
        heartbeat_problem="unreadable" if damaged else None,
        exit=exit_record,
        # The wrapper writes them before exit.json: read once that is there (a look before would race its writes).
        final=safe(attempt.final, "final") if exit_record is not None else None,
        failure=safe(attempt.failure, "failure") if exit_record is not None else None,
        progress=safe(attempt.progress, "progress"),
        tasks=tuple(tasks),
        task_count=len(indexes),
    )
