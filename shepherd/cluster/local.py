"""LocalCluster: jobs as threads in this process, for laptops, notebooks and tests.

The same calls as FrayCluster, and the same serialization: a callable and its
arguments are cloudpickled at launch and unpickled in the job's thread, and
the result goes through cloudpickle on the way back, so a closure over
something that does not pickle fails here exactly as it would on a cluster.
Script entrypoints run as subprocesses of that thread.

Actors registered from a LocalCluster use endpoint files and a secret in a
private temporary FRAY_HOME (or the `home` given), so resolvers, pools and the
handshake are the real ones. Limits of threads: `terminate` marks a job (and
its children) stopped and kills a script's process, but a running callable
cannot be interrupted (its result is discarded); `env_vars` and `pip_packages`
are not applied (the process has one environment; a warning says so).
Reservations cap what their jobs use together (`max`), waiting when full.
"""

from __future__ import annotations

import atexit
import itertools
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from fray.cluster import payloads
from fray.cluster.job_view import job_view
from fray.cluster.api import (ClusterError, JobGroupConfig, JobInfo, JobRequest, JobStatus, Reservation,
                                  ReservationConfig, ResourceConfig)
from fray.cluster.shared import ClusterBase
from fray.state.layout import Home


@dataclass
class _Job:
    job_id: str
    name: str
    parent: str | None
    namespace: str
    request: JobRequest
    status: JobStatus = JobStatus.PENDING
    reason: str = "waiting to start"
    result: bytes | None = None
    error: str | None = None
    process: subprocess.Popen[bytes] | None = None
    children: list[str] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)


def _fits(job: _Job, free_cpus: int, free_gpus: int) -> bool:
    want = job.request.resources
    return want.cpus <= free_cpus and want.gpus <= free_gpus


class _State:
    """What every view of one LocalCluster shares."""

    def __init__(self, home: Home, owns_home: bool) -> None:
        self.home = home
        self.owns_home = owns_home
        self.jobs: dict[str, _Job] = {}
        self.reservations: dict[str, Reservation] = {}
        self.changed = threading.Condition()
        self.counter = itertools.count(1)
        self.warned = False


