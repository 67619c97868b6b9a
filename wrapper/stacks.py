"""The workload's Python stacks, taken before an attempt is ended for a hang or a stall: attempts/N/stacks.txt.

For each Python process of the workload (its main process first, at most
MAX_TARGETS), in this order:

1. `py-spy dump --pid P` when py-spy is on PATH (`pip install 'fray[debug]'`);
2. else, or when py-spy fails (no ptrace in a container, an interpreter it does
   not know), fray's faulthandler signal (fray.wrapper.faultsignal), when the
   process armed it by importing fray;
3. else a line saying why neither could be had.

A stopped process cannot run its faulthandler: it is sent the signal, then
SIGCONT, and the caller kills it right after. `hung_in` is the innermost frame
of the main thread of the first process dumped: "worker, train.py:12".
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable

from . import faultsignal, procs, proctree

MAX_TARGETS = 4
PYSPY_TIMEOUT_SEC = 10.0
FAULTHANDLER_WAIT_SEC = 3.0
QUIET_SEC = 0.2  # a faulthandler dump is written in one go: this long without growth means it is done
STOPPED_QUIET_SEC = 0.05  # the same for a process continued only to be dumped, so that it runs no longer than that
_PYSPY_FRAME = re.compile(r"^\s+(?P<func>\S.*?) \((?P<file>.+):(?P<line>\d+)\)\s*$")
_FAULT_FRAME = re.compile(r'^\s+File "(?P<file>.+)", line (?P<line>\d+) in (?P<func>.+?)\s*$')


class Capture:
    """What was captured: the text for stacks.txt, how, and the innermost frame of the main thread."""

    __slots__ = ("text", "by", "hung_in", "notes")

    def __init__(self, text: str, by: str | None, hung_in: str | None, notes: list[str]) -> None:
        self.text = text
        self.by = by  # "py-spy", "faulthandler", or None: nothing could be had
        self.hung_in = hung_in
        self.notes = notes

    def record(self) -> dict[str, object]:
        return {"by": self.by, "hung_in": self.hung_in, "notes": self.notes}


def targets(root: int, tree: dict[int, proctree.Proc]) -> list[int]:
    """The Python processes to dump: the main one when it is Python, then the others by age (pid)."""
    found = [pid for pid in sorted(tree, key=lambda p: (p != root, p)) if proctree.is_python(pid, tree[pid].comm)]
    return found[:MAX_TARGETS]


def capture(root: int, tree: dict[int, proctree.Proc], attempt_dir: str, stopped: bool, reason: str,
            log: Callable[[str], None]) -> Capture:
    """Dump the stacks of the workload's Python processes; never raises."""
    pids = targets(root, tree)
    notes: list[str] = []
    sections: list[str] = []
    by: str | None = None
    hung_in: str | None = None
    if not pids:
        notes.append(f"no Python process in the workload's tree ({len(tree)} processes): no stacks to take")
    pyspy = shutil.which("py-spy")
    if pyspy is None and pids:
        notes.append("py-spy is not on PATH (pip install 'fray[debug]' on the node to use it)")
    for pid in pids:
        text, how = _one(pid, pyspy, attempt_dir, stopped, notes)
        if text is None:
            continue
        by = by or how
        sections.append(f"--- pid {pid} ({tree[pid].comm}), by {how} ---\n{text.rstrip()}\n")
        if hung_in is None:
            hung_in = innermost(text, how)
    header = [f"# fray: stacks of the workload's Python processes, taken at {time.strftime('%Y-%m-%d %H:%M:%S')} "
              f"before ending the attempt ({reason})"]
    if hung_in:
        header.append(f"# hung in {hung_in}")
    header += [f"# {note}" for note in notes]
    for note in notes:
        log(f"stacks: {note}")
    return Capture("\n".join(header) + "\n\n" + "\n".join(sections), by, hung_in, notes)


