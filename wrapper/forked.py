"""A launched function's workload forked from a warm interpreter, instead of started as a new one.

A wrapper forked by a warm worker (fray.warm.daemon_side) runs in a Python
that has already imported fray's function entry point and cloudpickle. Where
its workload is that entry point's shim (`python <run>/script.py`, the frozen
script of every function run) run by this very interpreter, starting a new
Python only to import the same modules again costs more than most short
functions: the workload is forked from this process instead. The child is set
up as `workload.start` sets up a new process (own session, dies with the
wrapper, stdin from /dev/null, the attempt's logs, the working folder, the
workload's environment, the script's folder and PYTHONPATH first on sys.path),
then runs the entry point and exits with its code. Its records, result files,
signals and exit status are those of the new process it replaces.

Forking a process with threads (the heartbeat's) is safe here because the child
only runs code already imported, takes no lock those threads hold (they write
files with os calls and log through their own object), and ends with os._exit.
"""

from __future__ import annotations

import io
import os
import signal
import sys
import traceback
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import NoReturn

from . import procs, warm_imports

_warm = False  # a warm worker, or forked from one (become_warm)
_entry: tuple[str, Callable[[], int]] | None = None  # (shim file name, its main), set by a warm worker


@dataclass
class Forked:
    """What the wrapper keeps of a started workload (the subset of Popen it uses)."""

    pid: int
    returncode: int | None = None


def become_warm() -> None:
    """In a warm worker, before it forks any wrapper: what it forks is on the daemon's machine, a fork of it."""
    global _warm
    _warm = True


def set_entry(shim_name: str, main: Callable[[], int]) -> None:
    """In a warm worker, before it forks the wrapper of a launched run: workloads `python <folder>/<shim_name>`
    run `main`."""
    global _entry
    become_warm()
    _entry = (shim_name, main)


def entry() -> Callable[[], int]:
    """The function entry point a warm worker set (set_entry)."""
    assert _entry is not None
    return _entry[1]


def warm() -> bool:
    """Whether this process is a warm worker or a wrapper forked from one (become_warm was called)."""
    return _warm


def has_entry() -> bool:
    """Whether this warm worker has the launch shim's main (set_entry), for a fork to run instead of the shim."""
    return _entry is not None


def guard_here(read_end: int, ignored: Sequence[signal.Signals], guard: Callable[[], None]) -> NoReturn:
    """In the guardian's fork of a warm wrapper (fray.wrapper.guardian): run `guard` here instead of exec'ing
    a new Python for it, which costs a short function's wrapper more than the function. Set up as the exec'd
    guardian starts: `ignored` signals ignored, the others at their defaults, 0-2 on /dev/null, nothing else
    open but `read_end`. Its working folder becomes / first: a fork of the warm worker in an attempt folder
    passes for that attempt's wrapper (fray.warm.daemon_side.attempt_of)."""
    os.chdir("/")
    default_signals()
    for signum in ignored:
        signal.signal(signum, signal.SIG_IGN)
    close_from(3, keep=read_end)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    new_std_streams(unbuffered=True)
    exit_with(guard)


def applies(argv: Sequence[str]) -> bool:
    """Whether `argv` is the shim run by this interpreter, which a fork of this process can run instead."""
    return (_entry is not None and len(argv) == 2 and os.path.basename(argv[1]) == _entry[0]
            and os.path.realpath(argv[0]) == os.path.realpath(sys.executable))


def start(argv: Sequence[str], env: Mapping[str, str], cwd: str, out: int, err: int) -> Forked:
    """Fork the workload; OSError when the fork fails. The caller closes `out` and `err` (the child has its own)."""
    assert _entry is not None
    main = _entry[1]
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # nothing the wrapper buffered may be written twice
    arm = procs.die_with_this_process()
    pid = os.fork()
    if pid:
        return Forked(pid)

    def workload() -> int:
        become_new_process(out, err, cwd, env, unbuffered=bool(env.get("PYTHONUNBUFFERED")))
        if arm is not None:
            arm()
        sys.argv = [argv[1]]
        extra = [path for path in env.get("PYTHONPATH", "").split(os.pathsep) if path]
        sys.path[:0] = [os.path.dirname(os.path.realpath(argv[1])), *extra]
        warm_imports.unshadow([*sys.path[:1 + len(extra)], cwd])
        known = set(sys.modules)
        try:
            return main()
        finally:
            warm_imports.tell(known)

    exit_with(workload)


