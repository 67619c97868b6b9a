"""Functions as runs: `fray.map(fn, items)`, the futures of runs and calls, and `fray.get_run(run)`
(`fray.submit`, fray.cluster.submits, returns them too).

    fut = fray.submit(train, 20, lr=0.1, resources={"cpus": 4, "mem": "8G"}, backend="local")
    fut.run_id                       # an ordinary run: `fray list`, `fray status`, `fray logs` show it
    fut.result(timeout=600)          # its return value, or the exception it raised (remote traceback as cause)
    fray.get_run(fut.run_id).result()   # the same future, from any process that can read FRAY_HOME

A thin layer over FrayCluster: the call is a job launched with
`Entrypoint.from_callable` (cloudpickled into the run's folder, 0600), which
the daemon starts, restarts under the run's budgets and adopts after a restart
of its own; `cancel` is `fray control stop`. A future holds no state but the
run id: everything it says is read from FRAY_HOME when asked, so a new process
reattaches by id, prefix or name. Results and exceptions are unpickled only
after `payloads.load` has checked the file and every folder above it up to
FRAY_HOME are private to this user. `fray.map` packs short calls into runs
on its own (fray.core.batching; `chunk=N` says how many per run), each
call's `CallFuture` being its run id and its index in the map, reading that
call's own record (fray.cluster.call_book).
"""

from __future__ import annotations

import dataclasses
import os
import time
from concurrent.futures import CancelledError
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from fray.cluster import call_book, call_times, chunks, launching, payloads, resuming
from fray.cluster.call_book import CallBook
from fray.cluster.api import (FUNCTION_MAX_RETRIES, Call, EnvironmentConfig, Entrypoint, JobFailed, JobInfo,
                              JobRequest, JobStatus, ResourceConfig)
from fray.cluster.fray_cluster import FrayCluster
from fray.core import backend_names, batching, values
from fray.core.model import DEFAULT_MAX_RETRIES_PREEMPTION, Phase
from fray.errors import CorruptFileError, RemoteTraceback, StateError, UsageError
from fray.state import runs, store

RESOURCE_KEYS = ("cpus", "gpus", "mem", "time")



def resources_of(value: ResourceConfig | Mapping[str, Any] | None) -> tuple[ResourceConfig, float | None]:
    """(ResourceConfig, time limit in seconds) from a ResourceConfig or {"cpus", "gpus", "mem", "time"}.

    `mem` is megabytes or a size like "16G"; `time` is seconds or a duration like "2h" (Slurm only).
    """
    if value is None:
        return ResourceConfig(), None
    if isinstance(value, ResourceConfig):
        return value, None
    if not isinstance(value, Mapping):
        raise UsageError(f"resources must be a ResourceConfig or a dict with keys {', '.join(RESOURCE_KEYS)}, "
                         f"not {type(value).__name__}")
    unknown = [key for key in value if key not in RESOURCE_KEYS]
    if unknown:
        hint = values.closest(str(unknown[0]), RESOURCE_KEYS)
        raise UsageError(f"resources has no key {unknown[0]!r}" + (f"; did you mean {hint!r}?" if hint else "")
                         + f" (keys: {', '.join(RESOURCE_KEYS)})")
    mem = value.get("mem")
    time_limit = value.get("time")
    try:
        mem_mb = values.parse_memory_mb(mem) if isinstance(mem, str) else mem
        seconds = values.parse_duration(time_limit) if isinstance(time_limit, str) else time_limit
    except ValueError as exc:
        raise UsageError(f"resources: {exc}") from None
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0):
        raise UsageError(f"resources time must be a positive number of seconds or a duration like '2h', "
                         f"not {time_limit!r}")
    return ResourceConfig(cpus=value.get("cpus", 1), gpus=value.get("gpus", 0), mem_mb=mem_mb), seconds