def _one(pid: int, pyspy: str | None, attempt_dir: str, stopped: bool, notes: list[str]) -> tuple[str | None, str]:
    if pyspy is not None:
        text, error = _pyspy(pyspy, pid)
        if text is not None and _thread_blocks(text, "Thread "):
            return text, "py-spy"
        # Seen with a stopped process: exit 0, the header, and no thread at all.
        error = error or "it found no Python thread"
        notes.append(f"py-spy could not dump pid {pid}: {error}")
    text, error = _faulthandler(pid, attempt_dir, stopped)
    if text is None:
        notes.append(f"no faulthandler dump of pid {pid}: {error}")
    return text, "faulthandler"


def _pyspy(pyspy: str, pid: int) -> tuple[str | None, str]:
    try:
        done = subprocess.run([pyspy, "dump", "--pid", str(pid)], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=PYSPY_TIMEOUT_SEC, check=False)
    except subprocess.TimeoutExpired:
        return None, f"no answer in {PYSPY_TIMEOUT_SEC:g}s"
    except OSError as exc:
        return None, str(exc)
    if done.returncode == 0 and done.stdout.strip():
        return done.stdout.decode("utf-8", errors="replace"), ""
    lines = [line for line in done.stderr.decode("utf-8", errors="replace").splitlines() if line.strip()]
    error = next((line for line in lines if line.startswith("Error")), lines[0] if lines else "")
    return None, f"exit {done.returncode}: {error.strip()[:200] or 'no message'}"


def _faulthandler(pid: int, attempt_dir: str, stopped: bool) -> tuple[str | None, str]:
    signum = faultsignal.stack_signal()
    if signum is None:
        return None, "this platform has no real-time signals"
    if not procs.catches(pid, signum):
        # Unhandled, a real-time signal would kill it: never sent to a process that did not arm it.
        return None, "it did not arm fray's faulthandler (it never ran `import fray`)"
    try:
        path = faultsignal.dump_path(attempt_dir)
    except OSError as exc:
        return None, f"no private folder for the dump on this node: {exc}"
    before = _size(path)
    try:
        os.kill(pid, signum)
        if stopped:
            os.kill(pid, signal.SIGCONT)  # the handler runs once it is continued; it is killed right after
    except (ProcessLookupError, PermissionError) as exc:
        return None, f"cannot signal it: {exc.strerror or exc}"
    deadline = time.monotonic() + FAULTHANDLER_WAIT_SEC
    last, last_change = before, time.monotonic()
    # A continued process runs its own code again once the dump is written: stop it again at once.
    quiet = STOPPED_QUIET_SEC if stopped else QUIET_SEC
    while time.monotonic() < deadline:
        size = _size(path)
        if size != last:
            last, last_change = size, time.monotonic()
        elif size > before and time.monotonic() - last_change >= quiet:
            break
        time.sleep(0.01)
    if stopped:
        try:
            os.kill(pid, signal.SIGSTOP)
        except (ProcessLookupError, PermissionError):
            pass
    if last <= before:
        return None, f"nothing written to {path} within {FAULTHANDLER_WAIT_SEC:g}s"
    try:
        with open(path, "rb") as handle:
            handle.seek(before)
            return handle.read(last - before).decode("utf-8", errors="replace"), ""
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror or exc}"


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def innermost(text: str, how: str) -> str | None:
    """'function, file.py:123': the innermost frame of the main thread in a py-spy or faulthandler dump (pure).

    py-spy names the main thread ("MainThread") and lists a thread's frames innermost first; faulthandler
    lists the threads newest first, so the main thread is the last block, also innermost first.
    """
    blocks = _thread_blocks(text, "Thread " if how == "py-spy" else ("Thread ", "Current thread "))
    if not blocks:
        return None
    if how == "py-spy":
        main = next((b for b in blocks if '"MainThread"' in b[0]), blocks[0])
        pattern = _PYSPY_FRAME
    else:
        main = blocks[-1]
        pattern = _FAULT_FRAME
    for line in main[1:]:
        match = pattern.match(line)
        if match:
            return f"{match['func']}, {os.path.basename(match['file'])}:{match['line']}"
    return None


def _thread_blocks(text: str, starts: str | tuple[str, ...]) -> list[list[str]]:
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith(starts):
            blocks.append([line])
        elif blocks and line.strip():
            blocks[-1].append(line)
    return blocks
