"""Which processes a closed attempt left running must die (pure).

A process is a stray when the attempt its tag names (fray.wrapper.tags) is
closed: a later attempt exists, or it is the run's last and has ended - the
same judgement the wrapper's fence makes (fray.wrapper.fence.superseded) - or
its run's folder is gone. A run whose meta.json cannot be read is judged not
at all: nothing is killed on a guess. An attempt newer than the meta.json read
(written after it) is not closed either.
"""

from __future__ import annotations

from dataclasses import dataclass

from fray.core.model import AttemptState, Meta


@dataclass(frozen=True)
class RunKnown:
    """What the daemon knows of one run: its meta.json (None when unreadable), and whether its folder exists."""

    meta: Meta | None
    exists: bool = True


def closed(run: RunKnown, attempt: int) -> str | None:
    """Why `attempt` of this run is closed, or None while it may still run (or that cannot be told)."""
    if not run.exists:
        return "the run's folder is gone"
    meta = run.meta
    if meta is None:
        return None
    count = len(meta.attempts)
    if count > attempt:
        return f"attempt {count} has replaced attempt {attempt}"
    if count == attempt and meta.attempts[-1].state == AttemptState.ENDED.value:
        return f"the daemon closed attempt {attempt} ({meta.attempts[-1].cause or 'closed'})"
    return None