def map(fn: Callable[..., Any], items: Iterable[Any], /, *, resources: ResourceConfig | Mapping[str, Any] | None = None,
        backend: str | None = None, name: str | None = None, max_parallel: int | None = None,
        max_retries: int = FUNCTION_MAX_RETRIES, max_retries_preemption: int = DEFAULT_MAX_RETRIES_PREEMPTION,
        environment: EnvironmentConfig | None = None, home: str | os.PathLike[str] | None = None,
        chunk: int | None = None) -> list["RunFuture"]:
    """Run `fn(item)` for every item as one sweep of runs (at most `max_parallel` at once); their futures.

    The sweep is one row of `fray list` (`fray list --group NAME` shows its runs; `fray control stop
    --group NAME` stops them all); on Slurm its points go to one job array. Results come back in order:
    `[f.result() for f in futures]`. On the local backend, more items than free CPUs are packed into
    runs of consecutive calls by the time earlier maps of `fn` measured (fray.core.batching); `chunk=N`
    makes each run N calls instead (`chunk=1`: one run per call). Either way there is one future per item,
    resolving as its call's result is on disk (fray.cluster.chunks).
    """
    if backend is not None and backend not in backend_names.BACKENDS:
        raise UsageError(f"backend {backend!r} is not known; choose one of {', '.join(backend_names.BACKENDS)}")
    if chunk is not None:
        chunk = chunks.check_chunk(chunk)
    config, time_limit = resources_of(resources)
    label = name or getattr(fn, "__name__", None) or type(fn).__name__
    items = list(items)
    checkpointable = resuming.checkpointable(Call(fn))
    if chunk is not None and chunk > 1 and checkpointable:
        raise UsageError(f"{label}: a checkpointable callable resumes one call, not a chunk of them; "
                         "map it with chunk=1")
    if not items:
        return []
    cluster = FrayCluster(home, backend=backend)
    timing = call_times.key_of(fn)
    sizes = (chunks.even(len(items), chunk) if chunk is not None
             else None if checkpointable else packed_sizes(cluster, len(items), config, max_parallel, timing[0]))
    parts = chunks.split(fn, items, sizes, timing) if sizes and max(sizes) > 1 else None
    template = JobRequest(label, Entrypoint.from_callable(fn), resources=config,
                          environment=environment or EnvironmentConfig(), max_retries=max_retries,
                          max_retries_preemption=max_retries_preemption, time_limit_sec=time_limit)
    entries = [Entrypoint.from_callable(part) for part in parts] if parts else \
        [Entrypoint.from_callable(fn, (item,)) for item in items]
    return launch_points(cluster, template, entries, parts, max_parallel)


def launch_points(cluster: FrayCluster, template: JobRequest, entries: list[Entrypoint],
                  parts: list[chunks.Calls] | None, max_parallel: int | None = None) -> list["RunFuture"]:
    """Write the entries as the points of one sweep named after `template` (its settings for every point);
    their futures: a run's each, or with `parts` (the entries' chunks of calls) a CallFuture per call."""
    requests = [dataclasses.replace(template, entrypoint=entry) for entry in entries]
    params = [{"calls": f"{p.first}-{p.last}"} for p in parts] if parts else None
    family = cluster.launch_family()
    launching.check(cluster.home, requests[0], family)  # a map refused writes nothing and starts no daemon
    started = cluster.start_daemon()  # starting while the runs are written: it finds them when it is up
    metas = launching.launch_sweep(cluster.home, requests, family, template.name, max_parallel, params)
    cluster.ensure_daemon(started)
    if parts is None:
        return [RunFuture(cluster, meta.run_id) for meta in metas]
    futures: list[RunFuture] = []
    for meta, part in zip(metas, parts):
        book = CallBook(cluster.home.run(meta.run_id), cluster.home.root)  # one reader per run, for all its calls
        futures.extend(CallFuture(cluster, meta.run_id, index, book) for index in range(part.first, part.last + 1))
    return futures


def packed_sizes(cluster: FrayCluster, items: int, config: ResourceConfig, max_parallel: int | None,
            key: str) -> list[int] | None:
    """The run sizes of a map (or a burst of `fray.submit`) without `chunk=` (fray.core.batching); None: one run per call. Only the local
    backend knows its free slots (its CPUs, over the CPUs a call asks); GPU calls keep a run each."""
    if cluster.backend != "local" or config.gpus:
        return None
    from fray.backends.local import machine

    slots = machine.capacity(machine.local_config(cluster.home)).cpus // max(1, config.cpus)
    if max_parallel is not None:
        slots = min(slots, max_parallel)
    return batching.sizes(items, max(1, slots), call_times.read(cluster.home.root, key))


