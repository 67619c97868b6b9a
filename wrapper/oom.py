"""Whether the kernel's OOM killer killed the workload: its memory cgroup's own count, read before and after.

    counter = OomCounter.of(pid)   # right after the workload starts: its memory cgroup and its oom_kill count
    counter.verdict()              # after it died of SIGKILL: KilledBy(oom_killer=True/False/None, how=...)

The kernel counts the processes its OOM killer kills in each memory cgroup:
`oom_kill` in `memory.events` (cgroup v2) or in `memory.oom_control`
(cgroup v1, kernels since 4.13). Both are readable without privileges, so a
count that grew while the workload ran says it was the OOM killer (Slurm's
step cgroup, a container's limit, the machine's memory all show here); one
that did not grow says it was not. The kernel log (`dmesg`) would name the
victim too, but most systems restrict it to root (kernel.dmesg_restrict), so
it is not used. Where no counter can be read (no memory controller, a
foreign layout), the answer is None: not known, and said so. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
# What a death by another signal than SIGKILL says by itself (the OOM killer only ever sends SIGKILL).
SIGNAL_WORDS = {
    "SIGSEGV": "a segmentation fault: a crash in native code (an extension, a driver, a bad pointer)",
    "SIGBUS": "a bus error: a crash in native code, or a memory-mapped file that shrank or vanished",
    "SIGABRT": "aborted: abort() in native code (a failed C++ assertion, a fatal library error)",
    "SIGFPE": "an arithmetic fault in native code (an integer division by zero)",
    "SIGILL": "an illegal instruction: native code built for another CPU",
    "SIGTERM": "asked to terminate by something outside fray (a person, a job script, the scheduler)",
    "SIGINT": "interrupted (Ctrl-C, or SIGINT sent by something outside fray)",
    "SIGHUP": "its terminal or session went away (SIGHUP)",
    "SIGPIPE": "it wrote to a pipe or socket nobody reads any more (SIGPIPE)",
}


@dataclass(frozen=True)
class KilledBy:
    """What killed the workload, as far as the kernel says: `oom_killer` None when it cannot tell."""

    signal: str
    oom_killer: bool | None
    how: str  # how that was decided, in words

    def record(self) -> dict[str, object]:
        return {"signal": self.signal, "oom_killer": self.oom_killer, "how": self.how}


@dataclass(frozen=True)
class OomCounter:
    path: Path | None  # the file holding oom_kill; None: none readable
    before: int | None

    @classmethod
    def of(cls, pid: int, root: Path = CGROUP_ROOT) -> "OomCounter":
        for path in candidates(pid, root):
            count = read_count(path)
            if count is not None:
                return cls(path, count)
        return cls(None, None)

    def verdict(self, signal: str) -> KilledBy:
        if signal != "SIGKILL":
            return KilledBy(signal, False, SIGNAL_WORDS.get(signal, "a signal the OOM killer never sends (it sends SIGKILL)"))
        if self.path is None or self.before is None:
            return KilledBy(signal, None, "no memory cgroup counter (memory.events, memory.oom_control) could be "
                                          "read, so whether the OOM killer did it is not known")
        after = read_count(self.path)
        if after is None:
            return KilledBy(signal, None, f"{self.path} could no longer be read")
        if after > self.before:
            return KilledBy(signal, True, f"the kernel's OOM killer: oom_kill in {self.path} went from "
                                          f"{self.before} to {after} while it ran")
        return KilledBy(signal, False, f"not the OOM killer: oom_kill in {self.path} stayed at {after}")


def candidates(pid: int, root: Path = CGROUP_ROOT) -> list[Path]:
    """The files that may hold the oom_kill count of `pid`'s memory cgroup, most specific first."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return []
    found: list[Path] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        relative = path.lstrip("/")
        if controllers == "":  # cgroup v2: the unified hierarchy, at the root or under unified/ (hybrid)
            for base in (root, root / "unified"):
                found += [base / relative / "memory.events", base / "memory.events"]
        elif "memory" in controllers.split(","):
            # A container's cgroup namespace may show the path from the host's root or from its own.
            found += [root / "memory" / relative / "memory.oom_control", root / "memory" / "memory.oom_control"]
    return list(dict.fromkeys(found))


def read_count(path: Path) -> int | None:
    """The `oom_kill N` line of memory.events or memory.oom_control; None when it has none or cannot be read."""
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(" ")
                if key == "oom_kill" and value.strip().isdigit():
                    return int(value)
    except OSError:
        return None
    return None

