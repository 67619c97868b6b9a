"""The embedded local backend: attempts are wrapper processes on this machine.

Each attempt is `python -m fray.wrapper run ...` in a session of its own, detached,
so it outlives the daemon (a single-task attempt's wrapper forked from the warm
worker, `fray.warm.daemon_side`, as that command would have started). It is found again by scanning /proc for a wrapper
command line carrying this FRAY_HOME, the run id and the attempt number: a
reused pid has another command line, so it never passes for ours. Admission by
CPUs, memory and GPUs is `scheduler.Ledger` over `capacity()`. A graceful
cancel is the wrapper's planned stop (SIGUSR2: the workload is asked for a
checkpoint with SIGUSR1, then sent SIGTERM); a forced one kills the group.

The backend is the parent of the wrappers it starts, so a thread waits on each
and calls `on_attempt_exit` when it ends: the daemon then looks at once instead
of trusting the file watcher, whose watch on a brand-new attempt folder can
arrive after a quick wrapper has already written its exit record there.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from fray.state import store
from fray.backends import wrapper_command
from fray.backends.protocol import AttemptKey, CancelTarget, Node, SubmitRequest, Tracked
from fray.backends.local import machine, replicas
from fray.warm import daemon_side as warm
from fray.errors import BackendError
from fray.state.layout import AttemptPaths, Home
from fray.core.model import Cause
from fray.core.observation import BackendView, ViewState
from fray.core.placement.attributes import local_attributes
from fray.core.capacity import Capacity
from fray.wrapper import contract
from fray.wrapper import face as wrapper

PROC = Path("/proc")
QUEUED_DETAIL = "queued on this machine for a free CPU (the warm worker starts it when one frees)"
log = logging.getLogger("fray.daemon")


class LocalBackend:
    name = "local"
    poll_interval_sec = 1.0
    snapshot_when_idle = False
    nodes_every_sec: float | None = None

    def __init__(self, home: Home, config: dict[str, Any] | None = None,
                 on_attempt_exit: Callable[[], None] | None = None) -> None:
        self.home = home
        self._on_attempt_exit = on_attempt_exit
        self.host = socket.gethostname()
        self._config = config if config is not None else machine.local_config(home)
        self.poll_interval_sec = float(self._config.get("poll_interval_sec", self.poll_interval_sec))
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._capacity: Capacity | None = None
        self._gpu_type: str | None | bool = False  # False: not looked up yet
        self._tasks: dict[AttemptKey, dict[int, int]] = {}  # from the last scan: every task's wrapper pid
        # Single-task wrappers (scripts and functions) are forked from a warm Python (fray.warm.daemon_side),
        # which also queues functions beyond the CPUs, unless turned off.
        self._warm = warm.WarmWorker(home.root, int(self._config.get("cpus") or machine.cpu_count()), on_attempt_exit) \
            if self._config.get("warm_functions", True) else None

    def capacity(self) -> Capacity:
        if self._capacity is None:
            self._capacity = machine.capacity(self._config)
        return self._capacity

    def close(self) -> None:
        """This daemon stops serving (it lost the lease, or is stopping): its warm worker goes with it."""
        if self._warm is not None:
            self._warm.close()

    def warm_up(self) -> None:
        """Start the warm worker ahead of the first attempt (the daemon does, once its first cycle is done)."""
        if self._warm is not None:
            self._warm.prestart()

    def queue_cpus(self) -> int:
        """How far beyond its CPUs the ledger may admit function attempts: the warm worker queues them."""
        return self.capacity().cpus * self._warm.depth_per_cpu() if self._warm is not None else 0

    def queue_held(self) -> bool:
        """Whether function attempts wait in the warm worker's queue, which starts them without the daemon
        (fray.daemon.pacing)."""
        return self._warm is not None and self._warm.queue_held()

    def submit(self, request: SubmitRequest) -> dict[str, Any]:
        """Start the attempt's wrapper; with --replicas N, one per task (task 0 last, so that a
        failure to start a sibling leaves no attempt behind that looks started). A function may
        wait in the warm worker's queue instead: it has no pid yet."""
        count = request.spec.replicas
        for index in reversed(range(1, count)):
            self._start(request, index, count)
        pid = self._start(request, 0, count)
        ref: dict[str, Any] = {"pid": pid, "start_ticks": _start_ticks(pid), "host": self.host} if pid \
            else {"queued": True, "host": self.host}
        ref["gpu_ids"] = list(request.gpu_ids)
        return {**ref, "tasks": count} if count > 1 else ref

    def _start(self, request: SubmitRequest, index: int, count: int) -> int | None:
        """Start one task's wrapper; its pid (None: queued on the warm worker)."""
        spec = request.spec
        folder = replicas.task_dir(request.attempt_dir, index)
        store.make_dirs(folder)
        argv = wrapper_command.wrapper_argv(sys.executable, request, str(folder) if index else None)
        env = {**wrapper.untagged(os.environ), **spec.env, **(replicas.task_env(request.key.run_id, index, count) if count > 1 else {})}
        # A CPU run must not land on a GPU another run was given.
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, replicas.gpu_share(request.gpu_ids, index, count)))
        # A forked wrapper writes its first heartbeat a new Python's start and imports sooner; a script's
        # workload is still a new process of the run's own interpreter (fray.wrapper.workload).
        if self._warm is not None and count == 1:
            try:
                return self._warm.start(request.key, argv, env, str(folder), str(AttemptPaths(folder).wrapper_log),
                                        spec.cpus)
            except OSError as exc:  # started cold instead: slower, the same run
                log.warning("warm worker: %s; starting the wrapper cold", exc)
        return self._start_cold(argv, env, folder)

    def _start_cold(self, argv: list[str], env: dict[str, str], folder: Path) -> int:
        log_fd = os.open(AttemptPaths(folder).wrapper_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, store.FILE_MODE)
        try:
            child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd, env=env,
                                     cwd=str(folder), start_new_session=True, close_fds=True)
        except OSError as exc:
            raise BackendError(f"could not start the wrapper: {exc}", temporary=False) from None
        finally:
            os.close(log_fd)
        self._children[child.pid] = child
        if self._on_attempt_exit is not None:
            threading.Thread(target=_wait_then, args=(child, self._on_attempt_exit),
                             name=f"fray-wait-{child.pid}", daemon=True).start()
        return child.pid

    def snapshot(self, tracked: list[Tracked]) -> dict[AttemptKey, BackendView]:
        self._reap()
        # Before any scan, so that none falls between: what the warm worker holds queued, the wrappers it forked
        # (which a scan may not know yet) and those whose exit it heard. Attempts it accounts for all need no
        # scan of /proc, which a thousand short functions would otherwise pay for every cycle.
        known = self._warm.known() if self._warm is not None else warm.Known(set(), {}, set())
        queued, forked = known.queued, known.running
        if all(i.key in queued or i.key in forked or i.key in known.ended for i in tracked):
            alive, self._tasks = {}, {}
        else:
            alive = self._scan()
        views: dict[AttemptKey, BackendView] = {}
        for item in tracked:
            count = int((item.ref or {}).get("tasks", 1))
            if count > 1:  # the tasks of a --replicas run stop together
                self._stop_siblings(item.key, count)
            found = alive.get(item.key)
            if found is None and item.key in forked:
                pid = forked[item.key]
                found = (pid, _start_ticks(pid) or 0)
            if found is None and self._tasks.get(item.key):
                # Task 0 is over, a sibling still finishing (placement.reporting.siblings_finishing).
                views[item.key] = BackendView(ViewState.RUNNING, node=self.host, ref=item.ref)
            elif found is None and item.key in queued:
                # No node yet, as a Slurm job PENDING: it is written with its start, not in a write of its own.
                views[item.key] = BackendView(ViewState.PENDING, ref=item.ref, detail=QUEUED_DETAIL)
            elif found is None and (item.ref or {}).get("host", self.host) != self.host:
                # Started by a daemon on another login host, whose processes this one cannot see: it lives as long
                # as its heartbeat does, and stops by meta.json's word (fray.wrapper.fence.stop_asked).
                views[item.key] = BackendView(ViewState.RUNNING, node=item.ref["host"], ref=item.ref,  # type: ignore[index]
                                              detail=f"on {item.ref['host']}, judged by its heartbeat")  # type: ignore[index]
            elif found is None:
                why = self._warm.gone(item.key) if self._warm is not None else None
                views[item.key] = BackendView(ViewState.GONE, detail=why, cause=Cause.LOST.value if why else None)
            else:
                pid, ticks = found
                ref = {**(item.ref or {}), "pid": pid, "start_ticks": ticks, "host": self.host}
                ref.pop("queued", None)  # out of the warm worker's queue
                views[item.key] = BackendView(ViewState.RUNNING, node=self.host, ref=ref)
        return views

    def cancel(self, targets: list[CancelTarget]) -> None:
        alive = self._scan() if targets else {}
        for target in targets:
            found = alive.get(target.key)
            if self._warm is not None and (found is None or self._warm.forked(found[0])):
                # Still in the warm worker's queue (it leaves it, never to start), forked since the scan, or
                # forked by it: only the worker knows whether a function host is still on this attempt.
                found = None
                self._warm.cancel(str(self.home.run(target.key.run_id).attempt(target.key.attempt).dir),
                                  signal.SIGKILL if target.force else signal.Signals[contract.PLANNED_STOP_SIGNAL],
                                  target.force)
            siblings = [pid for i, pid in self._tasks.get(target.key, {}).items() if i]
            for pid in ([found[0]] if found is not None else []) + siblings:
                if target.force:
                    _signal_group(pid, signal.SIGKILL)
                else:
                    _signal(pid, _planned_stop_signal(pid))
            if target.force and target.workload_pid and _belongs_to(target.workload_pid, target.key):
                _signal_group(target.workload_pid, signal.SIGKILL)

    def _stop_siblings(self, key: AttemptKey, count: int) -> None:
        """A task of a --replicas attempt ended badly (or task 0 is gone): kill the others' workloads, so
        that each wrapper reports a workload failure. SIGKILL, as srun --kill-on-bad-exit does: a workload
        that exits 0 on SIGTERM would pass for a success. A wrapper whose workload has not started yet
        (probes) is left to a later snapshot: stopping the wrapper itself would read as a preemption."""
        tasks = self._tasks.get(key, {})
        attempt_dir = self.home.run(key.run_id).attempt(key.attempt).dir
        codes = {i: replicas.exit_code(attempt_dir, i) for i in range(count) if i not in tasks}
        for index in replicas.to_stop(count, tasks, codes):
            workload = replicas.workload_pid(attempt_dir, index)
            if workload is not None and _belongs_to(workload, key):
                _signal_group(workload, signal.SIGKILL)

    def nodes(self) -> list[Node]:
        cap = self.capacity()
        return [Node(name=self.host, state="up", cpus=cap.cpus, mem_mb=cap.mem_mb, gpus=cap.gpus,
                     gpu_type=self._gpu_model())]

    def worker_attributes(self) -> dict[str, str | int | float]:
        """This machine as the scheduler sees it (constraints such as gpu-type=h100 are checked on these)."""
        cap = self.capacity()
        return local_attributes(self.host, cap.cpus, cap.mem_mb, cap.gpus, self._gpu_model())

    def _gpu_model(self) -> str | None:
        if self._gpu_type is False:
            self._gpu_type = str(self._config["gpu_type"]) if "gpu_type" in self._config else \
                (_gpu_name() if self.capacity().gpus else None)
        return self._gpu_type  # type: ignore[return-value]

    def _reap(self) -> None:
        for pid, child in list(self._children.items()):
            if child.poll() is not None:
                del self._children[pid]

    def _scan(self) -> dict[AttemptKey, tuple[int, int]]:
        """Every live wrapper of this FRAY_HOME that is an attempt's task 0: (run id, attempt) -> (pid,
        start ticks). Every task's wrapper, task 0's included, is left in `_tasks`: key -> index -> pid."""
        home_arg = str(self.home.root).encode()
        found: dict[AttemptKey, tuple[int, int]] = {}
        self._tasks = {}
        for entry in os.scandir(PROC):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as handle:
                    raw = handle.read()
            except OSError:
                continue
            if home_arg not in raw:
                continue
            argv = raw.split(b"\0")
            if _WARM_MODULE in argv:  # forked by the warm worker: known by its working folder
                forked = warm.attempt_of(int(entry.name), self.home.root)
                key, argv = (AttemptKey(*forked) if forked is not None else None), []  # one task: task 0
            elif _WRAPPER_MODULE in raw:
                key = _wrapper_key(argv, home_arg)
            else:
                continue
            if key is not None:
                ticks = _start_ticks(int(entry.name))
                if ticks is not None:
                    index = replicas.task_index(_attempt_dir_arg(argv), key.attempt)
                    self._tasks.setdefault(key, {})[index] = int(entry.name)
                    if index == 0:
                        found[key] = (int(entry.name), ticks)
        return found


