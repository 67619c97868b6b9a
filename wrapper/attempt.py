"""One attempt after the first heartbeat: probe, launch, watch, clean up, report.

Steps 2 to 5 of the order described in `fray.wrapper.main`:

2. signal handlers, preflight probes (probe.json; a failed probe ends the
   attempt here with 42, 43 or 44), subreaper, the sweep of what closed
   attempts left on this node, launch, started.json, the health command,
   the hang watch (`fray.wrapper.hangwatch`);
3. wait for the workload, or for a stop signal and then --stop-grace
   (`fray.wrapper.stopping`: a planned stop asks for a checkpoint first), or
   for the hang watch's verdict (its stacks into stacks.txt, then SIGKILL);
4. stop the health command, kill whatever the workload left running, then
   final.json or failure.json;
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
from typing import Any, Callable

from . import (code, contract, emitted, forked, guardian, hangwatch, left_out, oom, outcome, procs, records,
               resume_args, tags, trackers, workload)
from .fence import Fence, Superseded, Writer, bind
from .health import HealthCheck
from .heartbeat import Heartbeat
from .log import DiagnosticLog
from .options import Options
from .probes import preflight
from .probes.probe import ProbeContext
from .signals import PLANNED_STOP, SignalRelay, Wakeup
from .stopping import StopSequence, request_checkpoint
from .tail import tail_lines

STDERR_TAIL_LINES = 20
STATUS_AFTER_GROUP_GONE_SEC = 1.0  # the reaper thread records what it has just reaped


class Attempt:
    """The state of one attempt as the main thread drives it."""

    def __init__(self, options: Options, log: DiagnosticLog, heartbeat: Heartbeat | None, started_at: float) -> None:
        self.options = options
        self.log = log
        self.heartbeat = heartbeat
        host = socket.gethostname()
        # SLURMD_NODENAME is Slurm's name for this node: what squeue shows and --exclude takes.
        self.stamp = outcome.AttemptStamp(options.run_id, options.attempt, host, started_at,
                                          os.environ.get("SLURMD_NODENAME") or host)
        self.wakeup = Wakeup()
        self.relay = SignalRelay(self.wakeup)
        self.proc: subprocess.Popen[bytes] | None = None
        self.reaper: procs.Reaper | None = None
        self.launch_error: str | None = None
        self.launch_node_side = False  # the launch failed for want of something on this node
        self.script = options.script  # what runs: the run's copy of its script once its code is laid out
        self.probe_failure: outcome.Outcome | None = None
        self.oom: oom.OomCounter | None = None
        self.health: HealthCheck | None = None
        self.watch: hangwatch.Watch | None = None
        self.hang: hangwatch.Verdict | None = None  # the watch found the workload hung: it was ended for that
        self.readers: list[Any] = []  # what reads the job's output and event files as progress (fray.wrapper.emitted)
        self.retry: dict[str, Any] | None = None  # whether --retry-args were added (started.json)
        self.cwd: str | None = None  # where the workload was started
        self.end: outcome.WorkloadEnd | None = None
        self.received_signal: int | None = None
        self._cleaned = False
        self.superseded = False

    def stop_asked(self) -> None:
        """The daemon decided to stop this attempt and no signal came (its daemon runs on another host, say): stop
        as at the backend's planned stop (checkpoint first, then the workload's grace), unless a stop is under way."""
        if self.relay.stop_signum is None:
            self.log.write("the daemon stopped this attempt (meta.json) and no signal came: stopping it")
            os.kill(os.getpid(), PLANNED_STOP)

    def fenced(self, reason: str) -> None:
        """This attempt was superseded (fray.wrapper.fence): kill everything, write nothing, exit now.

        `reason` is not written anywhere, on purpose: every file here may be the next attempt's.
        """
        self.superseded = True  # first: the main thread may be about to write a record
        self.log.silence()
        self.heartbeat.silence()
        if self.health is not None:
            self.health.silence()
        if self.watch is not None:
            self.watch.stop()
        procs.kill_all_now(self.proc.pid if self.proc is not None else None)
        os._exit(contract.EXIT_FENCED)

    def path(self, name: str) -> str:
        return os.path.join(self.options.attempt_dir, name)

    def write(self, name: str, document: Any) -> bool:
        if self.superseded:
            return False
        try:
            records.write_record_json(self.path(name), document)
            return True
        except Superseded:
            return False  # the fence's handler is killing everything meanwhile
        except (OSError, ValueError, TypeError) as exc:
            self.log.write(f"cannot write {self.path(name)}: {exc}")
            return False

    # -- preflight ---------------------------------------------------------

    def preflight(self) -> None:
        """Run the probes this attempt calls for; probe.json; remember a failure."""
        options = self.options
        selection = preflight.plan(options.gpus, options.tpu_devices, options.probes, options.skip_probes)
        context = ProbeContext(
            gpus=options.gpus,
            tpu_devices=options.tpu_devices,
            tpu_device_globs=options.tpu_device_globs,
            home=options.home,
            workdir=options.workdir,
            min_free_disk_mb=options.min_free_disk_mb,
            env=lambda: workload.workload_env(os.environ, options),  # the smoke test sees what the workload will
        )
        started_at = time.time()
        entries, failure = preflight.run(
            context, selection, options.probe_timeout, self.log.write, lambda: self.relay.stop_signum is not None
        )
        requested = {"gpus": options.gpus, "tpu_devices": options.tpu_devices,
                     "probes": list(options.probes) if options.probes is not None else None,
                     "skip_probes": list(options.skip_probes)}
        self.write(contract.PROBE, preflight.document(self.stamp.host, started_at, time.time(), entries, failure, requested))
        if failure is not None:
            self.probe_failure = outcome.Outcome(failure.exit_code, failure.cause, failure.message, probe=failure.probe)

    # -- launch ------------------------------------------------------------

    def launch(self) -> None:
        options = self.options
        if self.probe_failure is not None:
            return  # an unfit node: the workload would only waste its time here
        if not procs.become_subreaper() and sys.platform.startswith("linux"):
            self.log.write("cannot become a child subreaper: escaped grandchildren may outlive the attempt")
        try:
            place = workload.place(options)
        except (code.CodeError, OSError) as exc:
            self.launch_error = f"cannot lay out the run's code: {exc}"
            return
        self.script = place.script
        added, self.retry = resume_args.decide(options.attempt, options.retry_args, options.retry_args_if_exists,
                                               place.cwd)
        script_args = [*options.script_args, *added]
        if options.module is not None:
            argv = [options.python or sys.executable, "-m", options.module, *script_args]
        else:
            try:
                first_line = workload.read_first_line(place.script)
            except FileNotFoundError:
                self.launch_error = f"the script {place.script} does not exist"
                return
            except OSError as exc:
                self.launch_error = f"the script {place.script} cannot be read: {exc.strerror or exc}"
                return
            argv = workload.launch_argv(place.script, first_line, script_args, options.python)
        env = workload.workload_env(os.environ, options, place.python_path)
        for name, value in trackers.environment(os.environ, options.run_id, options.attempt, place.cwd,
                                                self.log.write).items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        if options.checkpoint_dir is not None:
            try:
                records.make_private_dir(options.checkpoint_dir)
            except OSError as exc:
                self.launch_error = f"cannot create the checkpoint folder {options.checkpoint_dir}: {exc.strerror or exc}"
                return
        if self.relay.stop_signum is not None:
            return  # told to stop while getting ready: do not start what would be killed at once
        if options.home is not None and not forked.warm():
            # What closed attempts left on this node dies before this one starts (fray.wrapper.tags). A wrapper
            # forked by the local warm worker is on the daemon's machine, whose stray killer does it every cycle
            # (fray.daemon.strays); a scan of /proc here would cost a short function more than it does.
            for line in tags.describe(tags.reap_closed(options.home).items()):
                self.log.write(line)
        cwd = self.cwd = place.cwd
        self.log.write(f"launching {argv} in {cwd}")
        try:
            self.proc = workload.start(argv, env, cwd, self.path(contract.STDOUT), self.path(contract.STDERR))
        except workload.LaunchError as exc:
            self.launch_error, self.launch_node_side = str(exc), exc.node_side
            return
        self.relay.attach(self.proc.pid)  # the pid is the group id: start_new_session
        self.oom = oom.OomCounter.of(self.proc.pid)  # its memory cgroup's OOM kills so far: a kill is judged by it
        self.reaper = procs.Reaper(self.proc.pid, self.wakeup.notify).start()
        self.log.write(f"workload started, pid {self.proc.pid}")
        self.readers = emitted.start(options, cwd, self.path(contract.STDOUT), self.path(contract.STDERR), self.log.write)
        if os.path.isdir("/proc"):
            self.watch = hangwatch.Watch(
                self.proc.pid, options.attempt_dir, options.commands_dir, options.heartbeat_interval,
                options.idle_timeout, options.progress_timeout, self.wakeup.notify, self.log.write,
            ).start()
        if options.health_cmd is not None:
            self.health = HealthCheck(
                options.health_cmd, options.health_interval, options.health_retries,
                attempt_dir=options.attempt_dir, env=env, cwd=cwd, heartbeat=self.heartbeat,
                reaper=self.reaper, log=self.log.write,
            ).start()

    # -- wait --------------------------------------------------------------

    def wait(self) -> None:
        """Until the workload exits, or until --stop-grace after a stop signal (then SIGKILL)."""
        if self.proc is None or self.reaper is None:
            return
        stop: StopSequence | None = None
        while not self.reaper.exited.is_set():
            now = time.monotonic()
            if self.relay.take_checkpoint_request():
                asked = request_checkpoint()
                self.log.write(f"received SIGUSR1: passed on to pids {asked}" if asked
                               else "received SIGUSR1: no process of the workload catches it; not passed on")
            if self.relay.stop_signum is None and self.watch is not None and self.watch.verdict is not None:
                self.end_hung(self.watch.verdict)
                break
            if self.relay.stop_signum is not None and stop is None:
                if self.watch is not None:
                    self.watch.stop()  # a workload being stopped may well sit still: not a hang
                name = outcome.signal_name(self.relay.stop_signum)
                self.log.write(
                    f"received {name}: " + ("a planned stop" if self.relay.planned else "forwarded to the workload")
                    + f", which has {self.options.stop_grace:g}s (--stop-grace) to exit"
                )
                stop = StopSequence(self.relay, self.options.stop_grace, self.path(contract.PROGRESS), self.log.write, now)
            if stop is not None and stop.step(now):
                self.log.write(f"the workload did not exit within {self.options.stop_grace:g}s: SIGKILL")
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                break
            self.wakeup.wait(None if stop is None else stop.next_wake(now))
        # Decided now: a stop that arrives after the workload has ended did not end it.
        self.received_signal = self.relay.stop_signum

    def end_hung(self, verdict: hangwatch.Verdict) -> None:
        """The workload is hung: its stacks into stacks.txt, then SIGKILL (a stopped process dies of it too)."""
        assert self.watch is not None and self.proc is not None
        capture = self.watch.take_stacks(f"{verdict.cause}: {verdict.detail}")
        self.hang = verdict
        self.log.write(f"ending the workload: {verdict.detail}"
                       + (f"; hung in {capture.hung_in}" if capture.hung_in else "; no stack could be taken"))
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    # -- clean up ----------------------------------------------------------

    def clean_up(self) -> None:
        """Kill what is left of the workload's group and every descendant; learn the exit status."""
        if self._cleaned:
            return
        self._cleaned = True
        if self.health is not None:
            self.health.stop()
        if self.watch is not None:
            self.watch.stop()
        hangwatch.forget_dumps(self.options.attempt_dir)
        if self.proc is None or self.reaper is None:
            if self.proc is None:
                guardian.all_clear()  # nothing was started
            return
        reaper = self.reaper
        grace = min(self.options.stop_grace, 5.0)
        left = procs.stop_all(self.proc.pid, reaper.reap_ready, grace, self.log.write)
        if left:
            self.log.write(f"giving up on processes that would not die: {left}")
        else:
            self.relay.detach()
            guardian.all_clear()
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

    def _stop_readers(self) -> None:
        """The progress readers' last look (the workload has exited or is being killed), then no more."""
        readers, self.readers = self.readers, []
        for reader in readers:
            reader.stop()

    # -- report ------------------------------------------------------------

    def decide(self) -> outcome.Outcome:
        """How the attempt ended, and its exit code: what final.json or failure.json will say."""
        self._stop_readers()  # the workload is gone: what it printed last is progress too
        if self.proc is None:
            self.received_signal = self.relay.stop_signum
        killed_by = None
        if self.end is not None and self.end.signal is not None and self.oom is not None:
            killed_by = self.oom.verdict(self.end.signal).record()
        result = outcome.decide(
            killed_by=killed_by,
            probe_failure=self.probe_failure,
            launch_error=self.launch_error,
            launch_node_side=self.launch_node_side,
            end=self.end,
            received_signal=self.received_signal,
            script=self.options.module and f"-m {self.options.module}" or self.script,
            stderr_path=self.path(contract.STDERR),
        )
        if result.cause == contract.CAUSE_WORKLOAD_FAILURE:
            result = self.check_left_out(result)
        if self.hang is not None and self.received_signal is None:
            capture = self.watch.capture if self.watch is not None else None
            result = outcome.hang_outcome(self.hang.cause, self.hang.detail, capture.hung_in if capture else None)
        return result

    def report(self) -> int:
        """Write final.json or failure.json; the wrapper's exit code."""
        result = self.decide()
        now = time.time()
        if result.cause is None:
            self.write(contract.FINAL, outcome.final_record(self.stamp, now, self.read_result()))
        else:
            self.log.write(f"failure ({result.cause}): {result.message}")
            tail = tail_lines(self.path(contract.STDERR), STDERR_TAIL_LINES)
            record = outcome.failure_record(self.stamp, result, self.end, tail, now)
            if self.hang is not None and self.watch is not None and self.watch.capture is not None:
                record["stacks"] = self.watch.capture.record()
            self.write(contract.FAILURE, record)
        return result.exit_code

    def check_left_out(self, result: outcome.Outcome) -> outcome.Outcome:
        """`result`, or the failure on a file the run's snapshot left out (fray.wrapper.left_out)."""
        options = self.options
        if options.home is None or options.code_dir is None or self.cwd is None:
            return result
        missing = left_out.lookup(options.home, options.run_id, options.code_dir, self.cwd,
                                  tail_lines(self.path(contract.STDERR), STDERR_TAIL_LINES))
        if missing is None:
            return result
        return outcome.Outcome(contract.EXIT_WORKLOAD_FAILURE, contract.CAUSE_SNAPSHOT_LEFT_OUT, left_out.message(missing))

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

    def write_exit(self, exit_code: int) -> None:
        """exit.json, the very last record of the attempt."""
        self.write(contract.EXIT, outcome.exit_record(self.stamp, exit_code, self.end, self.received_signal, time.time()))

    def started_record(self) -> dict[str, Any]:
        version = ".".join(str(part) for part in sys.version_info[:3])
        record = outcome.started_record(
            self.stamp, os.getpid(), self.proc.pid if self.proc else None, f"{sys.executable} {version}"
        )
        if self.retry is not None:
            record["retry_args"] = self.retry
        return record


