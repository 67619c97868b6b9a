"""FrayCluster: jobs are runs in FRAY_HOME, started and watched by the daemon.

Inside a fray job (FRAY_CLUSTER_SPEC=fray, FRAY_RUN_ID set) every launched job
becomes a child of the current run: its meta records the parent run and
attempt, it inherits the namespace (FRAY_NAMESPACE; a top-level job's is its
own run id) and it runs on the parent's backend. The daemon stops children when
their parent ends or is stopped (fray.core.family). Outside a job the same
calls launch top-level runs in the namespace given (or FRAY_NAMESPACE, else
"default") on the local backend.

`terminate` is a stop request in the run's control.json (as `fray control
stop` writes it, audited), so the daemon applies it through its usual stop
path, and then stops the children as well.
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from fray.wrapper import contract
from fray.state import runs, store
from fray.cluster import launching, payloads
from fray.cluster.api import (ClusterError, JobGroupConfig, JobInfo, JobRequest, JobStatus, Reservation,
                                  ReservationConfig, ResourceConfig)
from fray.cluster.shared import ClusterBase
from fray.errors import CorruptFileError, FrayError, UsageError
from fray.state.layout import Home
from fray.core.model import AttemptState, Meta, Phase

if TYPE_CHECKING:  # the daemon is imported only to start one (a job's cluster never does)
    from fray.daemon.lease import Spawned

END_STATUS = {"completed_success": JobStatus.SUCCEEDED, "failed": JobStatus.FAILED,
              "failed_config": JobStatus.FAILED, "failed_dependency": JobStatus.FAILED,
              "stopped_manual": JobStatus.STOPPED, "ended_expired": JobStatus.STOPPED}


class FrayCluster(ClusterBase):
    def __init__(self, home: str | os.PathLike[str] | None = None, namespace: str | None = None,
                 backend: str | None = None) -> None:
        self.home = Home.resolve(home)
        env_home = os.environ.get(contract.ENV_HOME)
        inside = env_home is not None and Home.resolve(env_home).root == self.home.root
        self.job_id: str | None = os.environ.get(contract.ENV_RUN_ID) if inside else None
        attempt = os.environ.get(contract.ENV_ATTEMPT) if inside else None
        self.attempt: int | None = int(attempt) if attempt and attempt.isdigit() else None
        parent = self._read_meta(self.job_id) if self.job_id else None
        self.namespace: str = (namespace or (os.environ.get(contract.ENV_NAMESPACE) if inside else None)
                               or (parent.namespace if parent else None) or self.job_id or "default")
        self.backend: str = backend or (parent.spec.backend if parent else "local")

    def __repr__(self) -> str:
        return f"FrayCluster(home={str(self.home.root)!r}, namespace={self.namespace!r}, job_id={self.job_id!r})"

    def actor_bind_host(self) -> str:
        return "127.0.0.1" if self.backend == "local" else "0.0.0.0"

    def job_info_for_endpoint(self) -> tuple[str | None, int | None]:
        return self.job_id, self.attempt

    # -- launching ---------------------------------------------------------------------

    def launch_family(self) -> launching.Family:
        """What each run launched from here inherits: its parent (this job, inside one), namespace, backend, workdir."""
        return launching.Family(parent_run_id=self.job_id, parent_attempt=self.attempt, namespace=self.namespace,
                                backend=self.backend, workdir=os.getcwd())

    def launch(self, request: JobRequest) -> str:
        """Write the job as a run (a child of this job, when inside one); its job id (the run id)."""
        self._check_reservation(request)
        meta = self._write([request])[0]
        self.ensure_daemon()
        return meta.run_id

    def launch_group(self, group: JobGroupConfig) -> list[str]:
        """Write every member, or none; the daemon starts them only all together, and ends all of them
        (stopped, with the reason) when one can never start."""
        if not group.jobs:
            raise ClusterError(f"job group {group.name!r} has no jobs")
        for request in group.jobs:
            self._check_reservation(request)
        group_id = f"{runs.slug(group.name)[:60]}-{secrets.token_hex(3)}"
        metas = self._write(list(group.jobs), group_id)
        self.ensure_daemon()
        return [m.run_id for m in metas]

    def _write(self, requests: list[JobRequest], group_id: str | None = None) -> list[Meta]:
        return launching.launch(self.home, requests, self.launch_family(), group_id=group_id)

    def ensure_daemon(self, started: Spawned | None = None) -> None:
        """Make sure a daemon serves FRAY_HOME, so launched runs start (inside a job, the one that started it does).
        `started`: what `start_daemon` returned (the daemon started then is waited for)."""
        if self.job_id is None:  # inside a job, the daemon that started it is serving
            from fray.daemon import lease

            if started is None:
                lease.ensure_running(self.home)
            else:
                lease.await_first_cycle(self.home, started)

    def start_daemon(self) -> Spawned | None:
        """Start a daemon for FRAY_HOME unless one serves (or this is a job), without waiting for it: what
        `ensure_daemon` waits for (fray.daemon.lease.Spawned), None when none was started. Its start (about a
        second) then overlaps the writing of many runs."""
        if self.job_id is not None:
            return None
        from fray.daemon import lease

        return lease.start(self.home)

    # -- watching ------------------------------------------------------------------------

    # The files of FRAY_HOME, read here; RemoteCluster reads the same files over SFTP.

    def _read_json(self, path: Path, kind: str) -> Any:
        return store.read_json(path, kind)

    def _load_value(self, path: Path) -> Any:
        return payloads.load(path, self.home.root)

    def _read_bytes(self, path: Path, offset: int = 0) -> bytes:
        """The file from `offset` on; FileNotFoundError when it is not there (yet)."""
        with open(path, "rb") as handle:
            handle.seek(offset)
            return handle.read()

    def _run_ids(self) -> list[str]:
        return self.home.run_ids()

    def _read_meta(self, job_id: str) -> Meta | None:
        try:
            raw = self._read_json(self.home.run(job_id).meta, "meta")
        except CorruptFileError:
            return None
        return Meta.from_dict(raw) if raw is not None else None

    def poll(self, job_id: str) -> JobInfo:
        meta = self._read_meta(job_id)
        if meta is None:
            raise ClusterError(f"no job {job_id!r} in {self.home.root} (or its meta.json is unreadable)")
        attempt = meta.current
        if meta.phase == Phase.ENDED.value and meta.end is not None:
            status, reason = END_STATUS[meta.end.status], meta.end.reason
        elif meta.in_flight is not None and meta.in_flight.state == AttemptState.RUNNING.value:
            status, reason = JobStatus.RUNNING, f"attempt {meta.in_flight.number} running on {meta.in_flight.node}"
        else:
            status, reason = JobStatus.PENDING, meta.wait_reason or "waiting to start"
        result = error = None
        if status.finished and attempt is not None:
            files = self.home.run(job_id).attempt(attempt.number)
            try:
                record = self._read_json(files.call_record, "call-result")
            except CorruptFileError:
                record = None
            if record is not None and record["outcome"] == "returned" and status is JobStatus.SUCCEEDED:
                result = self._load_value(files.call_value)
            elif record is not None and record["outcome"] == "raised":
                error = record["traceback"] or f"{record['type']}: {record['message']}"
            elif status is JobStatus.FAILED:
                error = self._stderr_tail(job_id, attempt.number)
        return JobInfo(meta.run_id, meta.name, status, reason, meta.parent_run_id, meta.namespace, result, error,
                       len(meta.attempts))

    def _stderr_tail(self, job_id: str, attempt: int, lines: int = 20) -> str | None:
        try:
            text = self._read_bytes(self.home.run(job_id).attempt(attempt).stderr).decode(errors="replace")
        except OSError:
            return None
        return "\n".join(text.splitlines()[-lines:]) or None

    def monitor(self, job_id: str, timeout: float | None = None, out: Any = None) -> JobInfo:
        """Stream the job's stdout (every attempt, in order) until it ends; its JobInfo."""
        out = out or sys.stdout
        deadline = None if timeout is None else time.monotonic() + timeout
        offsets: dict[int, int] = {}
        pause = 0.05
        while True:
            info = self.poll(job_id)
            meta = self._read_meta(job_id)
            for attempt in (meta.attempts if meta else []):
                path = self.home.run(job_id).attempt(attempt.number).stdout
                try:
                    chunk = self._read_bytes(path, offsets.get(attempt.number, 0))
                except FileNotFoundError:
                    continue
                if chunk:
                    offsets[attempt.number] = offsets.get(attempt.number, 0) + len(chunk)
                    out.write(chunk.decode("utf-8", errors="replace"))
                    out.flush()
            if info.finished:
                return info
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} still running after {timeout}s")
            time.sleep(pause)
            pause = min(0.5, pause * 1.5)

    def terminate(self, job_ids: str | Sequence[str]) -> None:
        """Ask the daemon to stop these jobs (and, through it, their children)."""
        for job_id in self._ids(job_ids):
            self._stop(job_id)

    def _stop(self, job_id: str) -> None:
        try:
            runs.request(self.home, job_id, "stop")
        except UsageError as exc:
            if "already ended" not in str(exc):
                raise ClusterError(str(exc)) from None

    def list_jobs(self) -> list[JobInfo]:
        """Every job of this namespace, oldest first."""
        found = []
        for run_id in self._run_ids():
            meta = self._read_meta(run_id)
            if meta is not None and (meta.namespace or meta.run_id) == self.namespace:
                found.append(self.poll(run_id))
        return found

    # -- reservations --------------------------------------------------------------------

    def create_reservation(self, config: ReservationConfig) -> str:
        """Hold resources for jobs launched with JobRequest(reservation=<the id returned>)."""
        reservation_id = f"{runs.slug(config.name)[:60]}-{secrets.token_hex(3)}"
        now = time.time()
        store.make_dirs(self.home.reservations_dir)
        store.create_json(self.home.reservation(reservation_id), {
            "reservation_id": reservation_id, "name": config.name[:128], "backend": self.backend,
            "owner_run_id": self.job_id, "created_at": now, "expires_at": now + config.ttl_sec,
            "min": config.min.to_dict(), "max": config.max.to_dict()}, "reservation")
        return reservation_id

    def get_reservation(self, reservation_id: str) -> Reservation | None:
        """The reservation and what its jobs use now; None when released or expired."""
        raw = self._read_reservation(reservation_id)
        if raw is None or raw["expires_at"] <= time.time():
            return None
        used = [m.spec for m in (self._read_meta(i) for i in self.home.run_ids())
                if m is not None and m.reservation == reservation_id and m.in_flight is not None]
        return Reservation(reservation_id, raw["name"], ResourceConfig.from_dict(raw["min"]),
                           ResourceConfig.from_dict(raw["max"]), raw["created_at"], raw["expires_at"],
                           ResourceConfig(cpus=sum(s.cpus for s in used), gpus=sum(s.gpus for s in used),
                                          mem_mb=sum(s.mem_mb or 0 for s in used) or None))

    def release_reservation(self, reservation_id: str) -> None:
        """Give the resources back; the daemon stops the jobs still admitted against it."""
        try:
            os.unlink(self.home.reservation(reservation_id))
        except FileNotFoundError:
            pass

    def _read_reservation(self, reservation_id: str) -> dict[str, Any] | None:
        try:
            return store.read_json(self.home.reservation(reservation_id), "reservation")
        except (CorruptFileError, FrayError):
            return None

    def _check_reservation(self, request: JobRequest) -> None:
        if request.reservation is None:
            return
        raw = self._read_reservation(request.reservation)
        if raw is None or raw["expires_at"] <= time.time():
            raise ClusterError(f"job {request.name!r}: reservation {request.reservation!r} does not exist or has "
                               "expired (create_reservation returns the id)")
        res = request.resources
        cap = raw["max"]
        if res.cpus > cap["cpus"] or res.gpus > cap["gpus"] or (cap["mem_mb"] and (res.mem_mb or 0) > cap["mem_mb"]):
            raise ClusterError(f"job {request.name!r} asks for more than reservation {request.reservation!r} "
                               f"allows in all ({cap})")


