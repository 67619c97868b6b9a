"""One attempt after the first heartbeat: launch, watch, clean up, report.

Steps 2 to 5 of the order described in `wrapper.main`:

2. signal handlers, subreaper, launch, started.json;
3. wait for the workload, or for a stop signal and then --stop-grace;
4. kill whatever the workload left running, then final.json or failure.json;
5. stop the heartbeat and write exit.json, the very last act.

A file that cannot be written (full disk, lost mount) is logged and skipped:
the wrapper still cleans up and exits with the code that says what happened.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from wrapper import contract, outcome, procs, records, workload
from wrapper.heartbeat import Heartbeat
from wrapper.log import DiagnosticLog
from wrapper.options import Options
from wrapper.signals import SignalRelay, Wakeup
from wrapper.tail import tail_lines

STDERR_TAIL_LINES = 20
STATUS_AFTER_GROUP_GONE_SEC = 1.0  # the reaper thread records what it has just reaped


class _Attempt:
    """The state of one attempt as the main thread drives it."""

    def __init__(self, options: Options, log: DiagnosticLog, started_at: float) -> None:
        self.options = options
        self.log = log
        self.stamp = outcome.AttemptStamp(options.run_id, options.attempt, socket.gethostname(), started_at)
        self.wakeup = Wakeup()
        self.relay = SignalRelay(self.wakeup)
        self.proc: subprocess.Popen[bytes] | None = None
        self.reaper: procs.Reaper | None = None
        self.launch_error: str | None = None
        self.end: outcome.WorkloadEnd | None = None
        self.received_signal: int | None = None
        self._cleaned = False

    def path(self, name: str) -> str:
        return os.path.join(self.options.attempt_dir, name)

    def write(self, name: str, document: Any) -> bool:
        try:
            records.write_json(self.path(name), document)
            return True
        except (OSError, ValueError, TypeError) as exc:
            self.log.write(f"cannot write {self.path(name)}: {exc}")
            return False

    # -- launch ------------------------------------------------------------

    def launch(self) -> None:
        options = self.options
        if not procs.become_subreaper() and sys.platform.startswith("linux"):
            self.log.write("cannot become a child subreaper: escaped grandchildren may outlive the attempt")
        try:
            first_line = workload.read_first_line(options.script)
        except FileNotFoundError:
            self.launch_error = f"the script {options.script} does not exist"
            return
        except OSError as exc:
            self.launch_error = f"the script {options.script} cannot be read: {exc.strerror or exc}"
            return
        argv = workload.launch_argv(options.script, first_line, options.script_args)
        env = workload.workload_env(os.environ, options)
        if options.checkpoint_dir is not None:
            try:
                records.make_private_dir(options.checkpoint_dir)
            except OSError as exc:
                self.launch_error = f"cannot create the checkpoint folder {options.checkpoint_dir}: {exc.strerror or exc}"
                return
        if self.relay.stop_signum is not None:
            return  # told to stop while getting ready: do not start what would be killed at once
        cwd = options.workdir or os.getcwd()
        self.log.write(f"launching {argv} in {cwd}")
        try:
            self.proc = workload.start(argv, env, cwd, self.path(contract.STDOUT), self.path(contract.STDERR))
        except workload.LaunchError as exc:
            self.launch_error = str(exc)
            return
        self.relay.attach(self.proc.pid)  # the pid is the group id: start_new_session
        self.reaper = procs.Reaper(self.proc.pid, self.wakeup.notify).start()
        self.log.write(f"workload started, pid {self.proc.pid}")

    # -- wait --------------------------------------------------------------

    def wait(self) -> None:
        """Until the workload exits, or until --stop-grace after a stop signal (then SIGKILL)."""
        if self.proc is None or self.reaper is None:
            return
        kill_at: float | None = None
        while not self.reaper.exited.is_set():
            now = time.monotonic()
            if self.relay.stop_signum is not None and kill_at is None:
                kill_at = now + self.options.stop_grace
                self.log.write(
                    f"received {outcome.signal_name(self.relay.stop_signum)}: forwarded to the workload, "
                    f"which has {self.options.stop_grace:g}s (--stop-grace) to exit"
                )
            if kill_at is not None and now >= kill_at:
                self.log.write(f"the workload did not exit within {self.options.stop_grace:g}s: SIGKILL")
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                break
            self.wakeup.wait(None if kill_at is None else kill_at - now)
        # Decided now: a stop that arrives after the workload has ended did not end it.
        self.received_signal = self.relay.stop_signum

    # -- clean up ----------------------------------------------------------

    def clean_up(self) -> None:
        """Kill what is left of the workload's group and every descendant; learn the exit status."""
        if self._cleaned:
            return
        self._cleaned = True
        if self.proc is None or self.reaper is None:
            return
        reaper = self.reaper
        grace = min(self.options.stop_grace, 5.0)
        left = procs.stop_all(self.proc.pid, reaper.reap_ready, grace, self.log.write)
        if left:
            self.log.write(f"giving up on processes that would not die: {left}")
        else:
            self.relay.detach()
        if not reaper.exited.is_set():
            reaper.exited.wait(STATUS_AFTER_GROUP_GONE_SEC)
        status = reaper.wait_status
        if status is None:
            self.log.write("the workload's exit status is unknown (it could not be reaped)")
            return
        self.end = outcome.WorkloadEnd.from_wait_status(status)
        # We reaped it ourselves (waitpid(-1)); tell Popen so it does not try again.
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.log.write(f"the workload {self.end.describe()}")

    # -- report ------------------------------------------------------------

    def report(self) -> int:
        """Write final.json or failure.json; the wrapper's exit code."""
        if self.proc is None:
            self.received_signal = self.relay.stop_signum
        result = outcome.decide(
            launch_error=self.launch_error,
            end=self.end,
            received_signal=self.received_signal,
            script=self.options.script,
            stderr_path=self.path(contract.STDERR),
        )
        now = time.time()
        if result.cause is None:
            self.write(contract.FINAL, outcome.final_record(self.stamp, now, self.read_result()))
        else:
            self.log.write(f"failure ({result.cause}): {result.message}")
            tail = tail_lines(self.path(contract.STDERR), STDERR_TAIL_LINES)
            self.write(contract.FAILURE, outcome.failure_record(self.stamp, result, self.end, tail, now))
        return result.exit_code

    def read_result(self) -> dict[str, Any] | None:
        path = self.path(contract.RESULT)
        try:
            document = records.read_json(path)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            self.log.write(f"ignoring {path}: {exc}")
            return None
        if not isinstance(document, dict):
            self.log.write(f"ignoring {path}: a result must be a JSON object, not {type(document).__name__}")
            return None
        return document

    def started_record(self) -> dict[str, Any]:
        version = ".".join(str(part) for part in sys.version_info[:3])
        return outcome.started_record(
            self.stamp, os.getpid(), self.proc.pid if self.proc else None, f"{sys.executable} {version}"
        )


def run_attempt(options: Options, log: DiagnosticLog, heartbeat: Heartbeat, started_at: float) -> int:
    """Everything after the first heartbeat; the wrapper's exit code. Stops `heartbeat` and closes `log`."""
    attempt = _Attempt(options, log, started_at)
    exit_code = contract.EXIT_WRAPPER_ERROR
    try:
        attempt.relay.install()
        log.write(f"run {options.run_id} attempt {options.attempt} on {attempt.stamp.host}, script {options.script}")
        attempt.launch()
        attempt.write(contract.STARTED, attempt.started_record())
        attempt.wait()
        attempt.clean_up()
        exit_code = attempt.report()
    except BaseException:
        log.exception("internal error in the wrapper; cleaning up")
    finally:
        try:
            attempt.clean_up()
        except BaseException:
            log.exception("internal error while cleaning up")
        heartbeat.stop()
        attempt.write(
            contract.EXIT,
            outcome.exit_record(attempt.stamp, exit_code, attempt.end, attempt.received_signal, time.time()),
        )
        log.write(f"exit {exit_code}")
        log.close()
    return exit_code
