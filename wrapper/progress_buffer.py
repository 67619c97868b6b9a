"""What `report.progress` has been told but not yet written: held in memory, written by one thread (stdlib only).

A call to `report.progress` must cost a training loop nothing (microseconds), so it writes no file.
It checks its values, merges them with this process's previous report (the counters must not go
back: checked here, against memory, and against progress.json as it was when this process first
reported) and hands the document to `put`. The curve's thinning runs there too, on every point
(fray.wrapper.history keeps the lines it would have appended, to be appended by the writer), so
the history keeps exactly the steps it kept when each call wrote its own line.

The writer is a daemon thread started by the first `put`: it writes progress.json (fenced:
fray.wrapper.fence.guard; not fsynced: progress is advisory) and appends the kept history lines
at most every INTERVAL_SEC, and `flush` does the same at once, as does the exit of the
interpreter (atexit). So a process killed outright (SIGKILL, or SIGTERM left to its default
action) loses at most its last INTERVAL_SEC of reports; one that exits (sys.exit, its own
SIGTERM handler returning, an exception) loses none. A report that raises `checkpoint_version`
is written before the call returns: the wrapper's planned stop waits for it
(fray.wrapper.stopping), and a checkpoint is worth a file.

No SIGTERM handler is installed: Python runs a handler only between bytecodes, so a workload
inside a long C call (a collective, a kernel) would outlive its stop until the SIGKILL grace, and
libraries that chain the handler they found (Lightning) would end the process on their own
graceful path.

Once a write finds the attempt superseded, nothing more is written for that folder and each
later `put` raises `Superseded`. A write that fails (a full disk) is warned about once until
one succeeds; its history lines wait for the next write. After a fork the child starts empty:
its parent's reports are its parent's to write.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict

from . import contract, history, records
from .fence import Superseded

INTERVAL_SEC = 0.5  # at most one write of a folder's progress.json per this long

Merge = Callable[[Dict[str, Any], Dict[str, Any], Path], Dict[str, Any]]  # typing's: a job may run Python 3.8


@dataclass
class _Folder:
    """One attempt folder's reports in this process."""

    folder: str
    path: Path  # its progress.json
    last: dict[str, Any]  # the newest document, or what progress.json held when this process first reported
    unwritten: bool = False  # `last` is newer than the file
    superseded: str | None = None  # why nothing more is written for this folder
    told: bool = False  # a failed write was warned about
    lock: threading.Lock = field(default_factory=threading.Lock)  # one write of this folder at a time
    writing: int | None = None  # the thread writing it now


class _Buffer:
    def __init__(self) -> None:
        # The merge and the hand-over of the newest document. Re-entrant: a signal handler that reports (a
        # checkpoint's version) may interrupt this thread inside put(); it must not wait for itself.
        self.lock = threading.RLock()
        self.folders: dict[str, _Folder] = {}
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None
        self.stop = threading.Event()  # the running thread's: end now
        self.closed = False  # the interpreter is exiting: writes happen in the caller
        self.at_exit = False  # _at_exit is registered


_buffer = _Buffer()


def put(folder: str, document: dict[str, Any], merge: Merge) -> dict[str, Any]:
    """Merge `document` with this process's previous report for the attempt folder `folder` and keep it for the
    writer; the merged document. Raises what `merge` raises (nothing kept), or `Superseded` once a write found
    the attempt superseded."""
    buffer = _buffer
    with buffer.lock:
        state = buffer.folders.get(folder)
        if state is None:
            path = Path(folder, contract.PROGRESS)
            state = buffer.folders[folder] = _Folder(folder, path, _on_disk(path))
        if state.superseded is not None:
            raise Superseded(state.superseded)
        merged = merge(document, state.last, state.path)
        urgent = merged.get("checkpoint_version") != state.last.get("checkpoint_version")
        state.last, state.unwritten = merged, True
        try:
            history.record_progress(folder, merged, defer=True)  # the thinning, on every point
        except OSError as exc:
            print(f"fray report: progress history not recorded: {exc}", file=sys.stderr)
        if buffer.thread is None and not buffer.closed:
            _start(buffer)
    if urgent or buffer.closed:
        _write(state, quiet=False)
    if state.unwritten and not buffer.wake.is_set():
        buffer.wake.set()
    return merged