def get_run(run: str, home: str | os.PathLike[str] | None = None, call: int | None = None) -> "RunFuture":
    """The future of an existing run, named by its id, a unique prefix of it, or its name;
    with `call`: of that call (its index in the map) of a chunk run (`fray.map` packs them)."""
    cluster = FrayCluster(home)
    run_id = runs.resolve(cluster.home, run)
    if call is None:
        return RunFuture(cluster, run_id)
    group = runs.read_meta(cluster.home, run_id).group or {}
    first, _, last = str((group.get("params") or {}).get("calls", "")).partition("-")
    if (not (first.isdigit() and last.isdigit()) or isinstance(call, bool) or not isinstance(call, int)
            or not int(first) <= call <= int(last)):
        held = f"calls {first}-{last}" if last else "no chunk of calls (fray.map packs those)"
        raise UsageError(f"run {run_id} holds {held}, not call {call!r}")
    return CallFuture(cluster, run_id, call, CallBook(cluster.home.run(run_id), cluster.home.root))


class RunFuture:
    """A run, seen as the future of its call. Every method reads FRAY_HOME afresh."""

    def __init__(self, cluster: FrayCluster, run_id: str) -> None:
        self._cluster = cluster
        self._run_id = run_id

    def __repr__(self) -> str:
        return f"<RunFuture {self._run_id}>"

    @property
    def run_id(self) -> str:
        return self._run_id

    @property
    def index(self) -> int | None:
        """None: the call is the run's own (a CallFuture's is its place among its run's calls)."""
        return None

    def info(self) -> JobInfo:
        """Its status and reason now (JobInfo), with the return value once it succeeded."""
        return self._cluster.poll(self._run_id)

    def done(self) -> bool:
        """Whether the run has ended (succeeded, failed or stopped)."""
        return runs.read_meta(self._cluster.home, self._run_id).phase == Phase.ENDED.value

    def cancel(self) -> bool:
        """Stop the run, running or not (`fray control stop`); False when it had ended already."""
        if self.done():
            return False
        try:
            runs.request(self._cluster.home, self._run_id, "stop")
        except UsageError:
            if self.done():  # it ended between the look and the request
                return False
            raise
        return True

    def result(self, timeout: float | None = None) -> Any:
        """The call's return value; re-raises its exception (the remote traceback as `__cause__`).

        TimeoutError when the run has not ended within `timeout` seconds,
        CancelledError when it was stopped, JobFailed when it failed without
        an exception to show (its retry budget spent on lost nodes, say).
        """
        info = self._finished(timeout)
        if info.status is JobStatus.SUCCEEDED:
            return info.result
        raise self._failure(info)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The exception the call raised (None when it succeeded); waits like `result`."""
        info = self._finished(timeout)
        return None if info.status is JobStatus.SUCCEEDED else self._failure(info)

    def logs(self, stderr: bool = False) -> str:
        """What the call printed to stdout (stderr=True: stderr) so far, every attempt in order."""
        meta = runs.read_meta(self._cluster.home, self._run_id)
        run = self._cluster.home.run(self._run_id)
        chunks = []
        for attempt in meta.attempts:
            files = run.attempt(attempt.number)
            try:
                chunks.append((files.stderr if stderr else files.stdout).read_text(errors="replace"))
            except FileNotFoundError:
                continue
        return "".join(chunks)

    def _finished(self, timeout: float | None) -> JobInfo:
        if not self.done():
            self._cluster.ensure_daemon()  # a daemon that died since the submit would leave us waiting forever
        return self._cluster.wait(self._run_id, timeout=timeout)

    def _failure(self, info: JobInfo) -> BaseException:
        """The exception the run ended with: the call's own, else CancelledError or JobFailed."""
        if info.status is JobStatus.STOPPED:
            return CancelledError(f"run {self._run_id} was stopped: {info.reason}")
        files = self._cluster.home.run(self._run_id).attempt(info.attempts)
        try:
            record = store.read_json(files.call_record, "call-result")
        except CorruptFileError:
            record = None
        return _raised(record, files.call_value, self._cluster.home.root, info)


