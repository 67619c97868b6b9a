"""Cloud calls in parallel: bounded concurrency, and a limit on how many creates start per second.

`run_all` hands a batch of argvs to a thread pool of `workers` and returns every
result in order, so 50 deletes and 50 creates cost about one call's latency
each batch, not fifty. Creates are spaced by `create_rate` per second (the
API's quota), without holding the other calls of the batch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from fray.backends.external import CommandResult, Runner


class RateLimit:
    """At most `per_second` starts per second, shared across threads (a simple token spacing)."""

    def __init__(self, per_second: float, clock=time.monotonic, sleep=time.sleep) -> None:
        self._gap = 1.0 / per_second if per_second > 0 else 0.0
        self._next = 0.0
        self._lock = threading.Lock()
        self._clock, self._sleep = clock, sleep

    def wait(self) -> None:
        with self._lock:
            now = self._clock()
            start = max(now, self._next)
            self._next = start + self._gap
        if start > now:
            self._sleep(start - now)


class CloudCalls:
    def __init__(self, runner: Runner, workers: int = 16, create_rate: float = 10.0,
                 timeout: float = 120.0) -> None:
        self._runner = runner
        self.pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="gcloud")
        self._creates = RateLimit(create_rate)
        self.timeout = timeout

    def run_all(self, argvs: Sequence[Sequence[str]]) -> list[CommandResult]:
        """Run every argv (creates rate-limited), at most `workers` at once; results in input order."""
        futures = [self.pool.submit(self._one, list(argv)) for argv in argvs]
        return [f.result() for f in futures]

    def call(self, argv: Sequence[str]) -> CommandResult:
        """One call on the caller's thread (rate-limited when it is a create); submit it to `pool` to not wait."""
        return self._one(list(argv))

    def _one(self, argv: list[str]) -> CommandResult:
        if "create" in argv[:6]:
            self._creates.wait()
        return self._runner(argv, self.timeout)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
