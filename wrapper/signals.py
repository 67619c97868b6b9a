"""Signals the wrapper receives, passed on to the workload's process group.

SIGTERM and SIGINT mean "stop": they are forwarded, the first one is
remembered (the wrapper then exits 128 + signum), and the main thread is woken
to start the --stop-grace countdown. SIGUSR1 asks the workload for a
checkpoint: the main thread passes it on to the processes that catch it
(`fray.wrapper.stopping.request_checkpoint`), never to the whole group. SIGUSR2 is the shepherd's planned stop
(contract.PLANNED_STOP_SIGNAL): remembered like a stop but not forwarded, since
`fray.wrapper.stopping` first asks for a checkpoint and only then sends SIGTERM.
Handlers do no more than a syscall or two;
the waiting happens in the main thread, woken through a pipe (setting a
threading.Event from a handler can deadlock on the Event's own lock).
"""

from __future__ import annotations

import os
import select
import signal
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
CHECKPOINT = signal.SIGUSR1
PLANNED_STOP = signal.SIGUSR2


class Wakeup:
    """A self-pipe: `notify()` is safe from signal handlers and threads, `wait()` sleeps until one."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)

    def notify(self) -> None:
        try:
            os.write(self._write, b"\0")
        except OSError:
            pass  # the pipe is full: a wakeup is pending anyway

    def wait(self, timeout: float | None) -> None:
        """Return after a notify() (earlier or during the wait) or after `timeout` seconds."""
        select.select([self._read], [], [], timeout)
        try:
            while os.read(self._read, 512):
                pass
        except OSError:
            pass  # BlockingIOError: drained

    def close(self) -> None:
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass


class SignalRelay:
    """Installs the handlers; forwards to the workload's process group once it is known."""

    def __init__(self, wakeup: Wakeup) -> None:
        self._wakeup = wakeup
        self.pgid: int | None = None
        self.stop_signum: int | None = None  # the first SIGTERM/SIGINT/SIGUSR2 received
        self.checkpoint_requested = False  # a SIGUSR1 not yet passed on

    def install(self) -> None:
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._on_stop)
        signal.signal(CHECKPOINT, self._on_checkpoint)
        signal.signal(PLANNED_STOP, self._on_planned_stop)

    @property
    def planned(self) -> bool:
        """Whether the stop is the shepherd's planned one (checkpoint first)."""
        return self.stop_signum == PLANNED_STOP

    def attach(self, pgid: int) -> None:
        """From now on forward to `pgid`; passes on a stop that arrived while the workload was starting."""
        self.pgid = pgid
        if self.stop_signum in STOP_SIGNALS:
            self.send(self.stop_signum)

    def detach(self) -> None:
        """Stop forwarding: once the group is gone its id may be reused by an unrelated process."""
        self.pgid = None

    def send(self, signum: int) -> None:
        """Signal the workload's process group (nothing once it is detached)."""
        if self.pgid is None:
            return
        try:
            os.killpg(self.pgid, signum)
        except (ProcessLookupError, PermissionError):
            pass  # the group is gone already

    def _on_stop(self, signum: int, frame: Any) -> None:
        if self.stop_signum is None:
            self.stop_signum = signum
        self.send(signum)
        self._wakeup.notify()

    def take_checkpoint_request(self) -> bool:
        """Whether a SIGUSR1 arrived since the last call."""
        requested, self.checkpoint_requested = self.checkpoint_requested, False
        return requested

    def _on_checkpoint(self, signum: int, frame: Any) -> None:
        self.checkpoint_requested = True
        self._wakeup.notify()

    def _on_planned_stop(self, signum: int, frame: Any) -> None:
        if self.stop_signum is None:
            self.stop_signum = signum
        self._wakeup.notify()
