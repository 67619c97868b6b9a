"""The guardian: whatever kills the wrapper, the processes its attempt started die within milliseconds.

The parent-death signal kills the workload with its wrapper, and the
subreaper keeps what the workload daemonizes a descendant of the wrapper while
the wrapper lives (fray.wrapper.procs). Once the wrapper itself is SIGKILLed
(the OOM killer, a crash, `kill -9`), those escaped descendants are reparented
to init, and without the guardian only a sweep finds them: the daemon's on
the login node, every 2 s; on a Slurm node without cgroups or a TPU host, only
the next fray wrapper started there - possibly never.

The guardian closes that gap without root and without the scheduler's help.
Before its first thread starts, the wrapper double-forks a small watcher: in
its own session (a signal to the wrapper's group or a Ctrl-C does not reach
it, and it ignores the polite signals a scheduler sends a job), not a
descendant of the wrapper (so the wrapper's own clean-up neither waits for nor
kills it, and Slurm's `proctrack/linuxproc` does not count it as the job's),
holding the read end of a pipe whose write end only the wrapper holds. It execs
`python -m fray.wrapper.guardian`, so that it never looks like a wrapper to
whoever finds wrappers by their command line (the local backend does). A
wrapper forked from the local backend's warm worker forks its guardian once,
as its own child in a session of its own, which guards from the fork itself,
in / (that backend finds those wrappers by their working folder): a new
Python, or the middle process's fork and exit, would cost a short function
more than the function (fray.wrapper.forked.guard_here); there is no Slurm
there to count it, and the wrapper's clean-up leaves it out
(fray.wrapper.procs.not_the_attempts). When the
wrapper ends, however it ends, the kernel closes that end; the guardian's read
returns, it SIGKILLs every process tagged with this attempt (fray.wrapper.tags)
that was started under this wrapper's attempt folder (FRAY_ATTEMPT_DIR: one
task's, where an attempt runs several; none are left after a normal end, where
the wrapper has killed them already), says
what it killed in the attempt's wrapper.log - through the fence, as every
job-side write: nothing once the attempt is closed - and exits. A wrapper that
has itself killed everything its workload left (its clean-up found nothing
left alive) writes one byte into the pipe first (`all_clear`): the guardian
then exits without reading every process's environment, a scan that costs a
short function's attempt more than the function.

What it does not cover: a kill that takes the guardian as well (the node going
away, which takes everything; a SIGKILL sent to it by hand). Then the sweeps
hold: the daemon's (local backend) and the next wrapper's on that node.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import NoReturn

from . import forked, procs

# The signals a scheduler or a terminal sends to a job to stop it politely: the wrapper handles them itself;
# the guardian outlives them and ends when the wrapper does.
IGNORED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
ALL_CLEAR = b"."  # the wrapper's word that nothing its workload started is alive

_write_end: int | None = None  # this wrapper's end of its guardian's pipe


def start(run_id: str, attempt: int, home: str, attempt_dir: str) -> None:
    """Start the guardian of this attempt; call before any thread exists (it forks).

    Where it cannot start (no process or file left to this user), the attempt runs without it: the sweeps
    remain, as before it existed."""
    try:
        read_end, write_end = os.pipe()  # both close-on-exec: no process the wrapper launches holds the write end
    except OSError:
        return
    try:
        child = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return
    warm = forked.warm()  # a Python that has all it needs: guard from a fork of this one (fray.wrapper.forked)
    if child == 0:
        os.close(write_end)
        os.setsid()
        if warm:
            forked.guard_here(read_end, IGNORED, lambda: guard(read_end, run_id, attempt, home, attempt_dir))
        _through_a_middle_process(read_end, [run_id, str(attempt), home, attempt_dir])
    os.close(read_end)
    if warm:
        procs.not_the_attempts(child)  # this wrapper's child, but none of its attempt's processes
    else:
        os.waitpid(child, 0)  # the guardian is now init's child (or a subreaper's above): not the wrapper's
    global _write_end
    _write_end = write_end  # open until this process ends: its closing is what the guardian waits for


def _through_a_middle_process(read_end: int, args: list[str]) -> NoReturn:
    """In the middle process, in a session of its own: fork the guardian, which execs, and go once it has."""
    try:
        execed, exec_signal = os.pipe()  # close-on-exec: EOF once the guardian has exec'd (or died)
        if os.fork() == 0:
            _exec_guardian(read_end, args)
        os.close(exec_signal)
        # Not gone before the exec: a fork of the wrapper that init had adopted would look like a second
        # wrapper of this attempt to whoever finds wrappers by command line and parent.
        os.read(execed, 1)
    finally:
        os._exit(0)


def all_clear() -> None:
    """Tell the guardian that nothing this attempt started is alive any more (the clean-up killed and reaped
    it all): when this wrapper ends, it has nothing to look for."""
    if _write_end is not None:
        try:
            os.write(_write_end, ALL_CLEAR)
        except OSError:
            pass  # the guardian is gone: nothing to tell


def _exec_guardian(read_end: int, args: list[str]) -> None:
    for signum in IGNORED:
        signal.signal(signum, signal.SIG_IGN)  # kept across exec: ignored from the first instant
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)  # the wrapper's output may be a file the next attempt owns
    os.set_inheritable(read_end, True)
    os.execv(sys.executable, [sys.executable, "-m", __name__, str(read_end), *args])


def start_for_host() -> int | None:
    """In a function host (fray.warm.function_host), before any thread: fork its guardian, which guards the
    attempt the host last named (`serving`) when the host ends; the write end of its pipe (None: no guardian)."""
    try:
        read_end, write_end = os.pipe()
    except OSError:
        return None
    try:
        child = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return None
    if child == 0:
        os.close(write_end)
        os.setsid()
        forked.guard_here(read_end, IGNORED, lambda: guard_host(read_end))
    os.close(read_end)
    procs.not_the_attempts(child)  # the host's child, but none of its functions' processes
    return write_end


def serving(write_end: int | None, run_id: str, attempt: int, home: str, attempt_dir: str) -> None:
    """Tell a host's guardian which attempt the host runs from now on."""
    if write_end is not None:
        try:
            os.write(write_end, "\t".join([run_id, str(attempt), home, attempt_dir]).encode() + b"\n")
        except OSError:
            pass  # the guardian is gone: the sweeps remain