def become_new_process(out: int, err: int, cwd: str, env: Mapping[str, str], unbuffered: bool) -> None:
    """In a forked child: what `subprocess.Popen(stdin=DEVNULL, stdout=out, stderr=err, cwd=cwd, env=env,
    start_new_session=True, close_fds=True)` makes of a new process."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    close_from(3, keep=warm_imports.kept_fd())
    os.chdir(cwd)
    for name in [name for name in os.environ if name not in env]:
        del os.environ[name]
    for name, value in env.items():
        if os.environ.get(name) != value:  # most are the parent's already: each change is a putenv
            os.environ[name] = value
    new_std_streams(unbuffered)
    default_signals()


def default_signals() -> None:
    """Signal dispositions as a new Python has them. exec resets every caught signal to its default and
    Python then catches only SIGINT; a fork keeps the parent's handlers, so without this a forked workload
    would run the wrapper's SIGTERM/SIGUSR2 handlers instead of dying of a stop, and would outlive it."""
    signal.set_wakeup_fd(-1)
    for number in _caught_signals():
        try:
            handler = signal.getsignal(number)
        except (OSError, ValueError):
            continue
        if callable(handler):
            signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


def _caught_signals() -> list[int]:
    """The signals this process has a handler for (SigCgt in /proc/self/status: every Python handler is one),
    else every valid signal: asking Python about each of the 64 costs a forked workload more than its start."""
    try:
        with open("/proc/self/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"SigCgt:"):
                    mask = int(line.split()[1], 16)
                    return [number for number in range(1, mask.bit_length() + 1) if mask >> (number - 1) & 1]
    except (OSError, ValueError, IndexError):
        pass
    return [int(number) for number in signal.valid_signals()]


def exit_with(main: Callable[[], int | None]) -> NoReturn:
    """Run `main` as a forked child's whole life and end the child as `python` ends (`run_as_main`)."""
    code = 1
    try:
        code = run_as_main(main)
    finally:
        os._exit(code)


def run_as_main(main: Callable[[], int | None]) -> int:
    """Run `main` and say how `python` would end after it: its return value, a SystemExit's code (a text
    printed, then 1), 1 after an uncaught exception's traceback; the standard streams flushed."""
    code = 1
    try:
        code = main() or 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        _write_job_side_files()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    return code


def _write_job_side_files() -> None:
    """What `report` holds for the files and writes at exit (atexit, which neither os._exit nor a function host's
    next attempt runs): progress (fray.wrapper.progress_buffer, its thread ended) and the history's chunks."""
    from . import history, progress_buffer

    progress_buffer.finish()
    try:
        history.flush()
    except OSError as exc:
        print(f"fray report: progress history not recorded: {exc}", file=sys.stderr)


def new_std_streams(unbuffered: bool) -> None:
    """sys.stdin/stdout/stderr on descriptors 0, 1, 2 as a new Python makes them (the old objects may hold
    what the parent buffered, and were made for the parent's descriptors)."""
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=unbuffered,
                                  line_buffering=not unbuffered)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))


def close_from(lowest: int, keep: int | Collection[int] = -1) -> None:
    """Close every descriptor from `lowest` up but `keep` (close_fds=True of Popen): the wrapper's must not leak."""
    kept = {keep} if isinstance(keep, int) else set(keep)
    for name in os.listdir("/proc/self/fd"):
        if int(name) >= lowest and int(name) not in kept:
            try:
                os.close(int(name))
            except OSError:
                pass  # the listing's own descriptor, closed already