def _raised(record: dict[str, Any] | None, value_file: Path, root: Path, info: JobInfo) -> BaseException:
    """The exception a call's record says it raised (the remote traceback as its cause); JobFailed without one."""
    if record is None or record["outcome"] != "raised" or record["value_file"] is None:
        return JobFailed(info)
    return _exception(lambda: payloads.load(value_file, root), record, info)


def _exception(load: Callable[[], Any], record: dict[str, Any], info: JobInfo) -> BaseException:
    """The exception `load` unpickles, its cause the record's traceback text; JobFailed when it cannot be."""
    try:
        exc = load()
    except StateError:
        raise  # not private to us: never fall back to something that hides it
    except Exception:  # its class cannot be imported here: the text has to do
        return JobFailed(info)
    if not isinstance(exc, BaseException):
        return JobFailed(info)
    exc.__cause__ = RemoteTraceback(record["traceback"] or f"{record['type']}: {record['message']}")
    return exc


class CallFuture(RunFuture):
    """Call `index` of a chunk run (fray.map): resolves as soon as that call's result is committed, or, when it
    has none, once the run has ended (its exception, CancelledError or JobFailed, as a run's future would).
    `cancel` stops the whole chunk; `logs` is what this call printed."""

    def __init__(self, cluster: FrayCluster, run_id: str, index: int, book: CallBook) -> None:
        super().__init__(cluster, run_id)
        self._index = index
        self._book = book  # shared by the futures of one run: each batch file is read once

    def __repr__(self) -> str:
        return f"<CallFuture {self._run_id} call {self._index}>"

    @property
    def index(self) -> int:
        """The call's index in the map (its item's)."""
        return self._index

    def info(self) -> JobInfo:
        """The chunk run's JobInfo, with this call's return value (once it returned) or traceback text."""
        info = self._cluster.poll(self._run_id)
        record = self._book.record(self._index)
        if record is None:
            return dataclasses.replace(info, result=None, error=None if info.status is JobStatus.SUCCEEDED
                                       else info.error)
        if record["outcome"] == "returned":
            return dataclasses.replace(info, status=JobStatus.SUCCEEDED, result=self._book.value(record),
                                       error=None)
        return dataclasses.replace(info, result=None, error=record["traceback"] or record["message"])

    def done(self) -> bool:
        return self._book.returned(self._index) or super().done()

    def result(self, timeout: float | None = None) -> Any:
        record = self._settled(timeout)
        if record is not None and record["outcome"] == "returned":
            return self._book.value(record)
        raise self._call_failure(record)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        record = self._settled(timeout)
        return None if record is not None and record["outcome"] == "returned" else self._call_failure(record)

    def logs(self, stderr: bool = False) -> str:
        return self._book.output(self._index, stderr)

    def cancel_call(self) -> bool:
        """Skip this call alone, its run's other calls going on (fray.submit's `cancel`); False when it has a
        result or its run ended. The run looks before it begins the call: one begun just before still runs to
        its end, and its future then gives its result."""
        if self._book.record(self._index) is not None or super().done():
            return False
        store.make_dirs(call_book.calls_dir(self._book.run))
        call_book.cancel_file(self._book.run, self._index).touch(mode=0o600)
        return True

    def _settled(self, timeout: float | None) -> dict[str, Any] | None:
        """This call's record once it returned or the run ended (None: the run ended without one)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause, asked = 0.01, False
        while True:
            record = self._book.record(self._index)
            if record is not None and record["outcome"] == "returned":
                return record
            if super().done():  # a call's record is committed before its run ends: look again
                return self._book.record(self._index)
            if not asked:  # a daemon that died since the submit would leave us waiting forever
                self._cluster.ensure_daemon()
                asked = True
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"call {self._index} of run {self._run_id} not done after {timeout}s")
            time.sleep(pause)
            pause = min(0.05, pause * 1.5)  # a batch is committed every fraction of a second

    def _call_failure(self, record: dict[str, Any] | None) -> BaseException:
        """What the ended run says of this call: its exception, else CancelledError or JobFailed."""
        info = self._cluster.poll(self._run_id)
        if info.status is JobStatus.STOPPED:
            return CancelledError(f"run {self._run_id} was stopped: {info.reason}")
        if record is None or record["outcome"] != "raised" or record["value_at"] is None:
            return JobFailed(info)
        return _exception(lambda: self._book.value(record), record, info)
