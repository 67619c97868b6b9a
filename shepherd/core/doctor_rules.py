"""What `fray doctor` concludes from what it measured: one finding per check, with the fix (pure).

Each check of the cluster as fray needs it (fray.ops.doctor measures) becomes a
`Finding`: ok, warn or fail, the measurement in a line, and what to do. The
thresholds are fray's stated guarantees (docs/state.md, "Many hosts"): the
daemon's lease timeout must exceed how late an opened file shows its last
write, the tolerance for late files must exceed how late a node's file reaches
a login host, and clocks may disagree (fray does not compare them) but a job's
own timestamps are only as good as its node's clock.
"""

from __future__ import annotations

from typing import Any, NamedTuple

CLOCK_WARN_SEC = 5.0  # a node's clock this far off the daemon's is said (`fray nodes`, `fray status`, doctor)

# Per kind of file system: what fray can rely on there, and the mount options that change it.
KINDS: dict[str, str] = {
    "nfs": "NFS: renames, O_EXCL and link() are atomic at the server; an opened file is current (close-to-open) "
           "unless mounted nocto; a new file may appear late (acdirmax, lookupcache=all: up to 60 s)",
    "lustre": "Lustre: coherent for data and names; flock only with -o flock (node-local with -o localflock, "
              "ENOSYS without either)",
    "gpfs": "GPFS (Spectrum Scale): coherent for data and names, flock coherent",
    "beegfs": "BeeGFS: coherent for data and names by default; flock node-local unless tuneUseGlobalFileLocks",
    "gcsfuse": "gcsfuse (Cloud Storage): no hard links (fray writes versions instead: FRAY_RECORDS=write-once), "
               "stat and listing caches (metadata TTL, 60 s by default), no flock",
    "fuse": "a FUSE file system: flock node-local at best; caches as its options say",
    "local": "a local file system: fine for one machine; compute nodes of a cluster cannot see it",
    "other": "a file system fray has no notes on: `fray doctor` measures what it can",
}


class Finding(NamedTuple):
    check: str  # "file system", "atomic operations", "locks", "daemon", "round trip", "clocks", "nodes' python"
    status: str  # "ok" | "warn" | "fail" | "info"
    summary: str
    fix: str | None = None


def kind_of(fstype: str) -> str:
    """The family of a mount's type as /proc/mounts names it."""
    if fstype.startswith("nfs"):
        return "nfs"
    if fstype in ("lustre", "gpfs", "beegfs"):
        return fstype
    if fstype in ("fuse.gcsfuse", "fuse.gcsfuse-v2"):
        return "gcsfuse"
    if fstype.startswith("fuse"):
        return "fuse"
    if fstype in ("ext4", "ext3", "xfs", "btrfs", "zfs", "tmpfs", "overlay", "f2fs"):
        return "local"
    return "other"


def file_system(fstype: str, source: str, options: list[str], backend: str) -> Finding:
    kind = kind_of(fstype)
    summary = f"{fstype} ({source}): {KINDS[kind]}"
    if kind == "local" and backend != "local":  # only nodes of this very machine see it: the round trip tells
        return Finding("file system", "warn", summary, f"put FRAY_HOME on a folder the {backend} nodes share "
                                                       "(--home DIR or FRAY_HOME=DIR)")
    if kind == "nfs" and "nocto" in options:
        return Finding("file system", "warn", summary + "; mounted nocto: an opened file may be stale",
                       "mount without nocto, or raise daemon.lease_timeout_sec past acregmax")
    return Finding("file system", "ok", summary)


def atomic_operations(failed: dict[str, str]) -> Finding:
    if not failed:
        return Finding("atomic operations", "ok", "rename over a file, O_EXCL create and link() all work")
    if set(failed) == {"link"}:
        return Finding("atomic operations", "warn", f"no hard links here ({failed['link']})",
                       "set FRAY_RECORDS=write-once for jobs on this file system (records written as versions)")
    what = ", ".join(f"{op}: {why}" for op, why in sorted(failed.items()))
    return Finding("atomic operations", "fail", what, "fray needs atomic rename and O_EXCL create on FRAY_HOME")


