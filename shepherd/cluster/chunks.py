"""Many short calls in one run: `fray.map(fn, items)` packed (fray.core.batching) or `chunk=N`, and bursts of
`fray.submit` packed alike (fray.cluster.submits, its calls `Applied`), the job side.

A chunk is an ordinary run (one point of the map's sweep; on Slurm one task of
its job array) whose callable is a `Calls`: `fn` and a slice of the items,
`first` being the index in the map of the slice's first item. `entry.main`
hands it to `run`, which makes the calls one after another in this one process
(cloudpickle and `fn` loaded once) and records them in batches in the run's
folder rather than the attempt's, so that a retry sees them
(fray.cluster.call_book: a batch's values, records and output committed
together, a few times a second).

A retry of the run (the run's own budgets: `max_retries`, `max_retries_preemption`)
makes only the calls that have not returned; a call that raised is made again,
as a run that raised is. A call its future cancelled (fray.submit's packed calls:
fray.cluster.call_book's `calls/<index>.cancel`) is not made: it is recorded as
raising CancelledError, and does not fail the run. The attempt exits 1 when one of its calls raised, so
the run fails (and is retried) as a single call's would. Its progress.json counts
the calls returned (`step`) out of `extra.fray_chunk.calls`, rewritten every
PROGRESS_SEC: `fray list` and `fray status` show a chunk as one run, `step 12` of its
25 calls, its point's `calls` naming their range in the map (`0-24`). At the
end the run records how long a call took (fray.cluster.call_times), which the
next map of the same function packs its calls by.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from fray.errors import UsageError
from fray.state.layout import RunPaths

PROGRESS_SEC = 1.0  # how often a chunk's progress.json is rewritten while its calls run

@dataclass(frozen=True)
class Calls:
    """`fn(item)` for each item, the first being item `first` of the map."""

    fn: Callable[..., Any]
    first: int
    items: Sequence[Any]
    timing: tuple[str, str] | None = None  # (key, name) under which the run records its call time (call_times)

    def __call__(self) -> list[Any]:
        """The calls' values in order (what a chunk means anywhere; a chunk run records each instead: `run`)."""
        return [self.fn(item) for item in self.items]

    @property
    def last(self) -> int:
        return self.first + len(self.items) - 1


@dataclass(frozen=True)
class Applied:
    """`fn(*args, **kwargs)` for the calls `fray.submit` packed into a chunk (fray.cluster.submits): each item is
    a call's `(args, kwargs)` and `fn` the function, both cloudpickled when it was submitted (what the call sees
    is what it was given then, as for a run of its own)."""

    fn: bytes

    def __call__(self, arguments: bytes) -> Any:
        import pickle

        args, kwargs = pickle.loads(arguments)
        return _function(self.fn)(*args, **kwargs)


@functools.lru_cache(maxsize=4)
def _function(pickled: bytes) -> Callable[..., Any]:
    """The function unpickled once for all the calls of a chunk (as `fray.map`'s is)."""
    import pickle

    return pickle.loads(pickled)


def check_chunk(chunk: object) -> int:
    """`chunk` as the number of calls per run; UsageError unless it is a positive whole number."""
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise UsageError(f"chunk must be a positive whole number of calls per run (1: one run per call), "
                         f"not {chunk!r}")
    return chunk


def split(fn: Callable[..., Any], items: Sequence[Any], sizes: Sequence[int],
          timing: tuple[str, str] | None = None) -> list[Calls]:
    """The items in runs of `sizes` calls each, in order."""
    parts, start = [], 0
    for size in sizes:
        parts.append(Calls(fn, start, list(items[start:start + size]), timing))
        start += size
    return parts


def even(items: int, chunk: int) -> list[int]:
    """Runs of `chunk` calls (the last may have fewer): what `chunk=N` asks."""
    return [min(chunk, items - start) for start in range(0, items, chunk)]


def run(calls: Calls, paths: RunPaths, home: Path, attempt: int) -> int:
    """Make the calls that have not returned yet, recording them in batches; 1 when one of them raised, else 0."""
    from fray.cluster import call_times
    from fray.cluster.call_book import BatchWriter, CallBook, cancel_file

    book = CallBook(paths, home)
    indexes = range(calls.first, calls.last + 1)
    made_before = book.returned_among(indexes)  # by earlier attempts: not made again
    done = len(made_before)
    _progress(done, calls)
    raised: list[tuple[int, dict[str, Any]]] = []
    took, shown = 0.0, time.monotonic()
    with BatchWriter(paths, attempt, home) as writer:
        for index, item in zip(indexes, calls.items):
            if index in made_before:
                continue
            skipped = os.path.exists(cancel_file(paths, index))  # its future cancelled it: a stat, not a read
            with writer.captured(index) as entry:
                value, record = _make(_cancelled if skipped else calls.fn, item)
            entry.update(record, finished_at=time.time())
            took += entry["finished_at"] - entry["started_at"]
            writer.add(entry, value)
            if entry["outcome"] == "returned":
                done += 1
            elif not skipped:  # a cancelled call does not fail the run
                raised.append((index, entry))
            if time.monotonic() - shown >= PROGRESS_SEC:  # an fsync'd file: not one per call
                _progress(done, calls)
                shown = time.monotonic()
    made = len(calls.items) - len(made_before)
    if made:
        _progress(done, calls)
    if made and calls.timing is not None:
        call_times.write(home, calls.timing[0], calls.timing[1], took / made, made)
    if not raised:
        return 0
    # The last line of stderr is the reason `fray list` and `fray status` give for the run's failure.
    index, record = raised[0]
    more = f" ({len(raised) - 1} more raised)" if len(raised) > 1 else ""
    print(f"fray: call {index} of calls {calls.first}-{calls.last} raised "
          f"{record['type'].rpartition('.')[2]}: {record['message']}{more}", file=sys.stderr, flush=True)
    return 1


def _cancelled(item: Any) -> None:
    from concurrent.futures import CancelledError

    raise CancelledError("cancelled by its future before it began")


def _make(fn: Callable[..., Any], item: Any) -> tuple[bytes | None, dict[str, Any]]:
    """Call `fn(item)`: its pickled value (None: it could not be pickled) and how it ended, for its record."""
    from fray.cluster import call_records, payloads

    try:
        value = fn(item)
    except BaseException as exc:  # the caller gets it back, with the traceback text, as from a run
        if isinstance(exc, KeyboardInterrupt):
            raise
        text = call_records.traceback_text(exc)
        sys.stderr.write(text)
        return _pickled(exc, payloads.dumps)[0], _ended("raised", exc, str(exc), text)
    pickled, why = _pickled(value, payloads.dumps)
    if why is None:
        return pickled, _ended("returned", value, "", None)
    text = f"the job's return value could not be pickled: {why}\n"
    sys.stderr.write(text)
    return None, _ended("raised", value, f"the return value could not be pickled: {why}", text)


def _pickled(value: Any, dumps: Callable[[Any], bytes]) -> tuple[bytes | None, str | None]:
    try:
        return dumps(value), None
    except Exception as exc:  # cloudpickle raises whatever the value's reducers raise
        return None, f"{type(value).__name__}: {exc!r}"


def _ended(outcome: str, subject: Any, message: str, text: str | None) -> dict[str, Any]:
    kind = type(subject)
    return {"outcome": outcome, "type": f"{kind.__module__}.{kind.__qualname__}", "message": message,
            "traceback": text}


def _progress(done: int, calls: Calls) -> None:
    from fray.wrapper import report

    report.progress(step=done, fray_chunk={"calls": len(calls.items), "first": calls.first})
