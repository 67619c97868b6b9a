"""What every probe receives and returns.

A probe is a function `(ProbeContext, deadline) -> Finding`, the deadline on
the `time.monotonic()` clock. The context holds what the run asked for and
what the node offers to look at (environment, paths, injectable device
globs); it runs `nvidia-smi -L` at most once for the three probes that read
it. A probe returns `timeout` when a command it ran
hung: the preflight runner treats that, like a probe that never returns, as
a node fault.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import contract
from . import runner

PASSED = "passed"
FAILED = "failed"
SKIPPED = "skipped"
TIMEOUT = "timeout"


class Finding:
    """A probe's verdict: status, one line of detail, and what it saw (JSON)."""

    __slots__ = ("status", "detail", "data")

    def __init__(self, status: str, detail: str, data: dict[str, Any] | None = None) -> None:
        self.status = status
        self.detail = detail
        self.data = data or {}


class ProbeContext:
    """What the probes of one attempt look at."""

    def __init__(
        self,
        *,
        gpus: int = 0,
        tpu_devices: int = 0,
        tpu_device_globs: Sequence[str] = contract.TPU_DEVICE_GLOBS,
        home: str | None = None,
        workdir: str | None = None,
        min_free_disk_mb: int = 0,
        env: Mapping[str, str] | Callable[[], Mapping[str, str]] | None = None,
        python: str | None = None,
    ) -> None:
        self.gpus = gpus
        self.tpu_devices = tpu_devices
        self.tpu_device_globs = tuple(tpu_device_globs)
        self.home = home
        self.workdir = workdir or os.getcwd()
        self.min_free_disk_mb = min_free_disk_mb
        self._env = env
        self.python = python or sys.executable or "python3"
        self._lock = threading.Lock()
        self._gpu_listing: runner.CommandResult | None = None

    @functools.cached_property
    def env(self) -> dict[str, str]:
        """The workload's environment (`env`, or what it returns), built the first time a probe asks for it:
        most attempts run no probe that does."""
        source = self._env() if callable(self._env) else self._env
        return dict(os.environ if source is None else source)

    def command(self, argv: Sequence[str], deadline: float) -> runner.CommandResult:
        """Run a command until `deadline` as the workload would find it: its PATH, environment and folder."""
        cwd = self.workdir if os.path.isdir(self.workdir) else None
        return runner.run(argv, deadline - time.monotonic(), env=self.env, cwd=cwd)

    def gpu_listing(self, deadline: float) -> runner.CommandResult:
        """`nvidia-smi -L`, run once per attempt."""
        with self._lock:
            if self._gpu_listing is None:
                self._gpu_listing = self.command(["nvidia-smi", "-L"], deadline)
            return self._gpu_listing