def locks(works_here: str, other_host: str | None, coherent: bool | None) -> Finding:
    """`works_here`: "yes", or why flock failed; `coherent`: whether a doctor on `other_host` excluded this one."""
    note = "fray does not need it: its shared files use lock files created exclusively, its daemon a lease"
    if works_here != "yes":
        return Finding("locks", "info", f"flock does not work on FRAY_HOME ({works_here}); {note}")
    if other_host is None:
        return Finding("locks", "info", "flock works on this host; whether across hosts is unknown (run "
                                        "`fray doctor` on another login host at the same time to find out); " + note)
    if coherent:
        return Finding("locks", "info", f"flock is coherent with {other_host}; {note}")
    return Finding("locks", "info", f"flock is node-local: this host took the lock {other_host} held; {note}")


def daemon(state: str, detail: str, lease_timeout: float, worst_round_trip: float | None) -> Finding:
    if state != "running":
        return Finding("daemon", "warn", f"{state}: {detail}", "fray daemon start (on each login host)")
    if worst_round_trip is not None and lease_timeout <= 2 * worst_round_trip:
        return Finding("daemon", "warn", f"{detail}; its lease times out after {lease_timeout:.0f}s, less than "
                                         f"twice the slowest round trip ({worst_round_trip:.1f}s)",
                       f"set daemon.lease_timeout_sec in config.json to {max(15.0, 4 * worst_round_trip):.0f}")
    return Finding("daemon", "ok", detail)


def round_trip(rounds: list[float], file_latency: float, backend: str) -> Finding:
    """`rounds`: seconds from a file written here to the node's answer seen here, per round."""
    if not rounds:
        return Finding("round trip", "fail", f"the probe job on {backend} never answered",
                       "check `fray status` of the doctor's run and that the nodes mount FRAY_HOME at the same path")
    best, worst = min(rounds), max(rounds)
    summary = f"a file written here was answered by the node in {best:.2f}s at best, {worst:.2f}s at worst"
    if worst >= file_latency:
        return Finding("round trip", "warn", summary + f"; the daemon waits {file_latency:.0f}s for a late file",
                       f"set daemon.file_latency_sec in config.json to {max(30.0, 3 * worst):.0f}")
    return Finding("round trip", "ok", summary + f" (the daemon waits up to {file_latency:.0f}s for a late file)")


def clocks(offsets: dict[str, float]) -> Finding:
    """Each node's clock minus this host's (measured by the probe, or by the daemon from heartbeats)."""
    if not offsets:
        return Finding("clocks", "info", "no node's clock measured yet")
    off = {node: s for node, s in offsets.items() if abs(s) >= CLOCK_WARN_SEC}
    listed = ", ".join(f"{node} {describe_offset(s)}" for node, s in sorted(offsets.items()))
    if off:
        return Finding("clocks", "warn", f"{listed}: fray judges liveness on the daemon's own clock, so nothing "
                                         "restarts, but the jobs' own timestamps are off", "fix NTP on " +
                       ", ".join(sorted(off)))
    return Finding("clocks", "ok", listed)


def node_python(report: dict[str, Any] | None) -> Finding:
    if report is None:
        return Finding("nodes' python", "fail", "the probe job did not report")
    summary = f"{report['host']}: {report['executable']} (Python {report['python']})"
    if not report.get("report_importable"):
        return Finding("nodes' python", "fail", summary + "; `from fray import report` failed there: "
                                                         f"{report.get('report_error')}",
                       "check that the nodes see FRAY_HOME and this fray's files at the same paths")
    return Finding("nodes' python", "ok", summary + "; `from fray import report` works there")


def describe_offset(seconds: float) -> str:
    """'+3m00s ahead', '-2.1s behind', 'in step'."""
    if abs(seconds) < 0.5:
        return "in step"
    size = f"{abs(seconds):.1f}s" if abs(seconds) < 60 else f"{int(abs(seconds)) // 60}m{int(abs(seconds)) % 60:02d}s"
    return f"{size} {'ahead' if seconds > 0 else 'behind'}"


def verdict(findings: list[Finding]) -> str:
    statuses = {f.status for f in findings}
    return "fail" if "fail" in statuses else "warn" if "warn" in statuses else "ok"
