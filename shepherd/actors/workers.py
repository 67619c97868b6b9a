"""WorkerPool: run Python callables on N worker jobs.

    with WorkerPool(cluster, num_workers=4, resources=ResourceConfig(cpus=1)) as pool:
        pool.wait_for_workers(timeout=60)
        futures = [pool.submit(process_shard, shard) for shard in shards]
        totals = list(pool.map(count_tokens, shards))

Each worker is a job hosting an executor actor under the pool's own name.
Tasks wait in one queue; one dispatcher thread per live worker takes the next
task and runs it there (one task per worker at a time). When a worker's
connection fails (its job died), its task goes back to the front of the queue
and runs on another worker; the dead worker's job is restarted by the daemon
(within its retry budget, `max_retries`) and picks up tasks again once it has registered. A
task that raises is not retried: its future re-raises the exception with the
worker's traceback.
"""

from __future__ import annotations

import collections
import secrets
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from fray.actors import client
from fray.actors.client import ActorConnectionError, ActorFuture
from fray.actors.resolver import ClusterResolver, Target
from fray.cluster.api import Entrypoint, EnvironmentConfig, JobRequest, ResourceConfig
from fray.core.model import DEFAULT_MAX_RETRIES  # its workers are servers, restarted as a script run is

WATCH_SEC = 0.2
MAX_TASK_TRIES = 5
STOP_WAIT_SEC = 2.0