class LocalCluster(ClusterBase):
    def __init__(self, namespace: str = "local", home: str | os.PathLike[str] | None = None,
                 _state: _State | None = None, _job: _Job | None = None) -> None:
        if _state is None:
            owns = home is None
            root = Path(tempfile.mkdtemp(prefix="fray-local-")) if owns else Path(home).expanduser().resolve()
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
            if owns:
                atexit.register(shutil.rmtree, root, True)
            _state = _State(Home(root), owns)
        self._state = _state
        self.home = _state.home
        self._job = _job
        self.job_id: str | None = _job.job_id if _job else None
        self.namespace = _job.namespace if _job else namespace

    # -- jobs --------------------------------------------------------------------------

    def launch(self, request: JobRequest) -> str:
        """Start `request` in a thread now (or when its reservation has room); its job id."""
        return self._launch_all([request])[0]

    def launch_group(self, group: JobGroupConfig) -> list[str]:
        """All of `group` or none: every member is checked and serialized before any starts."""
        if not group.jobs:
            raise ClusterError(f"job group {group.name!r} has no jobs")
        return self._launch_all(list(group.jobs))

    def _launch_all(self, requests: Sequence[JobRequest]) -> list[str]:
        prepared = [(request, self._serialize(request)) for request in requests]  # raises before any starts
        ids = []
        for request, payload in prepared:
            job_id = f"local-{next(self._state.counter)}-{request.name}"
            job = _Job(job_id, request.name, self.job_id, self.namespace, request)
            with self._state.changed:
                self._state.jobs[job_id] = job
                if self._job is not None:
                    self._job.children.append(job_id)
            threading.Thread(target=self._run, args=(job, payload), name=f"fray-local-{job_id}", daemon=True).start()
            ids.append(job_id)
        return ids

    def _serialize(self, request: JobRequest) -> bytes | None:
        env = request.environment
        if (env.env_vars or env.requirements()) and not self._state.warned:
            self._state.warned = True
            warnings.warn("LocalCluster runs jobs as threads of this process: env_vars and pip packages of "
                          "EnvironmentConfig are not applied", RuntimeWarning, stacklevel=4)
        if request.after:  # threads start at once: nothing here watches another job's end
            raise ClusterError(f"job {request.name!r}: `after` needs a FRAY_HOME cluster (fray.submit, or "
                               "FrayCluster), whose daemon starts it once its upstream runs ended")
        if request.reservation is not None and request.reservation not in self._state.reservations:
            raise ClusterError(f"job {request.name!r}: no reservation {request.reservation!r} "
                               "(create_reservation returns its id)")
        entry = request.entrypoint
        if entry.callable is None:
            if not entry.script or not os.path.isfile(entry.script):
                raise ClusterError(f"job {request.name!r}: script {entry.script!r} not found")
            return None
        try:
            return payloads.dumps((entry.callable, entry.args, dict(entry.kwargs)))
        except Exception as exc:
            raise ClusterError(f"job {request.name!r}: its callable or arguments cannot be serialized with "
                               f"cloudpickle: {exc}") from exc

    def _run(self, job: _Job, payload: bytes | None) -> None:
        if not self._admit(job):
            return
        self._set(job, JobStatus.RUNNING, "running in a thread")
        job_view.cluster = LocalCluster(_state=self._state, _job=job)
        try:
            if payload is None:
                self._run_script(job)
            else:
                import pickle

                fn, args, kwargs = pickle.loads(payload)
                value = fn(*args, **kwargs)
                job.result = payloads.dumps(value)  # the way back goes through cloudpickle too
                self._set(job, JobStatus.SUCCEEDED, "returned")
        except BaseException as exc:  # reported through poll/wait, like a remote failure
            job.error = traceback.format_exc()
            self._set(job, JobStatus.FAILED, f"{type(exc).__name__}: {exc}")
        finally:
            job_view.cluster = None
            self._release(job)

    def _run_script(self, job: _Job) -> None:
        from fray.wrapper import face as wrapper

        entry = job.request.entrypoint
        argv = wrapper.launch_argv(entry.script, wrapper.read_first_line(entry.script), list(entry.script_args))
        env = {**os.environ, **job.request.environment.env_vars, "FRAY_JOB_ID": job.job_id,
               "FRAY_NAMESPACE": job.namespace, "FRAY_CLUSTER_SPEC": "local"}
        job.process = subprocess.Popen(argv, env=env, start_new_session=True)
        code = job.process.wait()
        if job.status is JobStatus.STOPPED:
            return
        if code == 0:
            self._set(job, JobStatus.SUCCEEDED, "exited 0")
        else:
            self._set(job, JobStatus.FAILED, f"exited {code}")

    def _set(self, job: _Job, status: JobStatus, reason: str) -> None:
        with self._state.changed:
            if job.status.finished:
                return  # terminated meanwhile: that stands
            job.status, job.reason = status, reason
            if status.finished:
                job.done.set()
            self._state.changed.notify_all()

    def poll(self, job_id: str) -> JobInfo:
        job = self._get(job_id)
        result = None
        if job.status is JobStatus.SUCCEEDED and job.result is not None:
            import pickle

            result = pickle.loads(job.result)
        return JobInfo(job.job_id, job.name, job.status, job.reason, job.parent, job.namespace, result, job.error,
                       attempts=1)

    def monitor(self, job_id: str, timeout: float | None = None) -> JobInfo:
        """Wait for the job (its output already goes to this process's stdout and stderr)."""
        return self.wait(job_id, timeout=timeout)

    def terminate(self, job_ids: str | Sequence[str]) -> None:
        """Mark jobs and their children stopped; a script's process is killed."""
        for job_id in self._ids(job_ids):
            job = self._get(job_id)
            for child in list(job.children):
                self.terminate(child)
            self._set(job, JobStatus.STOPPED, "terminated")
            if job.process is not None and job.process.poll() is None:
                try:
                    os.killpg(job.process.pid, 9)
                except OSError:
                    pass

    def list_jobs(self) -> list[JobInfo]:
        with self._state.changed:
            ids = [j.job_id for j in self._state.jobs.values() if j.namespace == self.namespace]
        return [self.poll(i) for i in ids]

    def _get(self, job_id: str) -> _Job:
        try:
            return self._state.jobs[job_id]
        except KeyError:
            raise ClusterError(f"no job {job_id!r} in this LocalCluster") from None

    # -- reservations --------------------------------------------------------------------

    def create_reservation(self, config: ReservationConfig) -> str:
        reservation_id = f"{config.name.lower()[:40]}-{secrets.token_hex(3)}"
        now = time.time()
        with self._state.changed:
            self._state.reservations[reservation_id] = Reservation(reservation_id, config.name, config.min, config.max,
                                                                   now, now + config.ttl_sec)
        return reservation_id

    def get_reservation(self, reservation_id: str) -> Reservation | None:
        with self._state.changed:
            found = self._state.reservations.get(reservation_id)
            if found is None or found.expires_at <= time.time():
                return None
            used = self._used(reservation_id)
        return Reservation(found.reservation_id, found.name, found.min, found.max, found.created_at, found.expires_at,
                           used)

    def release_reservation(self, reservation_id: str) -> None:
        with self._state.changed:
            self._state.reservations.pop(reservation_id, None)
            self._state.changed.notify_all()

    def _used(self, reservation_id: str) -> ResourceConfig:
        running = [j.request.resources for j in self._state.jobs.values()
                   if j.request.reservation == reservation_id and j.status is JobStatus.RUNNING]
        return ResourceConfig(cpus=sum(r.cpus for r in running), gpus=sum(r.gpus for r in running),
                              mem_mb=sum(r.mem_mb or 0 for r in running) or None)

    def _admit(self, job: _Job) -> bool:
        """Wait until the job's reservation has room (True), or it is gone or the job stopped (False).

        Oldest first, as the daemon admits runs: a job that fits waits while a job
        of the same reservation launched before it also fits (whichever thread the
        OS runs first); one that does not fit lets later, smaller ones by.
        """
        reservation_id = job.request.reservation
        if reservation_id is None:
            return True
        with self._state.changed:
            while True:
                if job.status.finished:
                    return False
                found = self._state.reservations.get(reservation_id)
                if found is None or found.expires_at <= time.time():
                    job.status, job.reason = JobStatus.STOPPED, f"reservation {reservation_id} was released or expired"
                    job.done.set()
                    self._state.changed.notify_all()
                    return False
                used = self._used(reservation_id)
                free = (found.max.cpus - used.cpus, found.max.gpus - used.gpus)
                if _fits(job, *free) and not any(_fits(other, *free) for other in self._waiting_before(job)):
                    job.status, job.reason = JobStatus.RUNNING, "admitted"  # counted from here on
                    self._state.changed.notify_all()  # the next in line may fit too
                    return True
                job.reason = f"waiting for room in reservation {reservation_id}"
                self._state.changed.wait(0.5)

    def _waiting_before(self, job: _Job) -> Iterator[_Job]:
        """The jobs of the same reservation, launched before `job`, still waiting to start."""
        for other in self._state.jobs.values():  # in launch order
            if other is job:
                return
            if other.request.reservation == job.request.reservation and other.status is JobStatus.PENDING:
                yield other

    def _release(self, job: _Job) -> None:
        with self._state.changed:
            self._state.changed.notify_all()

    # -- lifetime ------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Forget the jobs and remove the private FRAY_HOME (if this cluster made it)."""
        if self._job is None and self._state.owns_home:
            shutil.rmtree(self._state.home.root, ignore_errors=True)

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"LocalCluster(namespace={self.namespace!r}, job_id={self.job_id!r}, home={str(self.home.root)!r})"
