"""`fray usage`: what the runs used, from their attempts' start and end, and goodput from their steps
(schemas/cli-usage.json).

Reads every run's meta.json (a corrupt one is moved aside, as every reader
does, and listed under `unreadable`) and its progress history
(fray.ops.history), and hands the attempts and their stretches to
fray.core.usage. A TPU run's chips come from its accelerator type through the
table the TPU backend launches by (fray.core.tpu_topology).
"""

from __future__ import annotations

import time
from typing import Any

from fray.core.tpu_topology import shape
from fray.core import goodput, usage, values
from fray.core.model import Meta, RunSpec
from fray.ops.history import run_history
from fray.errors import CorruptFileError, UsageError
from fray.state import store
from fray.state.layout import Home

DEFAULT_SINCE = "7d"
ALL_TIME = "all"


def parse_since(text: str) -> float | None:
    """Seconds back from now, or None for `all`."""
    if text.strip().lower() == ALL_TIME:
        return None
    try:
        seconds = values.duration(positive=True)(text)
    except ValueError as exc:
        raise UsageError(f"--since {text!r}: {exc}, or {ALL_TIME}") from None
    return seconds


def resources_of(spec: RunSpec) -> usage.Resources:
    chips = 0
    if spec.tpu:
        try:
            chips = shape(spec.tpu).chips
        except ValueError:
            chips = 0  # a type this version does not know the shape of: counted as no chips, not as an error
    return usage.Resources(spec.cpus * spec.replicas, spec.gpus * spec.replicas, chips)


def usage_view(home: Home, since_text: str = DEFAULT_SINCE, by: str = "run", now: float | None = None) -> dict[str, Any]:
    if by not in usage.GROUPINGS:
        raise UsageError(f"--by {by!r}: choose one of {', '.join(usage.GROUPINGS)}")
    back = parse_since(since_text)
    now = time.time() if now is None else now
    since = None if back is None else now - back
    spans: list[usage.Span] = []
    unreadable: list[str] = []
    for run_id in home.run_ids():
        try:
            raw = store.read_json(home.meta_file(run_id), "meta")
        except CorruptFileError:
            raw = None
        if raw is None:
            unreadable.append(run_id)
            continue
        meta = Meta.from_dict(raw)
        found = run_history(home, meta)
        spans += usage.spans_of(meta, resources_of(meta.spec), goodput.stretches(found.attempts, found.series, now))
    rows, total = usage.tally(spans, by, since, now)
    return {"home": str(home.root), "generated_at": now, "since": since, "since_text": since_text.strip().lower(),
            "by": by, "rows": [row.to_dict() for row in rows], "total": total.to_dict(), "unreadable": unreadable}