class _Executor:
    """The actor every worker job hosts."""

    def __init__(self) -> None:
        self.stopped = threading.Event()

    def run(self, ctx: Any, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        return fn(*args, **kwargs)

    def stop(self, ctx: Any) -> None:
        self.stopped.set()


def serve_worker(actor_name: str) -> None:
    """A worker job's body: serve an executor under `actor_name` until the pool stops it."""
    from fray.actors.server import ActorServer
    from fray.cluster import current_cluster

    executor = _Executor()
    server = ActorServer(current_cluster())
    server.register(actor_name, executor, {"role": "worker"})
    server.serve_background()
    executor.stopped.wait()
    server.shutdown(grace=1.0)


@dataclass
class _Task:
    fn: Callable[..., Any]
    args: tuple
    kwargs: dict
    future: ActorFuture
    tries: int = 0


class WorkerPool:
    def __init__(self, cluster: Any, num_workers: int, resources: ResourceConfig | None = None,
                 environment: EnvironmentConfig | None = None, name: str = "workers",
                 max_retries: int = DEFAULT_MAX_RETRIES, *, max_restarts: int | None = None) -> None:
        if max_restarts is not None:  # the budget's old name, kept for the code that still passes it
            if max_retries not in (DEFAULT_MAX_RETRIES, max_restarts):
                raise ValueError("WorkerPool got max_retries and max_restarts, two names of one budget: "
                                 "give max_retries only")
            warnings.warn("WorkerPool(max_restarts=) is deprecated: use max_retries=", DeprecationWarning, stacklevel=2)
            max_retries = max_restarts
        if num_workers < 1:
            raise ValueError("a WorkerPool needs at least one worker")
        self.cluster = cluster
        self.num_workers = num_workers
        self.actor_name = f"workerpool-{name}-{secrets.token_hex(3)}"
        self._resolver = ClusterResolver(cluster)
        self._actors = self._resolver.lookup(self.actor_name)
        self._queue: collections.deque[_Task] = collections.deque()
        self._changed = threading.Condition()
        self._busy: dict[str, threading.Thread] = {}  # str(target) -> its dispatcher
        self._closed = False
        self._futures: list[ActorFuture] = []
        request = JobRequest(name=f"{name}-worker", entrypoint=Entrypoint.from_callable(serve_worker, (self.actor_name,)),
                             resources=resources or ResourceConfig(), environment=environment or EnvironmentConfig(),
                             max_retries=max_retries)
        self.job_ids: list[str] = [cluster.launch(request) for _ in range(num_workers)]
        self._watcher = threading.Thread(target=self._watch, name=f"fray-{self.actor_name}", daemon=True)
        self._watcher.start()

    # -- the public calls ------------------------------------------------------------

    @property
    def size(self) -> int:
        """Workers registered and serving now."""
        return self._actors.size

    def wait_for_workers(self, n: int | None = None, timeout: float | None = None) -> int:
        """Wait until `n` (default: all) workers serve; TimeoutError at the deadline."""
        return self._actors.wait_for_size(n or self.num_workers, timeout)

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> ActorFuture:
        """Queue `fn(*args, **kwargs)` for the next free worker; a future of its result."""
        if self._closed:
            raise RuntimeError("this WorkerPool has been shut down")
        task = _Task(fn, args, kwargs, ActorFuture(f"{getattr(fn, '__name__', 'task')} on {self.actor_name}"))
        with self._changed:
            self._queue.append(task)
            self._futures.append(task.future)
            self._changed.notify_all()
        return task.future

    def map(self, fn: Callable[..., Any], *iterables: Iterable[Any], timeout: float | None = None) -> Iterator[Any]:
        """Like `concurrent.futures.Executor.map`: results in order (all tasks are queued at once)."""
        futures = [self.submit(fn, *items) for items in zip(*iterables)]

        def results() -> Iterator[Any]:
            deadline = None if timeout is None else time.monotonic() + timeout
            for future in futures:
                yield future.result(None if deadline is None else max(0.0, deadline - time.monotonic()))

        return results()

    def shutdown(self, wait: bool = True) -> None:
        """Stop the workers (after the queued tasks finish, when `wait`) and end their jobs."""
        if wait:
            for future in list(self._futures):
                future.exception()  # waits for it; its outcome is the caller's to read
        with self._changed:
            self._closed = True
            for task in self._queue:
                task.future.set_exception(RuntimeError("the WorkerPool was shut down before this task ran"))
            self._queue.clear()
            self._changed.notify_all()
        for future in self._actors.broadcast().stop():
            try:
                future.result(5.0)
            except Exception:
                pass
        try:  # stopped workers return on their own; stop what has not within a few seconds
            self.cluster.wait(self.job_ids, timeout=STOP_WAIT_SEC)
        except TimeoutError:
            pass
        self.cluster.terminate([j for j in self.job_ids if not self.cluster.poll(j).finished])

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown(wait=exc[0] is None)

    # -- dispatching -----------------------------------------------------------------

    def _watch(self) -> None:
        while not self._closed:
            try:
                targets = self._actors.alive_targets(force=True)
            except Exception:  # a transient read error: look again
                targets = []
            for target in targets:
                key = str(target)
                thread = self._busy.get(key)
                if thread is None or not thread.is_alive():
                    thread = threading.Thread(target=self._dispatch, args=(target,), daemon=True,
                                              name=f"fray-dispatch-{key}")
                    self._busy[key] = thread
                    thread.start()
            with self._changed:
                self._changed.wait(WATCH_SEC)

    def _next(self) -> _Task | None:
        with self._changed:
            while not self._queue:
                if self._closed:
                    return None
                self._changed.wait(WATCH_SEC)
            return self._queue.popleft()

    def _dispatch(self, target: Target) -> None:
        secret = self._resolver.secret()
        while True:
            task = self._next()
            if task is None:
                return
            task.tries += 1
            try:
                connection = client.connect(target.address, secret)
                outcome = connection.submit(target.actor, "run", (task.fn, task.args, task.kwargs), {})
                value = outcome.result()
            except (ActorConnectionError, client.ActorNotFound) as exc:
                if client.is_remote(exc) and not isinstance(exc, client.ActorNotFound):
                    task.future.set_exception(exc)  # the task itself raised it
                    continue
                self._requeue(task, exc)
                self._actors.mark_dead(target)
                return  # this worker is gone; a restarted one gets a dispatcher of its own
            except BaseException as exc:  # the task raised: its future says so
                task.future.set_exception(exc)
                continue
            task.future.set_result(value)

    def _requeue(self, task: _Task, why: BaseException) -> None:
        if task.tries >= MAX_TASK_TRIES:
            task.future.set_exception(ActorConnectionError(f"the task failed on {task.tries} workers; last: {why}"))
            return
        with self._changed:
            self._queue.appendleft(task)
            self._changed.notify_all()
