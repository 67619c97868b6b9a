"""The standard-library modules a warm worker's workloads needed, imported once by the worker itself.

A function's workload forked from the local backend's warm worker
(fray.warm.worker, fray.wrapper.forked) unpickles its function, which
imports the function's module and so every module that one imports, in every
workload again. The standard-library modules among them do not change while
the worker lives: each workload names on a pipe those it had to import
(`tell`), the worker imports them itself (`learn`), and every later fork has
them, as a Ray worker keeps what its first task imported. The user's own
modules and installed packages are never learned: they may change on disk
while the worker lives. A learned module that a workload's own folders shadow
(a project's `statistics.py`) is dropped in that workload before its function
is loaded (`unshadow`), so that it imports its own, as a new Python would.
"""

from __future__ import annotations

import gc
import importlib
import os
import select
import sys
from collections.abc import Iterable

# Modules whose import acts on the terminal or the desktop: never imported in the worker.
NEVER = frozenset({"this", "antigravity", "readline", "curses", "tkinter", "turtle", "turtledemo", "idlelib", "test"})
_STDLIB = os.path.dirname(os.__file__) + os.sep  # the standard library's folder (lib-dynload is inside it)

_pipe: int | None = None  # the write end, in the worker and in every process forked from it
_learned: set[str] = set()  # the top-level names the worker imported this way


def open_pipe() -> int:
    """In the worker, before its first fork: the pipe's read end, where the workloads' lines arrive."""
    global _pipe
    read_end, _pipe = os.pipe()
    os.set_blocking(_pipe, False)  # a workload never waits on the worker
    return read_end


def kept_fd() -> int:
    """The descriptor a forked process keeps open for `tell` (-1: none)."""
    return -1 if _pipe is None else _pipe


def tell(known: set[str]) -> None:
    """In a workload that has run: name the standard-library modules it imported beyond `known`."""
    if _pipe is None:
        return
    names = [name for name, module in list(sys.modules.items()) if name not in known and _in_stdlib(name, module)]
    if not names:
        return
    line = ",".join(names).encode()
    if len(line) >= select.PIPE_BUF:  # a write of at most PIPE_BUF bytes is never interleaved with another's
        line = line[:select.PIPE_BUF - 1].rpartition(b",")[0]
    try:
        os.write(_pipe, line + b"\n")
    except OSError:
        pass  # the pipe is full (the worker is busy) or gone: a later workload tells it again


def learn(lines: bytes) -> None:
    """In the worker: import what the workloads named. What an import prints goes nowhere (descriptor 1 is
    the worker's line to the daemon), and what it fails on, the workload that needs it says itself."""
    wanted = [name for name in lines.decode("ascii", "replace").replace("\n", ",").split(",")
              if name and name not in sys.modules and name.partition(".")[0] in sys.stdlib_module_names
              and name.partition(".")[0] not in NEVER]
    if not wanted:
        return
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    null = os.open(os.devnull, os.O_WRONLY)
    for fd in saved:
        os.dup2(null, fd)
    os.close(null)
    try:
        for name in wanted:
            try:
                importlib.import_module(name)
                _learned.add(name.partition(".")[0])
            except (Exception, SystemExit):
                continue
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # what an import printed, into /dev/null before the line is back
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
    gc.freeze()  # as the worker's first imports: out of the collector's sight, so forks do not copy them


def unshadow(folders: Iterable[str]) -> None:
    """In a workload, before its function is loaded: forget the learned modules that a file or package in
    `folders` (its own, first on sys.path) shadows."""
    if not _learned:
        return
    shadowed: set[str] = set()
    for folder in folders:
        try:
            entries = os.listdir(folder or ".")
        except OSError:
            continue
        shadowed.update(name[:-3] if name.endswith(".py") else name for name in entries)
    for top in _learned & shadowed:
        for name in [name for name in sys.modules if name == top or name.startswith(top + ".")]:
            del sys.modules[name]


def forget_imported(before: dict[str, object]) -> bool:
    """In a function host (fray.warm.function_host), after a function: drop every module it imported (or
    replaced) but the standard library's, so that the next function imports the user's modules, and the
    packages it needs, fresh from disk. True when one of them cannot be imported twice in a process (a
    compiled extension): kept then, and the host must retire."""
    unsafe = False
    for name, module in list(sys.modules.items()):
        if before.get(name) is module:
            continue
        if _in_stdlib(name, module):
            _learned.add(name.partition(".")[0])  # kept: a later function's own folder may shadow it (unshadow)
            continue
        path = getattr(module, "__file__", None) or ""
        if path and not path.endswith(".py"):
            unsafe = True  # a compiled extension (numpy's, torch's): initialised once per process
            continue
        del sys.modules[name]
    return unsafe


def _in_stdlib(name: str, module: object) -> bool:
    if name.partition(".")[0] not in sys.stdlib_module_names:
        return False
    path = getattr(module, "__file__", None)
    return path is None or path.startswith(_STDLIB)  # built in, or the standard library's own file
