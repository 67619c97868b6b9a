"""An attempt whose workload is a function called in this very process: the wrapper's record sequence around it.

A function host of the local warm worker (fray.warm.function_host) is the
wrapper and the workload of function attempt after attempt. Each attempt still
gets every record a forked wrapper writes (the first heartbeat, probe.json,
started.json with the host's pid as wrapper and workload, final.json or
failure.json, exit.json), through the attempt's fence, by the wrapper's own
sequence (fray.wrapper.attempt.keep_records): this module is that sequence
with "start the workload" replaced by "call it here", which the host does
(`call`), and what its processes left killed afterwards, as the wrapper's
clean-up kills them.
"""

from __future__ import annotations

import os
import signal
from typing import Callable, Dict, Optional, Tuple

from . import code, contract, fence, forked, guardian, outcome, procs, workload
from .attempt import Attempt, keep_records, record_end
from .hangwatch import Watch
from .heartbeat import Heartbeat
from .log import DiagnosticLog
from .options import Options

# (options, the script, its environment, its working folder) -> (its exit code, whether the host must retire)
Call = Callable[[Options, str, Dict[str, str], str], Tuple[int, bool]]


def run(options: Options, started_at: float, guardian_fd: Optional[int], call: Call) -> bool:
    """The attempt, from its first heartbeat to exit.json, its workload `call`ed here; whether the host must retire
    after it. `guardian_fd`: the host's guardian (fray.wrapper.guardian.start_for_host), told of this attempt."""
    assert options.home is not None
    guardian.serving(guardian_fd, options.run_id, options.attempt, options.home, options.attempt_dir)
    fence.bind(fence.Writer(options.home, options.run_id, options.attempt), _fenced)
    log = DiagnosticLog(os.path.join(options.attempt_dir, contract.WRAPPER_LOG))
    heartbeat = Heartbeat(os.path.join(options.attempt_dir, contract.HEARTBEAT), options.heartbeat_interval,
                          log.write).start()
    attempt = Attempt(options, log, heartbeat, started_at)
    retire = False

    def steps() -> int:
        nonlocal retire
        try:
            log.write(f"run {options.run_id} attempt {options.attempt} on {attempt.stamp.host}, "
                      f"script {options.script} (in the function host {os.getpid()})")
            attempt.preflight()
            if attempt.probe_failure is None:
                retire = _launch(attempt, guardian_fd, call)
            else:
                attempt.write(contract.STARTED, attempt.started_record())
            return attempt.report()
        except BaseException:
            log.exception("internal error in the function host; retiring it")
            retire = True
            return contract.EXIT_WRAPPER_ERROR

    try:
        keep_records(attempt, steps)
    finally:
        fence.bind(None)  # between attempts the host writes for none
        attempt.wakeup.close()
    return retire


def _fenced(_reason: str) -> None:
    os._exit(contract.EXIT_FENCED)  # nothing of this attempt started yet


def _launch(attempt: Attempt, guardian_fd: Optional[int], call: Call) -> bool:
    """Lay out the code, run the function here, kill what it left; whether the host must retire."""
    options = attempt.options
    try:
        place = workload.place(options)
    except (code.CodeError, OSError) as exc:
        attempt.launch_error = f"cannot lay out the run's code: {exc}"
        attempt.write(contract.STARTED, attempt.started_record())
        return False
    env = workload.workload_env(os.environ, options, place.python_path)
    if not os.path.isdir(place.cwd):
        attempt.launch_error = (f"the working directory {place.cwd} does not exist on this node or is not a "
                                "directory; check --workdir")
        attempt.launch_node_side = True
        attempt.write(contract.STARTED, attempt.started_record())
        return False
    attempt.proc = forked.Forked(os.getpid())
    attempt.log.write(f"running the function in this process, in {place.cwd}")
    watch = Watch(os.getpid(), options.attempt_dir, options.commands_dir, options.heartbeat_interval,
                  options.idle_timeout, options.progress_timeout, lambda: _end_hung(attempt, watch),
                  attempt.log.write).start()
    attempt.watch = watch
    attempt.write(contract.STARTED, attempt.started_record())
    try:
        exit_code, retire = call(options, place.script, env, place.cwd)
    finally:
        watch.stop()
    left = procs.stop_all(None, _reap_children, min(options.stop_grace, 5.0), attempt.log.write)
    if left:
        attempt.log.write(f"giving up on processes that would not die: {left}; retiring this host")
        retire = True
    else:
        guardian.host_all_clear(guardian_fd)
    attempt.end = outcome.WorkloadEnd(exit_code, None)
    attempt.log.write(f"the function {attempt.end.describe()}")
    return retire


def _end_hung(attempt: Attempt, watch: Watch) -> None:
    """The hang watch's verdict, in its thread (the main one is the function's): the stacks, the records, then
    SIGKILL to this host's group (the worker sees exit.json and writes nothing more)."""
    verdict = watch.verdict
    assert verdict is not None
    capture = watch.take_stacks(f"{verdict.cause}: {verdict.detail}")
    attempt.hang = verdict
    attempt.end = outcome.WorkloadEnd(None, "SIGKILL")
    attempt.log.write(f"ending the function: {verdict.detail}"
                      + (f"; hung in {capture.hung_in}" if capture.hung_in else "; no stack could be taken"))
    attempt.write_exit(attempt.report())
    os.killpg(os.getpid(), signal.SIGKILL)


def record_death(options: Options, pid: int, status: int, started_at: float, stop_signal: Optional[int]) -> None:
    """What the wrapper would have written for the attempt of a host `pid` that died in it with wait `status`
    (stopped by `stop_signal`, if it was): failure.json (or final.json) and exit.json, through the fence and the
    wrapper's own record_end; nothing once the attempt is superseded or its folder gone."""
    fence.bind(fence.Writer(options.home or "", options.run_id, options.attempt))
    attempt = None
    try:
        log = DiagnosticLog(os.path.join(options.attempt_dir, contract.WRAPPER_LOG), echo=False)
        attempt = Attempt(options, log, None, started_at)
        attempt.proc = forked.Forked(pid)  # the workload was the host itself
        attempt.end = outcome.WorkloadEnd.from_wait_status(status)
        attempt.received_signal = stop_signal
        log.write(f"the function host {pid} running this attempt {attempt.end.describe()}")
        record_end(attempt)
        log.close()
    except (fence.Superseded, OSError, ValueError):
        pass  # superseded meanwhile, or the folder is gone: nothing of this attempt is ours to write
    finally:
        if attempt is not None:
            attempt.wakeup.close()
        fence.bind(None)


def _reap_children() -> None:
    """Collect what the function started and what its processes daemonized (this host is their subreaper)."""
    for _ in procs.ended_children():
        pass
