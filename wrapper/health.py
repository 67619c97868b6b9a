"""The health command (`--health-cmd CMD`): run every --health-interval while the workload runs.

Each check is `/bin/sh -c CMD` in the workload's folder and environment, in a
process group of its own, with the interval as its deadline (a check that
hangs is killed and counts as failed). Its output replaces health.out; the
running tally is health.json (schemas/health.json).

K (--health-retries) failures in a row are treated like a heartbeat stall,
in the simplest honest way: the wrapper holds the heartbeat. It says why in
wrapper.log and health.json, and the shepherd's existing stall logic does the
rest - after --heartbeat-timeout it stops the attempt (SIGUSR2: checkpoint,
then stop), suspects the node, and starts a new attempt, on the node-failure
budget. The alternative, exiting 42 at once, would make the wrapper judge the
node alone and skip the grace a stall gets; holding the beat keeps one place
(the shepherd) deciding, with one set of thresholds. A check that passes
again before the shepherd acts releases the heartbeat: a blip is forgiven.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from . import contract, fence, records
from .heartbeat import Heartbeat
from .procs import Reaper
from .tail import tail_lines

OUTPUT_TAIL_LINES = 5
KILL_WAIT_SEC = 5.0

HEALTHY = "healthy"
FAILING = "failing"  # failed, fewer than K times in a row
UNHEALTHY = "unhealthy"  # K failures in a row: the heartbeat is held


class HealthCheck:
    """A thread running the health command; holds `heartbeat` after K failures in a row."""

    def __init__(
        self,
        command: str,
        interval: float,
        retries: int,
        *,
        attempt_dir: str,
        env: Mapping[str, str],
        cwd: str,
        heartbeat: Heartbeat,
        reaper: Reaper,
        log: Callable[[str], None],
    ) -> None:
        self.command = command
        self.interval = interval
        self.retries = retries
        self.env = dict(env)
        self.cwd = cwd
        self.heartbeat = heartbeat
        self.reaper = reaper
        self.log = log
        self.record_path = os.path.join(attempt_dir, contract.HEALTH)
        self.output_path = os.path.join(attempt_dir, contract.HEALTH_OUTPUT)
        self.checks = 0
        self.failures_in_a_row = 0
        self.held_since: float | None = None
        self._stopping = threading.Event()
        self._running_pid: int | None = None
        self._thread = threading.Thread(target=self._run, name="fray-health", daemon=True)

    def start(self) -> "HealthCheck":
        self.log(f"health command every {self.interval:g}s, {self.retries} failures in a row hold the heartbeat: "
                 f"{self.command}")
        self._thread.start()
        return self

    def silence(self) -> None:
        """No more checks nor records (the attempt was superseded); waits for nothing."""
        self._stopping.set()

    def stop(self, timeout: float = KILL_WAIT_SEC) -> None:
        """Stop checking; a check under way is killed."""
        self._stopping.set()
        pid = self._running_pid
        if pid is not None:
            _kill_group(pid)
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stopping.wait(self.interval):
            last = self._check()
            if self._stopping.is_set():
                return  # killed by stop(): not the workload's failure
            self._tally(last)

    def _check(self) -> dict[str, Any]:
        """Run the command once: exit code (None when killed), whether it timed out, its output's tail."""
        started_at, started = time.time(), time.monotonic()
        exit_code: int | None = None
        timed_out = False
        try:
            out = os.open(self.output_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, records.FILE_MODE)
            try:
                proc = subprocess.Popen(
                    ["/bin/sh", "-c", self.command], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    env=self.env, cwd=self.cwd, start_new_session=True, close_fds=True,
                )
            finally:
                os.close(out)
        except OSError as exc:
            return self._result(started_at, started, None, False, [f"cannot run the health command: {exc}"])
        self._running_pid = proc.pid
        status = self.reaper.wait_child(proc.pid, self.interval)
        if status is None:
            timed_out = True
            _kill_group(proc.pid)
            status = self.reaper.wait_child(proc.pid, KILL_WAIT_SEC)
        self._running_pid = None
        if status is not None:
            proc.returncode = os.waitstatus_to_exitcode(status)  # reaped elsewhere: tell Popen
            exit_code = None if timed_out else proc.returncode
        return self._result(started_at, started, exit_code, timed_out, tail_lines(self.output_path, OUTPUT_TAIL_LINES))

    @staticmethod
    def _result(
        started_at: float, started: float, exit_code: int | None, timed_out: bool, tail: list[str]
    ) -> dict[str, Any]:
        return {"started_at": started_at, "seconds": round(time.monotonic() - started, 3), "exit_code": exit_code,
                "timed_out": timed_out, "output_tail": tail}

    def _tally(self, last: dict[str, Any]) -> None:
        self.checks += 1
        passed = last["exit_code"] == 0 and not last["timed_out"]
        if passed:
            if self.held_since is not None:
                self.log("the health command passes again: heartbeat resumed")
                self.heartbeat.release()
                self.held_since = None
            self.failures_in_a_row = 0
        else:
            self.failures_in_a_row += 1
            how = f"timed out after {self.interval:g}s" if last["timed_out"] else f"exited {last['exit_code']}"
            self.log(f"health check failed ({self.failures_in_a_row} in a row): {how}; see {self.output_path}")
            if self.failures_in_a_row >= self.retries and self.held_since is None:
                self.held_since = time.time()
                reason = f"{self.failures_in_a_row} health checks failed in a row"
                self.heartbeat.hold()
                self.log(f"{reason}: holding the heartbeat, so the shepherd treats this attempt as stalled "
                         "(stops it, suspects the node, starts another)")
        self._write(last)

    def _write(self, last: dict[str, Any]) -> None:
        state = HEALTHY if self.failures_in_a_row == 0 else UNHEALTHY if self.held_since is not None else FAILING
        document = {
            "updated_at": time.time(),
            "command": self.command,
            "interval_sec": self.interval,
            "retries": self.retries,
            "checks": self.checks,
            "failures_in_a_row": self.failures_in_a_row,
            "state": state,
            "heartbeat_held": self.held_since is not None,
            "held_since": self.held_since,
            "last": last,
        }
        try:
            records.write_record_json(self.record_path, document)
        except fence.Superseded:
            return  # the wrapper is being fenced: its handler kills everything
        except (OSError, ValueError) as exc:
            self.log(f"cannot write {self.record_path}: {exc}")


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
