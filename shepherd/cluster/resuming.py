"""Checkpointable callables: the call an attempt saves before it loses its node, and the one the next makes.

A launched callable with a `checkpoint` method (a callable class) is asked for
its checkpoint when its attempt is warned or stopped:

    SIGUSR1           "checkpoint now": the wrapper's planned stop (`fray control
                      stop|restart|pause`, a stall) and Slurm's warning before the time
                      limit (--signal=B:USR1@120, passed on by the wrapper); the call goes on
    SIGTERM, SIGINT   the attempt is being stopped (Slurm's time limit or preemption,
                      scancel, the wrapper's stop): checkpoint, then die of that signal

`checkpoint(*args, **kwargs)` gets the arguments of the call and returns a
`fray.Call`, or None when it has nothing to save. The call is cloudpickled to
the attempt's resume-call.pkl (atomically, 0600, and only while the attempt is
still the run's current one), and the next attempt makes the newest such call
of the attempts before it instead of the one submitted (`starting_call`).

The method runs in the signal handler, in the main thread, between two
bytecodes of the call: it sees the object as the call left it at that instant,
so keep the state it saves consistent at every step (assign it whole). A stop
that arrives while a checkpoint is being written waits until it is written.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, Callable

from fray.cluster import payloads
from fray.cluster.api import Call
from fray.errors import StateError
from fray.state.layout import RunPaths

CHECKPOINT_SIGNAL = signal.SIGUSR1
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def starting_call(run: RunPaths, attempt: int, home: Path) -> tuple[Call, int | None]:
    """The call this attempt makes, and the attempt whose checkpoint it is (None: the submitted call).

    The newest resume call of an earlier attempt wins: an attempt that was
    killed before it could checkpoint leaves the one before it in force.
    """
    for number in range(attempt - 1, 0, -1):
        path = run.attempt(number).resume_call
        if path.exists():
            call = payloads.load(path, home)
            if not isinstance(call, Call):
                raise StateError(f"{path} holds a {type(call).__name__}, not a fray.Call")
            return call, number
    fn, args, kwargs = payloads.load(run.payload, home)
    return Call(fn, *args, **kwargs), None


def checkpointable(call: Call) -> bool:
    return callable(getattr(call.fn, "checkpoint", None))


class Checkpointer:
    """The signal handlers that save `call.fn.checkpoint(...)` to `target` while the call runs."""

    def __init__(self, call: Call, target: Path, is_current: Callable[[], bool],
                 announce: Callable[[], object] = lambda: None) -> None:
        self.call = call
        self.target = target
        self.is_current = is_current  # the fence: a superseded attempt saves nothing
        self.announce = announce  # tells the wrapper a checkpoint is written (it waits for one before SIGTERM)
        self.saved = 0
        self._busy = False
        self._stop_signum: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "Checkpointer":
        for signum in (CHECKPOINT_SIGNAL, *STOP_SIGNALS):
            self._previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        """The call is over: its result is written without being interrupted by a checkpoint."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if signum != CHECKPOINT_SIGNAL and self._stop_signum is None:
            self._stop_signum = signum
        if self._busy:
            return  # the checkpoint under way is written first; the stop follows it
        self._busy = True
        try:
            self.save(signal.Signals(signum).name)
        finally:
            self._busy = False
        if self._stop_signum is not None:
            _die(self._stop_signum)

    def save(self, why: str) -> bool:
        """Ask for the checkpoint and write it; False (and a line on stderr saying why) when nothing was saved."""
        try:
            resume = self.call.fn.checkpoint(*self.call.args, **self.call.kwargs)
        except Exception:
            _say(f"{why}: checkpoint() raised, nothing saved:\n{traceback.format_exc()}")
            return False
        if resume is None:
            _say(f"{why}: checkpoint() returned None; the next attempt makes the last call saved")
            return False
        if not isinstance(resume, Call):
            _say(f"{why}: checkpoint() must return fray.Call(fn, *args, **kwargs) or None, not "
                 f"{type(resume).__name__}; nothing saved")
            return False
        if not self.is_current():
            _say(f"{why}: this attempt has been superseded; its checkpoint is not saved")
            return False
        try:
            payloads.dump(self.target, resume)
        except Exception as exc:  # cloudpickle raises whatever the object's reducers raise
            _say(f"{why}: the call checkpoint() returned cannot be saved: {exc!r}")
            return False
        self.saved += 1
        _say(f"{why}: checkpoint {self.saved} saved ({resume!r}); the next attempt resumes from it")
        self.announce()
        return True


def announce_in_progress(progress_path: Path) -> Callable[[], threading.Thread]:
    """An `announce` that raises checkpoint_version in progress.json, from a thread of its own.

    A thread, because the handler may have interrupted the call inside
    report.progress, which holds a lock the handler would wait for forever.
    Only for a call that does not report checkpoint_version itself: raising
    its counter would make its own next report look like a step back.
    """
    ours: list[int | None] = [None]  # the last version written here

    def report_version() -> None:
        from fray.wrapper import report
        from fray.wrapper import face as wrapper

        current = wrapper.checkpoint_version(str(progress_path))
        if current is not None and current != ours[0]:
            return  # the call counts its own checkpoints
        try:
            written = report.progress(checkpoint_version=(current or 0) + 1)
        except (TypeError, ValueError, OSError) as exc:  # the call reported meanwhile: harmless
            _say(f"checkpoint_version not reported: {exc}")
            return
        ours[0] = written["checkpoint_version"] if written else None

    def announce() -> threading.Thread:
        thread = threading.Thread(target=report_version, name="fray-checkpoint-version", daemon=True)
        thread.start()
        return thread

    return announce


def _die(signum: int) -> None:
    """End the process by `signum`, as the call would have ended without a handler."""
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)  # not reached: the default action ends the process


def _say(text: str) -> None:
    print(f"fray: {text}", file=sys.stderr, flush=True)