_WRAPPER_MODULE = wrapper_command.WRAPPER_MODULE.encode()
_WARM_MODULE = warm.MODULE.encode()


def _wrapper_key(argv: list[bytes], home_arg: bytes) -> AttemptKey | None:
    try:
        start = argv.index(_WRAPPER_MODULE)
        args = argv[start + 1 : argv.index(b"--", start)] if b"--" in argv[start:] else argv[start + 1 :]
        if argv[start - 1] != b"-m" or not args or args[0] != b"run":
            return None
        values = dict(zip(args[1::2], args[2::2]))
        if values.get(b"--home") != home_arg:
            return None
        return AttemptKey(values[b"--run-id"].decode(), int(values[b"--attempt"]))
    except (ValueError, KeyError, IndexError):
        return None


def _attempt_dir_arg(argv: list[bytes]) -> str:
    try:
        return argv[argv.index(b"--attempt-dir") + 1].decode(errors="replace")
    except (ValueError, IndexError):
        return ""


def _start_ticks(pid: int) -> int | None:
    """Process start time in clock ticks since boot (/proc/<pid>/stat field 22)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2 :].split()
    if fields[0] == b"Z":
        return None  # a zombie is already gone
    return int(fields[19])


def _belongs_to(pid: int, key: AttemptKey) -> bool:
    """Whether `pid` is the workload of this attempt (checked by its environment, not trusted)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"FRAY_RUN_ID={key.run_id}".encode() in environ and f"FRAY_ATTEMPT={key.attempt}".encode() in environ


def _planned_stop_signal(pid: int) -> signal.Signals:
    """SIGUSR2, the planned stop (checkpoint, then SIGTERM), to a wrapper that handles it; else SIGTERM.

    A wrapper started before an upgrade may not know SIGUSR2, and would die of it without cleaning up.
    """
    planned = signal.Signals[contract.PLANNED_STOP_SIGNAL]
    return planned if wrapper.catches(pid, planned) else signal.SIGTERM


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        _signal(pid, sig)


def _gpu_name() -> str | None:
    """The first GPU's model as nvidia-smi names it (`NVIDIA H100 80GB HBM3`), None without one."""
    try:
        listing = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = [line.strip() for line in listing.stdout.splitlines() if line.strip()]
    return names[0] if listing.returncode == 0 and names else None


def _wait_then(child: subprocess.Popen[bytes], callback: Callable[[], None]) -> None:
    child.wait()
    callback()
