"""Many short calls in one run: `fray.map(fn, items, chunk=N)`, the job side and the files.

A chunk is an ordinary run (one point of the map's sweep; on Slurm one task of
its job array) whose callable is a `Calls`: `fn` and a slice of the items,
`first` being the index in the map of the slice's first item. `entry.main`
hands it to `run`, which makes the calls one after another in this one process
(cloudpickle and `fn` loaded once) and records each call as it finishes, in the
run's folder rather than the attempt's, so that a retry sees them:

    calls/<i>.pkl    call i's return value or exception (cloudpickle, 0600), written first
    calls/<i>.json   how it ended (schemas/call-result.json), written next: the future's signal
    calls/<i>.out    what it printed to stdout (.err: stderr), every try in order; the
                     attempt's stdout and stderr get a copy once the call returns

A retry of the run (the run's own budgets: `max_retries`, `max_retries_preemption`)
makes only the calls that have not returned; a call that raised is made again,
as a run that raised is. The attempt exits 1 when one of its calls raised, so
the run fails (and is retried) as a single call's would. Its progress.json counts
the calls returned (`step`) out of `extra.fray_chunk.calls`: `fray list` and `fray status`
show a chunk as one run, `step 12` of its 25 calls, its point's `calls` naming
their range in the map (`0-24`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from fray.errors import UsageError
from fray.state.layout import RunPaths

CALLS_DIR = "calls"


@dataclass(frozen=True)
class Calls:
    """`fn(item)` for each item, the first being item `first` of the map."""

    fn: Callable[..., Any]
    first: int
    items: Sequence[Any]

    def __call__(self) -> list[Any]:
        """The calls' values in order (what a chunk means anywhere; a chunk run records each instead: `run`)."""
        return [self.fn(item) for item in self.items]

    @property
    def last(self) -> int:
        return self.first + len(self.items) - 1


def check_chunk(chunk: object) -> int:
    """`chunk` as the number of calls per run; UsageError unless it is a positive whole number."""
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise UsageError(f"chunk must be a positive whole number of calls per run (1: one run per call), "
                         f"not {chunk!r}")
    return chunk


def split(fn: Callable[..., Any], items: Sequence[Any], chunk: int) -> list[Calls]:
    """The items in runs of `chunk` calls (the last may have fewer)."""
    return [Calls(fn, start, list(items[start:start + chunk])) for start in range(0, len(items), chunk)]


def call_record(run: RunPaths, index: int) -> Path:
    return run.dir / CALLS_DIR / f"{index}.json"


def call_value(run: RunPaths, index: int) -> Path:
    return run.dir / CALLS_DIR / f"{index}.pkl"


def call_output(run: RunPaths, index: int, stderr: bool = False) -> Path:
    return run.dir / CALLS_DIR / f"{index}.{'err' if stderr else 'out'}"


def read_record(run: RunPaths, index: int) -> dict[str, Any] | None:
    """Call `index`'s call-result record; None while it has none (or it was corrupt, and moved aside)."""
    from fray.errors import CorruptFileError
    from fray.state import store

    try:
        return store.read_json(call_record(run, index), "call-result")
    except CorruptFileError:
        return None


def returned(run: RunPaths, index: int) -> bool:
    record = read_record(run, index)
    return record is not None and record["outcome"] == "returned"


def run(calls: Calls, paths: RunPaths, home: Path) -> int:
    """Make the calls that have not returned yet, recording each; 1 when one of them raised, else 0."""
    from fray.cluster import call_records
    from fray.state import store
    from fray.wrapper import report

    store.make_dirs(paths.dir / CALLS_DIR)
    indexes = range(calls.first, calls.last + 1)
    made_before = {i for i in indexes if returned(paths, i)}  # by earlier attempts: not made again
    done = len(made_before)
    report.progress(step=done, fray_chunk={"calls": len(calls.items), "first": calls.first})
    raised: list[int] = []
    for index, item in zip(indexes, calls.items):
        if index in made_before:
            continue
        with _captured(call_output(paths, index), call_output(paths, index, stderr=True)):
            try:
                value = calls.fn(item)
            except BaseException as exc:  # the caller gets it back, with the traceback text, as from a run
                if isinstance(exc, KeyboardInterrupt):
                    raise
                outcome = call_records.write_raised(exc, call_record(paths, index), call_value(paths, index))
            else:
                outcome = call_records.write_returned(value, call_record(paths, index), call_value(paths, index))
        if outcome:
            raised.append(index)
        done += outcome == 0
        report.progress(step=done, fray_chunk={"calls": len(calls.items), "first": calls.first})
    if not raised:
        return 0
    # The last line of stderr is the reason `fray list` and `fray status` give for the run's failure.
    record = read_record(paths, raised[0]) or {"type": "?", "message": ""}
    more = f" ({len(raised) - 1} more raised)" if len(raised) > 1 else ""
    print(f"fray: call {raised[0]} of calls {calls.first}-{calls.last} raised "
          f"{record['type'].rpartition('.')[2]}: {record['message']}{more}", file=sys.stderr, flush=True)
    return 1


@contextlib.contextmanager
def _captured(out: Path, err: Path) -> Iterator[None]:
    """File descriptors 1 and 2 go to the call's own files while it runs (its subprocesses' output too), and what
    it wrote is copied to the attempt's streams after, so the attempt's stdout still holds every call in order."""
    sys.stdout.flush()
    sys.stderr.flush()
    streams = []
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        streams.append((fd, os.dup(fd), target, os.fstat(target).st_size))
        os.dup2(target, fd)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, saved, target, start in streams:
            os.dup2(saved, fd)
            os.close(saved)
            os.close(target)
            with open(out if fd == 1 else err, "rb") as handle:
                handle.seek(start)
                while block := handle.read(1 << 20):
                    _write_all(fd, block)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]
