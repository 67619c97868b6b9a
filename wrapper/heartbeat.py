"""The heartbeat: `heartbeat` in the attempt folder, rewritten as "<epoch_seconds>\\n".

(With FRAY_RECORDS=write-once each beat is a new version in `heartbeat.d/` instead:
fray.wrapper.versions.)

The content is the beat, not the file's mtime: the clocks of a file server
and of the nodes disagree. An attempt whose beat stops changing is
unresponsive. The first beat is written synchronously, by `start()` or by the wrapper's `beat()` before
any other work, so that the time from submit to first heartbeat measures the
scheduler and the node, not the wrapper.

`hold()` stops the beats without stopping the wrapper: a failing health
command (fray.wrapper.health) uses it to make the shepherd see exactly what it sees
for a hung node - a stale heartbeat - and act as it does for one.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from . import fence, records


def beat_text(now: float) -> str:
    return f"{now:.3f}\n"


class Heartbeat:
    """A daemon thread that rewrites the heartbeat file every `interval` seconds until `stop()`."""

    def __init__(self, path: str | os.PathLike[str], interval: float, log: Callable[[str], None]) -> None:
        if not interval > 0:
            raise ValueError(f"heartbeat interval must be positive, not {interval!r}")
        self.path = os.fspath(path)
        self.interval = interval
        self._log = log
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fray-heartbeat", daemon=True)
        self._failing = False
        self._held = False
        self._silenced = False

    def hold(self) -> None:
        """Write no more beats until `release()`; the last one ages from now on."""
        self._held = True

    def release(self) -> None:
        """Beat again, starting now."""
        self._held = False
        self.beat()

    def silence(self) -> None:
        """No beat ever again (the attempt was superseded); unlike `stop`, waits for nothing."""
        self._silenced = True
        self._stopping.set()

    def beat(self) -> bool:
        """Write one heartbeat now; False (logged once per streak of failures) if it could not be written."""
        if self._silenced:
            return False
        try:
            records.write_record(self.path, beat_text(time.time()).encode("ascii"), durable=False)
        except fence.Superseded:
            # Checked before the write (fray.wrapper.fence.guard): a wrapper thawed past its fence beats no more.
            self.silence()
            return False
        except OSError as exc:
            if not self._failing:
                self._log(f"cannot write heartbeat {self.path}: {exc}; will keep trying every {self.interval:g}s")
            self._failing = True
            return False
        if self._failing:
            self._log(f"heartbeat {self.path} is being written again")
        self._failing = False
        return True

    def start(self, beat: bool = True) -> "Heartbeat":
        """Beat now (unless `beat` is False: the caller just did), then every `interval` from a thread."""
        if beat:
            self.beat()
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stopping.wait(self.interval):
            if not self._held:
                self.beat()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop beating; waits at most `timeout` for a write in progress (a hung filesystem must not hang the wrapper)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
