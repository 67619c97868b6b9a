"""What a backend saw of one attempt: the record every backend's snapshot returns and policy reads.

Backends translate their scheduler's words (squeue states, gcloud node states,
a process table) into these few; policy never sees a backend's own vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fray.core.model import StrEnum


class ViewState(StrEnum):
    """Where the backend has an attempt: the only words policy reads of a scheduler."""

    PENDING = "pending"  # queued or being created: not running yet
    RUNNING = "running"
    GONE = "gone"  # ended, cancelled, deleted or never known: the wrapper's files (or `cause`) say how
    UNKNOWN = "unknown"  # the backend could not look this cycle (its command failed): decide nothing from it


@dataclass(frozen=True)
class BackendView:
    """What the backend's snapshot says of one attempt."""

    state: ViewState
    node: str | None = None
    ref: dict[str, Any] | None = None
    detail: str | None = None  # e.g. the scheduler's reason or final state
    cause: str | None = None  # for "gone": the backend's reading (a Cause value), used when the wrapper left no exit record
    # For "pending": why the scheduler holds it, in words (Slurm's pending reason), kept on the attempt and
    # shown by `fray status`; one that says "can never start" ends a wait with exit 3.
    held: str | None = None
