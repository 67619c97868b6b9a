"""What LocalCluster and FrayCluster share: waiting for jobs, the actor secret, the defaults of actors."""

from __future__ import annotations

import time
from typing import Any, Iterable, Sequence

from fray.cluster.api import JobFailed, JobInfo

POLL_START_SEC = 0.02
POLL_MAX_SEC = 0.5


class ClusterBase:
    home: Any
    namespace: str
    job_id: str | None

    def poll(self, job_id: str) -> JobInfo:  # pragma: no cover - each cluster implements it
        raise NotImplementedError

    def secret(self) -> bytes:
        """The secret actor connections prove they know (created on first use, 0600)."""
        from fray.state import actor_secret

        cached = getattr(self, "_secret_cache", None)
        if cached is None:
            cached = actor_secret.load_secret(self.home.secret)
            self._secret_cache = cached
        return cached

    def actor_bind_host(self) -> str:
        return "127.0.0.1"

    def job_info_for_endpoint(self) -> tuple[str | None, int | None]:
        """(run id, attempt) recorded in the endpoint files of actors this process registers."""
        return None, None

    def wait(self, job_ids: str | Sequence[str], raise_on_failure: bool = False,
             timeout: float | None = None) -> Any:
        """Wait for one job (its JobInfo) or several (a list); JobFailed when one did not succeed and
        `raise_on_failure`; TimeoutError at `timeout`."""
        single = isinstance(job_ids, str)
        ids = [job_ids] if single else list(job_ids)
        deadline = None if timeout is None else time.monotonic() + timeout
        infos: dict[str, JobInfo] = {}
        pause = POLL_START_SEC
        while True:
            for job_id in ids:
                if job_id not in infos:
                    info = self.poll(job_id)
                    if info.finished:
                        infos[job_id] = info
                        if raise_on_failure and info.status.value != "succeeded":
                            raise JobFailed(info)
            if len(infos) == len(ids):
                result = [infos[i] for i in ids]
                return result[0] if single else result
            if deadline is not None and time.monotonic() >= deadline:
                waiting = [i for i in ids if i not in infos]
                raise TimeoutError(f"{len(waiting)} job(s) still running after {timeout}s: {', '.join(waiting[:5])}")
            self._sleep(pause, deadline)
            pause = min(POLL_MAX_SEC, pause * 1.5)

    def _sleep(self, pause: float, deadline: float | None) -> None:
        if deadline is not None:
            pause = min(pause, max(0.0, deadline - time.monotonic()))
        time.sleep(pause)

    def _ids(self, job_ids: str | Iterable[str]) -> list[str]:
        return [job_ids] if isinstance(job_ids, str) else list(job_ids)