def last(folder: str) -> dict[str, Any] | None:
    """This process's newest report for `folder` (written or not), None when it has made none."""
    with _buffer.lock:
        state = _buffer.folders.get(folder)
        return state.last if state is not None and state.last else None


def flush(quiet: bool = False) -> None:
    """Write every folder's newest report and kept history lines now. Raises `Superseded` (unless `quiet`)
    when this attempt is superseded; a failed write is warned about on stderr."""
    with _buffer.lock:
        states = list(_buffer.folders.values())
    for state in states:
        _write(state, quiet)


def _write(state: _Folder, quiet: bool) -> None:
    if state.writing == threading.get_ident():
        return  # a signal handler inside this thread's own write: the writer thread writes what it reported
    with state.lock:
        state.writing = threading.get_ident()
        try:
            _write_held(state, quiet)
        finally:
            state.writing = None


def _write_held(state: _Folder, quiet: bool) -> None:
    with _buffer.lock:
        if not state.unwritten or state.superseded is not None:
            return
        document, state.unwritten = state.last, False
    try:
        records.write_record(state.path, records.dumps(document).encode("utf-8"), durable=False)
        history.write_deferred(state.folder)
        state.told = False
    except Superseded as exc:
        state.superseded = str(exc)
        history.drop_deferred(state.folder)
        if not quiet:
            raise
    except (OSError, TypeError, ValueError) as exc:
        with _buffer.lock:
            state.unwritten = True  # tried again after the next report, and at exit
        # Progress is advisory: a full disk or a flaky mount must not end a long training run.
        if not state.told:
            state.told = True
            print(f"fray report: progress not recorded: {exc}", file=sys.stderr)


def _on_disk(path: Path) -> dict[str, Any]:
    try:
        document = records.read_json(path)
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: nothing to compare with
    return document if isinstance(document, dict) else {}


def finish() -> None:
    """Write what is held and end the writer thread, forgetting every folder: a workload's end in a process that
    goes on without atexit (a function host serving the next attempt, a forked child's os._exit)."""
    buffer = _buffer
    flush(quiet=True)
    with buffer.lock:
        thread, buffer.thread = buffer.thread, None
        buffer.folders.clear()
    if thread is not None:
        buffer.stop.set()
        buffer.wake.set()
        thread.join(timeout=5)
        buffer.stop, buffer.wake = threading.Event(), threading.Event()


def _start(buffer: _Buffer) -> None:
    buffer.thread = threading.Thread(target=_run, args=(buffer, buffer.stop), name="fray-progress", daemon=True)
    buffer.thread.start()
    if not buffer.at_exit:
        buffer.at_exit = True
        atexit.register(_at_exit, buffer)  # after history's own (atexit is last in, first out): its chunks follow


def _run(buffer: _Buffer, stop: threading.Event) -> None:
    while True:
        buffer.wake.wait()
        if stop.is_set() or buffer is not _buffer or buffer.closed:
            return
        buffer.wake.clear()
        with buffer.lock:
            states = [state for state in buffer.folders.values() if state.unwritten]
        for state in states:
            _write(state, quiet=True)
        if stop.wait(INTERVAL_SEC):  # at most one write per interval
            return


def _at_exit(buffer: _Buffer) -> None:
    if buffer is not _buffer:
        return
    buffer.closed = True
    buffer.wake.set()
    flush(quiet=True)


def _reset_in_child() -> None:
    global _buffer
    _buffer = _Buffer()


os.register_at_fork(after_in_child=_reset_in_child)
