"""The hang watch: the workload's processes as /proc shows them, judged while it runs (watch.json).

A thread beside the heartbeat reads the main process's state every TICK_SEC
and the whole tree (fray.wrapper.proctree) every heartbeat interval:

- the main process stopped (`T`, or `t` under a tracer) for STOPPED_AFTER_SEC:
  the attempt is hung at once (`hang_stopped`);
- the whole tree using no CPU (under IDLE_CPU_SHARE of a core) and reporting
  no progress for --idle-timeout: `hang_idle` (0 turns it off);
- a process in uninterruptible sleep (`D`) for STUCK_IO_SEC: not ended for
  that, but watch.json says "stuck in I/O (D state) on <wchan>", which
  `fray status` shows: usually the file system's fault, not the job's.

A verdict wakes the attempt's main thread, which takes the stacks
(fray.wrapper.stacks), kills the workload and reports the hang as the
workload's failure (exit 50, cause hang_*), which the shepherd restarts under
--max-retries as it does a progress stall. A workload told to hold still
(`fray control pause --in-process`) is never judged, nor one being stopped.
With --progress-timeout, the stacks are also taken once the step has not
advanced for nearly that long, so a stall the shepherd ends still says where.

Judging is `Judge` (pure: fed times and samples); `Watch` is the thread. The
thread never raises: what it cannot see it says in watch.json and wrapper.log.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from . import contract, faultsignal, fence, proctree, records, stacks

TICK_SEC = 1.0
STOPPED_AFTER_SEC = 3.0
STUCK_IO_SEC = 30.0
IDLE_CPU_SHARE = 0.01
# Samples this many intervals apart: the wrapper itself was frozen (Slurm's suspend stops every process of the
# job, a VM paused), so what it saw before proves nothing; the workload may be resumed a moment after it.
FROZEN_GAP_INTERVALS = 5
STALL_LEAD_SEC = 5.0  # stacks of a progress stall are taken this long (plus a sample) before the shepherd acts
WATCH = contract.WATCH
STACKS = contract.STACKS
HANG_STOPPED = contract.CAUSE_HANG_STOPPED
HANG_IDLE = contract.CAUSE_HANG_IDLE


class Verdict:
    __slots__ = ("cause", "detail", "stopped")

    def __init__(self, cause: str, detail: str, stopped: bool) -> None:
        self.cause = cause
        self.detail = detail
        self.stopped = stopped


class Judge:
    """Hung or not, from samples stamped with a monotonic time (pure)."""

    def __init__(self, idle_timeout: float, interval: float = TICK_SEC,
                 stopped_after: float = STOPPED_AFTER_SEC) -> None:
        self.idle_timeout = idle_timeout
        self.interval = interval  # of the tree's samples; the main process's are TICK_SEC apart
        self.stopped_after = stopped_after
        self._main_at: float | None = None
        self.stopped_since: float | None = None
        self.idle_since: float | None = None
        self._last: tuple[float, float, frozenset[int], object] | None = None  # at, cpu, pids, progress mark
        self.d_since: dict[int, float] = {}

    def main_state(self, now: float, pid: int, state: str, held: bool) -> Verdict | None:
        frozen = self._main_at is not None and now - self._main_at > FROZEN_GAP_INTERVALS * TICK_SEC
        self._main_at = now
        if state not in ("T", "t") or held or frozen:
            self.stopped_since = None
            return None
        if self.stopped_since is None:
            self.stopped_since = now
        stopped = now - self.stopped_since
        if stopped < self.stopped_after:
            return None
        how = "stopped (state T: SIGSTOP or SIGTSTP)" if state == "T" else "stopped by a tracer (state t)"
        return Verdict(HANG_STOPPED, f"the workload's main process (pid {pid}) was {how} for {stopped:.0f}s", True)

    def tree(self, now: float, procs: dict[int, proctree.Proc], progress_mark: object, held: bool) -> Verdict | None:
        cpu = sum(p.cpu_sec for p in procs.values())
        pids = frozenset(procs)
        last, self._last = self._last, (now, cpu, pids, progress_mark)
        for pid in list(self.d_since):
            if pid not in procs or procs[pid].state != "D":
                del self.d_since[pid]
        for pid, proc in procs.items():
            if proc.state == "D":
                self.d_since.setdefault(pid, now)
        if last is None or held or now - last[0] > FROZEN_GAP_INTERVALS * self.interval:
            self.idle_since = None
            return None
        at, used, before, mark = last
        busy = pids != before or progress_mark != mark or cpu - used > IDLE_CPU_SHARE * (now - at)
        if busy:
            self.idle_since = None
            return None
        if self.idle_since is None:
            self.idle_since = at
        idle = now - self.idle_since
        if not self.idle_timeout or idle < self.idle_timeout:
            return None
        return Verdict(HANG_IDLE, f"the workload's {len(procs)} process{'es' if len(procs) != 1 else ''} used no CPU "
                       f"and reported no progress for {idle:.0f}s (--idle-timeout {self.idle_timeout:g}s)", False)

    def stuck_io(self, now: float) -> list[tuple[int, float]]:
        """(pid, seconds) of the processes in D state for STUCK_IO_SEC or more."""
        return [(pid, now - since) for pid, since in sorted(self.d_since.items()) if now - since >= STUCK_IO_SEC]


def held_still(commands_dir: str | None) -> bool:
    """Whether the last pause or resume command for the run is a pause (`fray control pause --in-process`)."""
    if not commands_dir:
        return False
    try:
        names = os.listdir(commands_dir)
    except OSError:
        return False
    latest: tuple[float, str] | None = None
    for name in names:
        if not name.endswith(contract.COMMAND_SUFFIX) or name.count(".") != 1:
            continue  # receipts (<id>.ack.json) and temp files
        try:
            envelope = records.read_json(os.path.join(commands_dir, name))
        except (OSError, ValueError):
            continue
        if isinstance(envelope, dict) and envelope.get("type") in ("pause", "resume") \
                and isinstance(envelope.get("issued_at"), (int, float)):
            if latest is None or envelope["issued_at"] >= latest[0]:
                latest = (envelope["issued_at"], envelope["type"])
    return latest is not None and latest[1] == "pause"


def forget_dumps(attempt_dir: str) -> None:
    """Remove the file the workload's faulthandler appended to on this node (read into stacks.txt by now)."""
    try:
        os.unlink(faultsignal.dump_path(attempt_dir))
    except OSError:
        pass