def host_all_clear(write_end: int | None) -> None:
    """Tell a host's guardian that nothing the attempt it runs started is alive any more."""
    if write_end is not None:
        try:
            os.write(write_end, ALL_CLEAR + b"\n")
        except OSError:
            pass


def guard_host(read_end: int) -> None:
    """A host's guardian's life: follow the attempts it names; once it ends, kill what the last one left."""
    current: list[str] | None = None
    pending = b""
    while chunk := os.read(read_end, 4096):  # b"" once the host has ended
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            current = None if line == ALL_CLEAR else line.decode().split("\t")
    if current is not None:
        run_id, attempt, home, attempt_dir = current
        kill_left(run_id, int(attempt), home, attempt_dir, "its function host has ended")


def guard(read_end: int, run_id: str, attempt: int, home: str, attempt_dir: str) -> None:
    """The guardian's life: wait for the wrapper's end, then kill what its attempt left and say so."""
    clear = False
    while byte := os.read(read_end, 1):  # b"" once the wrapper has ended
        clear = byte == ALL_CLEAR
    if not clear:
        kill_left(run_id, attempt, home, attempt_dir, "its wrapper has ended")


def kill_left(run_id: str, attempt: int, home: str, attempt_dir: str, why: str) -> None:
    """Kill the processes this attempt started under `attempt_dir` and say so in its wrapper.log."""
    from . import contract, fence, tags  # here, not above: the wrapper imports this module before its first beat
    from .log import DiagnosticLog

    mine = tags.Tag(run_id, attempt, home)
    # The attempt's processes that this wrapper started: an attempt of several tasks may run several wrappers on
    # one machine (local replicas; the test cluster's nodes), each with its own attempt folder in FRAY_ATTEMPT_DIR.
    killed = [pid for pid, tag in sorted(tags.tagged(home).items()) if tag == mine
              and tags.started_with(pid, contract.ENV_ATTEMPT_DIR) == attempt_dir and tags.kill(pid, tag)]
    if killed:
        fence.bind(fence.Writer(home, run_id, attempt))
        log = DiagnosticLog(os.path.join(attempt_dir, contract.WRAPPER_LOG), echo=False)
        for line in tags.describe([(mine, (why, killed))]):
            log.write(f"guardian: {line}")


if __name__ == "__main__":
    guard(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
