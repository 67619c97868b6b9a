"""A function host: one process of the warm worker that is the wrapper and the workload of function attempts, one
after another.

A short function forked its own wrapper, guardian and workload from the warm
worker (fray.wrapper.forked): three forks, each copying the pages it writes,
cost a trivial function about 40 ms of CPU, twenty times its own. A host is
forked once per CPU and runs each function attempt it is handed in itself, as
a Ray worker or a `ProcessPoolExecutor` runs task after task, while keeping
every record a forked wrapper writes: the first heartbeat, probe.json,
started.json (the host's pid as wrapper and workload), call-result.*,
final.json or failure.json, exit.json, all through the attempt's fence: the
wrapper's own sequence (fray.wrapper.hosted), reached through its face.

One attempt at a time, and each leaves the host as it found it:
- the function sees what a forked workload sees: its environment, its working
  folder, stdout.log and stderr.log on descriptors 1 and 2, the run's code
  first on sys.path, default signal dispositions (a stop kills the host);
- afterwards the environment, folder, descriptors, sys.path and signal
  handlers are put back; every module it imported is dropped again unless it
  is the standard library's (the next function imports the user's own
  modules, the packages it needs and fray's it had not loaded fresh from
  disk, as a new Python would); processes it left are killed, as the wrapper's clean-up kills them;
- what cannot be put back retires the host after that attempt (the worker
  forks a fresh one): a thread the function left running, a compiled
  extension module (numpy's: it cannot be imported twice in a process), or
  fray's own process-wide state changed (a cluster handle from
  `current_cluster()`, an actor connection: another attempt's namespace and
  sockets). Pure functions, the case this is for, change none of these.

The attempt a host serves is on descriptor ATTEMPT_FD (its folder, opened
while it serves it): how the local backend finds the attempt's process in
/proc (fray.warm.daemon_side.attempt_of), since the host's working folder
is the function's. Whatever ends the host while it serves an attempt (a stop,
the OOM killer, a crash, os._exit in the function), the warm worker, its
parent, writes the records the wrapper would have (fray.warm.host_pool),
and the host's guardian, forked once with the host and told each attempt it
serves, kills what that attempt left (fray.wrapper.guardian) - even when the
worker is gone too.

Protocol on the host's two pipes: the worker writes one request a line (the
warm worker's request, fray.warm.worker); the host answers b"done\\n"
or b"retire\\n" (done, and exiting) once the attempt's exit.json is written.
EOF on its requests (the worker is gone) ends the host between attempts.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn

from fray.wrapper import contract
from fray.wrapper import face as wrapper
from fray.wrapper.contract import ATTEMPT_FD

if TYPE_CHECKING:
    from fray.wrapper.face import Options

_guardian: int | None = None  # the write end of this host's guardian's pipe (fray.wrapper.guardian)
_fray_state: list[tuple[dict[str, Any], str]] = []  # fray's module-level state, which a function may change


def serve(requests: int, replies: int) -> NoReturn:
    """In the forked host: attempts from `requests`, one at a time, until EOF or a retirement."""

    def life() -> int:
        signal.set_wakeup_fd(-1)
        os.setsid()  # a stop sent to the host's group takes what its function started, never the worker
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        os.chdir("/")
        wrapper.close_fds_from(3, keep=(requests, replies, wrapper.warm_imports_fd()))
        wrapper.new_std_streams(unbuffered=True)
        wrapper.default_signals()
        wrapper.become_subreaper()  # what a function daemonizes stays this host's, to be killed after it
        global _guardian, _fray_state
        _guardian = wrapper.start_host_guardian()  # before any thread: it forks
        _fray_state = _private_globals()
        pending = b""
        while True:
            chunk = os.read(requests, 1 << 16)
            if not chunk:
                return 0
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                retire = run_attempt(json.loads(line))
                os.write(replies, b"retire\n" if retire else b"done\n")
                if retire:
                    return 0

    wrapper.exit_with(life)


def run_attempt(request: dict[str, Any]) -> bool:
    """One attempt, from its first heartbeat to exit.json; whether the host must retire after it."""
    started_at = time.time()
    folder = os.open(request["cwd"], os.O_RDONLY | os.O_DIRECTORY)
    os.dup2(folder, ATTEMPT_FD, inheritable=False)
    os.close(folder)
    log_fd = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    for fd in (1, 2):
        os.dup2(log_fd, fd)  # wrapper.log, as a forked wrapper's stdout and stderr
    os.close(log_fd)
    base = dict(os.environ)
    _set_environment(request["env"], base)
    try:
        return wrapper.run_hosted_attempt(_options(request["options"]), started_at, _guardian, _call)
    finally:
        _set_environment(base, dict(os.environ))
        os.chdir("/")
        null = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            os.dup2(null, fd)
        os.close(null)
        os.close(ATTEMPT_FD)


def _call(options: Options, script: str, env: dict[str, str], cwd: str) -> tuple[int, bool]:
    """The function, as a forked workload runs it (fray.wrapper.forked.start); its exit code and whether what it
    left behind retires the host."""
    main = wrapper.function_entry()
    out = _open_append(os.path.join(options.attempt_dir, contract.STDOUT))
    err = _open_append(os.path.join(options.attempt_dir, contract.STDERR))
    saved_fds = {fd: os.dup(fd) for fd in (1, 2)}
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.close(out)
    os.close(err)
    saved_streams = (sys.stdout, sys.stderr, sys.stdin)
    saved_path, saved_argv = list(sys.path), list(sys.argv)
    base = dict(os.environ)
    modules = dict(sys.modules)
    threads = set(threading.enumerate())
    _set_environment(env, base)
    os.chdir(cwd)
    wrapper.new_std_streams(unbuffered=bool(env.get("PYTHONUNBUFFERED")))
    sys.argv = [script]
    extra = [path for path in env.get("PYTHONPATH", "").split(os.pathsep) if path]
    sys.path[:0] = [os.path.dirname(os.path.realpath(script)), *extra]
    wrapper.unshadow_imports([*sys.path[:1 + len(extra)], cwd])
    wrapper.arm_stack_dump()  # as `import fray` arms it in a new Python: the hang watch's stacks
    state = _read(_fray_state)
    try:
        code = wrapper.run_as_main(main)
    finally:
        changed = _read(_fray_state) != state  # a cluster, a connection, a history the next attempt must not see
        wrapper.disarm_stack_dump()
        wrapper.tell_imports(set(modules))
        for fd, copy in saved_fds.items():
            os.dup2(copy, fd)
            os.close(copy)
        sys.stdout, sys.stderr, sys.stdin = saved_streams
        sys.path[:], sys.argv[:] = saved_path, saved_argv
        _set_environment(base, dict(os.environ))
        wrapper.default_signals()
    retire = wrapper.forget_imported(modules) or changed or bool(set(threading.enumerate()) - threads)
    return code, retire


def _private_globals() -> list[tuple[dict[str, Any], str]]:
    """Where fray's modules keep process-wide state (`_clusters`, `_connections`, ...): their private
    module-level names that hold values, not functions, classes or modules."""
    return [(namespace, key) for name, module in list(sys.modules.items())
            if module is not None and name.partition(".")[0] == "fray"
            for namespace in (vars(module),) for key, value in namespace.items()
            if key[:1] == "_" and key[:2] != "__" and not callable(value) and not isinstance(value, ModuleType)]


def _read(places: list[tuple[dict[str, Any], str]]) -> list[tuple[int, int]]:
    """Each place's value, by identity and (a container's) size."""
    return [(id(value), len(value) if isinstance(value, (dict, set, list)) else -1)
            for namespace, key in places for value in (namespace.get(key),)]


def _open_append(path: str) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)


def _options(fields: dict[str, Any]) -> Options:
    """The attempt's options as the worker parsed them from its wrapper's command line (host_pool.as_fields)."""
    return wrapper.Options(**{name: tuple(value) if isinstance(value, list) else value for name, value in fields.items()})


def _set_environment(env: dict[str, str], current: dict[str, str]) -> None:
    """Make os.environ `env`, from `current` (what it is now): each change is a putenv, each read a decode."""
    for name in current.keys() - env.keys():
        del os.environ[name]
    for name, value in env.items():
        if current.get(name) != value:
            os.environ[name] = value