class Watch:
    """The thread: samples, judges, writes watch.json when what it says changes; `verdict` once hung."""

    def __init__(self, pid: int, attempt_dir: str, commands_dir: str | None, interval: float, idle_timeout: float,
                 progress_timeout: float, on_hang: Callable[[], None], log: Callable[[str], None]) -> None:
        self.pid = pid
        self.attempt_dir = attempt_dir
        self.commands_dir = commands_dir
        self.interval = interval
        self.progress_timeout = progress_timeout
        self.judge = Judge(idle_timeout, interval)
        self.on_hang = on_hang
        self.log = log
        self.verdict: Verdict | None = None
        self.procs: dict[int, proctree.Proc] = {}
        self.capture: stacks.Capture | None = None
        self._stall_captured_for: object = None
        self._said: dict[str, Any] | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fray-hang-watch", daemon=True)

    def start(self) -> "Watch":
        idle = f"--idle-timeout {self.judge.idle_timeout:g}s" if self.judge.idle_timeout else "no idle check"
        self.log(f"hang watch: main process every {TICK_SEC:g}s (stopped {STOPPED_AFTER_SEC:g}s is a hang), "
                 f"its tree every {self.interval:g}s ({idle})")
        self._thread.start()
        return self

    def stop(self) -> None:
        """No more judging nor records (the attempt is ending, or being stopped); waits for nothing."""
        self._stopping.set()

    def take_stacks(self, reason: str) -> stacks.Capture:
        """Dump the stacks into stacks.txt (the caller kills the workload next)."""
        scan = proctree.tree(self.pid)
        tree = scan.procs if scan is not None else self.procs
        stopped = self.verdict is not None and self.verdict.stopped
        capture = stacks.capture(self.pid, tree, self.attempt_dir, stopped, reason, self.log)
        try:
            records.write_text(os.path.join(self.attempt_dir, STACKS), capture.text)
        except fence.Superseded:
            pass
        except OSError as exc:
            self.log(f"cannot write {STACKS}: {exc}")
        self.capture = capture
        self._report(time.monotonic(), scan.unreadable if scan is not None else None)
        return capture

    def _run(self) -> None:
        # The first look at the whole tree (a scan of /proc) after one tick: a workload done sooner cannot hang,
        # and a short function would wait for that scan at its exit.
        next_tree = time.monotonic() + TICK_SEC
        try:
            while not self._stopping.is_set():
                now = time.monotonic()
                verdict = self._sample_main(now)
                if verdict is None and now >= next_tree:
                    next_tree = now + self.interval
                    verdict = self._sample_tree(now)
                if verdict is not None and not self._stopping.is_set():
                    self.verdict = verdict
                    self.log(f"hang: {verdict.detail}")
                    self.on_hang()
                    return
                self._stopping.wait(TICK_SEC)
        except Exception as exc:  # noqa: BLE001 - the watch is advice: a bug in it must not end a healthy job
            self.log(f"the hang watch stopped on an error ({type(exc).__name__}: {exc}); the workload runs on")

    def _held(self) -> bool:
        return held_still(self.commands_dir)

    def _sample_main(self, now: float) -> Verdict | None:
        main = proctree.read(self.pid)
        if main is None:
            return None  # gone: the reaper tells the main thread
        if main.state in ("T", "t") and self._held():
            return None
        return self.judge.main_state(now, self.pid, main.state, held=False)

    def _sample_tree(self, now: float) -> Verdict | None:
        scan = proctree.tree(self.pid)
        if scan is None:
            self._report(now, None)
            return None
        self.procs = scan.procs
        progress = self._progress()
        mark = (progress or {}).get("updated_at")
        verdict = self.judge.tree(now, scan.procs, mark, self._held())
        self._stall_stacks(progress)
        self._report(now, scan.unreadable)
        return verdict

    def _progress(self) -> dict[str, Any] | None:
        try:
            document = records.read_json(os.path.join(self.attempt_dir, contract.PROGRESS))
        except (OSError, ValueError):
            return None
        return document if isinstance(document, dict) else None

    def _stall_stacks(self, progress: dict[str, Any] | None) -> None:
        """Take the stacks once the step has stood still for nearly --progress-timeout (the shepherd ends it then)."""
        if not self.progress_timeout or not progress or progress.get("step") is None:
            return
        changed = progress.get("step_changed_at") or progress.get("updated_at")
        if not isinstance(changed, (int, float)) or changed == self._stall_captured_for:
            return
        if time.time() - changed >= max(0.0, self.progress_timeout - self.interval - STALL_LEAD_SEC):
            self._stall_captured_for = changed
            self.take_stacks(f"step {progress['step']} has not advanced for {time.time() - changed:.0f}s: "
                             f"a progress stall at --progress-timeout {self.progress_timeout:g}s")

    def _report(self, now: float, unreadable: int | None) -> None:
        """watch.json, when what it says has changed (not every sample: it lives on the shared file system)."""
        stuck = [{"pid": pid, "wchan": proctree.wchan(pid), "for_sec": round(sec)}
                 for pid, sec in self.judge.stuck_io(now)]
        blind = None
        if unreadable is None:
            blind = "/proc cannot be listed here: no process states, no idle check"
        elif unreadable:
            blind = f"{unreadable} processes on this node could not be read in /proc (another user's, or hidden)"
        said = {"stuck_io": [(s["pid"], s["wchan"]) for s in stuck], "blind": blind,
                "stacks": self.capture.record() if self.capture else None}
        if said == self._said:
            return
        self._said = said
        document = {"updated_at": time.time(), "workload_pid": self.pid, "processes": len(self.procs),
                    "stuck_io": stuck, "could_not_see": blind, "stacks": said["stacks"]}
        try:
            records.write_record_json(os.path.join(self.attempt_dir, WATCH), document)
        except fence.Superseded:
            self._stopping.set()
        except (OSError, ValueError) as exc:
            self.log(f"cannot write {WATCH}: {exc}")
