"""`fray.submit(fn, *args, ...)`: a call as a run of its own, or packed with the calls submitted beside it.

    futures = [fray.submit(square, i) for i in range(1000)]   # a few runs of many calls, as fray.map makes
    [f.result() for f in futures]                               # each call its own result, exception, logs

A call on the local backend that asks no GPU, no time limit and no `after=`, whose callable is not
checkpointable, is pended for a few milliseconds (fray.cluster.submit_batch) with the calls of the same
function and settings submitted beside it; the group is then written exactly as `fray.map` would write it
(fray.core.batching sizes it by the measured call time and the free CPUs; fray.cluster.chunks runs it, each
call's result committed in the call book, a retry making only the calls without one). A group of one call is
an ordinary run named after the function, as every other call is (other backends, GPUs, `after=`,
checkpointable callables). The function and arguments are cloudpickled at the submit (what the call sees is
what it was given then; what cannot be pickled raises there), and grouped by the function's pickled bytes, so
a callable object changed between two submits is never packed with its older self.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pickle
from concurrent.futures import CancelledError
from typing import Any, Callable, Iterable, Mapping

from fray.cluster import call_times, chunks, launching, payloads, resuming, submit_batch
from fray.cluster.api import (FUNCTION_MAX_RETRIES, Call, ClusterError, EnvironmentConfig, Entrypoint, JobInfo,
                              JobRequest, ResourceConfig)
from fray.cluster.fray_cluster import FrayCluster
from fray.cluster.futures import CallFuture, RunFuture, launch_points, packed_sizes, resources_of
from fray.core import backend_names
from fray.core.model import DEFAULT_MAX_RETRIES_PREEMPTION
from fray.errors import UsageError


def submit(fn: Callable[..., Any], /, *args: Any, resources: ResourceConfig | Mapping[str, Any] | None = None,
           backend: str | None = None, name: str | None = None, max_retries: int = FUNCTION_MAX_RETRIES,
           max_retries_preemption: int = DEFAULT_MAX_RETRIES_PREEMPTION, environment: EnvironmentConfig | None = None,
           home: str | os.PathLike[str] | None = None, after: Iterable["RunFuture | str"] = (),
           **kwargs: Any) -> RunFuture:
    """Run `fn(*args, **kwargs)` as a fray run; its future, returned at once.

    Every keyword this function does not name itself goes to `fn` (wrap `fn`
    in functools.partial to pass one of those names to it). `backend` is
    local (default; inside a fray job: the job's own), slurm or tpu.
    `max_retries` counts the attempts that raise or fail (the workload
    budget), `max_retries_preemption` the node's failures and preemptions.
    A callable with a `checkpoint` method resumes from what it returns
    (fray.cluster.resuming). `after`: futures (or `RUN[:ok|:fail|:any]` texts)
    of runs it waits for, as `fray submit --after`: it starts once they
    succeeded, and ends failed_dependency (its future raising JobFailed) if
    one cannot.

    Short calls submitted close together on the local backend are packed into
    runs as `fray.map` packs its calls (fray.cluster.submits). Such a call is
    written to FRAY_HOME (and durable from then on) at most 50 ms after it was
    submitted (5 ms after the last call of its burst), at once when its future
    is asked anything (`run_id`, `result`, `info`, `done`, `logs`), and at the
    interpreter's exit; a process killed (`kill -9`) before that loses it.
    `cancel` before it is written drops it; once written into a run shared with
    other calls it skips the call unless the run has begun it already.
    """
    if backend is not None and backend not in backend_names.BACKENDS:
        raise UsageError(f"backend {backend!r} is not known; choose one of {', '.join(backend_names.BACKENDS)}")
    config, time_limit = resources_of(resources)
    label = name or getattr(fn, "__name__", None) or type(fn).__name__
    request = JobRequest(label, Entrypoint.from_callable(fn, args, kwargs), resources=config,
                         environment=environment or EnvironmentConfig(), max_retries=max_retries,
                         max_retries_preemption=max_retries_preemption, time_limit_sec=time_limit,
                         after=[u.run_id if isinstance(u, RunFuture) else u for u in after])
    cluster = FrayCluster(home, backend=backend)
    if not _packable(cluster, request):
        return RunFuture(cluster, cluster.launch(request))
    function, arguments = _pickled(request)
    template = dataclasses.replace(request, entrypoint=Entrypoint.from_callable(chunks.Applied(function)))
    key = (cluster.home.root, cluster.backend, cluster.namespace, cluster.job_id, template)
    ticket = submit_batch.BATCHER.add(key, arguments, functools.partial(_write, cluster, template,
                                                                        call_times.key_of(fn)),
                                      lambda: launching.check(cluster.home, request, cluster.launch_family()))
    return SubmittedFuture(ticket)


def _packable(cluster: FrayCluster, request: JobRequest) -> bool:
    """Whether the call may be packed with others: only the local backend knows its free CPUs (fray.map's
    rule), a GPU call keeps a run of its own, and `after=`, a time limit or a checkpointable callable are
    about a run, not a call."""
    assert request.entrypoint.callable is not None
    return (cluster.backend == "local" and not request.resources.gpus and not request.after
            and request.time_limit_sec is None and not resuming.checkpointable(Call(request.entrypoint.callable)))


def _pickled(request: JobRequest) -> tuple[bytes, bytes]:
    """The callable and the call's (args, kwargs), cloudpickled now; ClusterError as a launch would raise it."""
    entry = request.entrypoint
    try:
        return payloads.dumps(entry.callable), payloads.dumps((entry.args, dict(entry.kwargs)))
    except Exception as exc:  # cloudpickle raises whatever the value's reducers raise
        raise ClusterError(f"job {request.name!r}: its callable or arguments cannot be serialized with "
                           f"cloudpickle: {exc}") from exc


def _write(cluster: FrayCluster, template: JobRequest, timing: tuple[str, str],
           calls: list[bytes]) -> list[RunFuture]:
    """Write a group of calls: one, or too few to pack, as runs of their own; else as fray.map packs them."""
    if len(calls) == 1:
        return [RunFuture(cluster, cluster.launch(_alone(template, calls[0])))]
    sizes = packed_sizes(cluster, len(calls), template.resources, None, timing[0])
    if sizes is None or max(sizes) <= 1:
        metas = launching.launch(cluster.home, [_alone(template, call) for call in calls], cluster.launch_family())
        cluster.ensure_daemon()
        return [RunFuture(cluster, meta.run_id) for meta in metas]
    applied = template.entrypoint.callable
    assert isinstance(applied, chunks.Applied)
    parts = chunks.split(applied, calls, sizes, timing)
    return launch_points(cluster, template, [Entrypoint.from_callable(part) for part in parts], parts)


def _alone(template: JobRequest, arguments: bytes) -> JobRequest:
    """The request of one call, a run of its own, from its pickled function and arguments."""
    applied = template.entrypoint.callable
    assert isinstance(applied, chunks.Applied)
    args, kwargs = pickle.loads(arguments)
    return dataclasses.replace(template, entrypoint=Entrypoint.from_callable(pickle.loads(applied.fn), args, kwargs))


class SubmittedFuture(RunFuture):
    """What `fray.submit` returns for a call it may pack: once its call is written (at once when asked
    anything), the future of its own run (RunFuture) or of its call in a packed run (CallFuture)."""

    def __init__(self, ticket: submit_batch.Ticket) -> None:  # no run yet: every method asks `_written`
        self._ticket = ticket
        self._target: RunFuture | None = None
        self._cancelled = False

    def __repr__(self) -> str:
        return repr(self._target) if self._target is not None else "<RunFuture (being written)>"

    def _written(self) -> RunFuture:
        if self._target is None:
            self._target = self._ticket.outcome()
        return self._target

    @property
    def run_id(self) -> str:
        return self._written().run_id

    @property
    def index(self) -> int | None:
        """The call's index in its packed run's calls (as `fray.get_run(run_id, call=index)` takes it);
        None when it is a run of its own."""
        return self._written().index

    def info(self) -> JobInfo:
        return self._written().info()

    def done(self) -> bool:
        return self._cancelled or self._written().done()

    def cancel(self) -> bool:
        """Drop the call while it is not written yet; stop its run when it has one of its own; in a run shared
        with other calls, skip it alone unless begun (CallFuture.cancel_call). False once it had ended."""
        if self._target is None and not self._cancelled and self._ticket.cancel():
            self._cancelled = True
            return True
        if self._cancelled:
            return False
        target = self._written()
        return target.cancel_call() if isinstance(target, CallFuture) else target.cancel()

    def result(self, timeout: float | None = None) -> Any:
        return self._written().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        try:
            target = self._written()
        except CancelledError as exc:
            return exc
        return target.exception(timeout)

    def logs(self, stderr: bool = False) -> str:
        return self._written().logs(stderr)