def run_attempt(options: Options, log: DiagnosticLog, heartbeat: Heartbeat, started_at: float) -> int:
    """Everything after the first heartbeat; the wrapper's exit code. Stops `heartbeat` and closes `log`."""
    attempt = Attempt(options, log, heartbeat, started_at)

    def steps() -> int:
        attempt.relay.install()
        log.write(f"run {options.run_id} attempt {options.attempt} on {attempt.stamp.host}, script {options.script}")
        attempt.preflight()
        attempt.launch()
        attempt.write(contract.STARTED, attempt.started_record())
        attempt.wait()
        attempt.clean_up()
        return attempt.report()

    return keep_records(attempt, steps, finish=attempt.clean_up, stop_asked=attempt.stop_asked)


def keep_records(attempt: Attempt, steps: Callable[[], int], finish: Callable[[], None] = lambda: None,
                 stop_asked: Callable[[], None] | None = None) -> int:
    """The record sequence of every attempt, whoever runs its workload (this wrapper, or a function host of the
    local warm worker: fray.warm.function_host); its exit code. From here a write that finds the attempt
    superseded kills the workload and exits (the fence, bound and watched; `stop_asked` when the daemon stopped
    it and no signal came); `steps` run the attempt (started.json, the workload, final.json or failure.json:
    its exit code; an internal error leaves EXIT_WRAPPER_ERROR); then, whatever happened, `finish`, the fence's
    watch and the heartbeat stopped, exit.json, the very last record, the fence released, the log closed."""
    options, log = attempt.options, attempt.log
    exit_code = contract.EXIT_WRAPPER_ERROR
    fence = None
    if options.home is not None:
        bind(Writer(options.home, options.run_id, options.attempt), attempt.fenced)
        fence = Fence(options.home, options.run_id, options.attempt, options.heartbeat_interval, options.fence_grace,
                      attempt.fenced, on_stop_asked=stop_asked).start()
    try:
        exit_code = steps()
    except BaseException:
        log.exception("internal error in the wrapper; cleaning up")
    finally:
        try:
            finish()
        except BaseException:
            log.exception("internal error while cleaning up")
        if fence is not None:
            fence.stop()  # the end below is this attempt's own: the daemon closes it on reading exit.json
        if attempt.heartbeat is not None:
            attempt.heartbeat.stop()
        attempt.write_exit(exit_code)
        if options.home is not None:
            # The end is written: the daemon may close the attempt from now on. What follows is skipped then,
            # not a reason to kill anything or to change the exit code.
            bind(Writer(options.home, options.run_id, options.attempt), None)
        log.write(f"exit {exit_code}")
        log.close()
    return exit_code


def record_end(attempt: Attempt) -> int:
    """For an attempt whose workload ended (`attempt.end`) with nobody left to report it (a function host that
    died: fray.warm.host_pool): final.json or failure.json unless one is there, then exit.json; the exit code."""
    done = os.path.exists(attempt.path(contract.FINAL)) or os.path.exists(attempt.path(contract.FAILURE))
    exit_code = attempt.decide().exit_code if done else attempt.report()
    attempt.write_exit(exit_code)
    return exit_code
