"""The words and numbers a person reads, shared by every front end: durations,
ages, times, numbers, sizes, plurals, status icons, cut text.

Plain strings only: no colour, no terminal, no widget. The CLI styles them
with click (fray.cli.render), the dashboard with rich; both read the same
`3m12s`, `2 CPUs, 1 GPU, memory 32G` and `── attempt 2 on gpu-7 ──`.
(Named `human` rather than `text` so call sites read `human.duration(...)`
and the name never shadows a local `text`.)
"""

from __future__ import annotations

import math
import time
from typing import Any

from fray.core.doctor_rules import CLOCK_WARN_SEC, describe_offset
from fray.core.status import ICONS, Status

ELLIPSIS = "…"
MISSING = "-"


def icon(status: str | None) -> str:
    try:
        return ICONS[Status(status)]
    except ValueError:
        return "?"


def duration(seconds: float | None) -> str:
    """Two significant units: `0.4s`, `45s`, `3m12s`, `2h05m`, `3d04h`."""
    if seconds is None or not math.isfinite(seconds):
        return MISSING
    if seconds < 0:
        return "-" + duration(-seconds)
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"


def age(at: float | None, now: float) -> str:
    """`3m12s ago`."""
    return MISSING if at is None else f"{duration(max(0.0, now - at))} ago"


def timestamp(at: float | None, now: float | None = None) -> str:
    """Local time: `14:03:27` today, `2025-11-20 14:03` otherwise."""
    if at is None:
        return MISSING
    now = time.time() if now is None else now
    local = time.localtime(at)
    if time.strftime("%Y-%m-%d", local) == time.strftime("%Y-%m-%d", time.localtime(now)):
        return time.strftime("%H:%M:%S", local)
    return time.strftime("%Y-%m-%d %H:%M", local)


def number(value: Any) -> str:
    if value is None:
        return MISSING
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def resources(spec: dict[str, Any]) -> str:
    """`2 CPUs, 1 GPU, memory 32G` from a run spec; a TPU run's slice: `v4-32 slice (4 hosts x 4 chips), spot`."""
    if spec.get("tpu"):
        return tpu_slice(spec)
    return f"{plural(spec['cpus'], 'CPU')}, {plural(spec['gpus'], 'GPU')}, memory {size_mb(spec['mem_mb'])}"


def tpu_slice(spec: dict[str, Any]) -> str:
    from fray.core import tpu_topology  # a TPU run's `fray status` only: `fray list` loads no topology

    try:
        found = tpu_topology.shape(spec["tpu"])
        hosts = f" ({plural(found.hosts, 'host')} x {plural(found.chips_per_host, 'chip')})"
    except ValueError:
        hosts = ""  # validated at submit; an old run's unknown type still shows its name
    kind = next((k for k in ("spot", "preemptible", "reserved") if spec.get(k)), "on-demand")
    queued = ", queued" if spec.get("queued") else ""
    return f"{spec['tpu']} slice{hosts}, {kind}{queued}"


def code(spec: dict[str, Any]) -> str:
    """A run's code in one line: its snapshot (where from, hash, files, git commit) or where it runs in place."""
    snapshot = spec.get("code")
    if snapshot is None:
        return f"in place, in {spec.get('workdir', '.')} (--code none)"
    git = snapshot.get("git")
    commit = ""
    if git:
        commit = f", git {(git['commit'] or 'no commit')[:10]}" + (" + uncommitted changes" if git["dirty"] else "")
    return (f"snapshot {snapshot['tree'][:12]} of {snapshot['root']} ({plural(snapshot['files'], 'file')}, "
            f"{snapshot['bytes'] / 1e6:.1f} MB{commit})")


def interpreter(spec: dict[str, Any]) -> str:
    """Which Python runs it: `--python`'s, a venv's or conda env's, the script's #! line."""
    python = spec.get("python")
    env = spec.get("python_env")
    if spec.get("module"):
        return f"{python or 'python3'} -m {spec['module']}"
    if python is None:
        return "the script's #! line (bash for a script without one)"
    return python + (f" (env {env})" if env else "")


def size_mb(mb: int | None) -> str:
    if mb is None:
        return "backend default"
    return f"{mb / 1024:g}G" if mb % 1024 == 0 else f"{mb}M"


def plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count} {word if count == 1 else (many or word + 's')}"


def truncate(text: str, width: int) -> str:
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: max(0, width - 1)] + ELLIPSIS


def separator(attempt: int, node: str | None) -> str:
    """The line between two attempts' output: `── attempt 2 on gpu-7 ──`."""
    where = f" on {node}" if node else ""
    return f"── attempt {attempt}{where} ──"


def clock_offset(seconds: float | None) -> str:
    """A node's clock against the daemon's: `3m00s behind`, `in step`; `-` when not measured."""
    return MISSING if seconds is None else describe_offset(seconds)


def clock_off(seconds: float | None) -> bool:
    """Whether that is worth a warning (the jobs' own timestamps are off by it)."""
    return seconds is not None and abs(seconds) >= CLOCK_WARN_SEC


def gpus(count: Any, gpu_type: str | None) -> str:
    """A node's GPUs: `8 x H100`, or the count alone when the type is unknown."""
    return f"{count} x {gpu_type}" if gpu_type else number(count)


def as_of(daemon: dict[str, Any], now: float) -> str:
    """'; what is shown is as of its last cycle, 3m ago': how old a view is that a stopped daemon left behind."""
    lease = daemon.get("lease")
    if not lease:
        return ""
    return f"; what is shown is as of its last cycle, {duration(now - lease['last_cycle_at'])} ago"


def failing_commands(lease: dict[str, Any] | None, now: float) -> list[str]:
    """`tpu: gcloud failing for 3m (12 calls in a row): <its last stderr line>`, one per tool the daemon saw
    failing every call (daemon.json `failing_commands`)."""
    return [f"{item['backend']}: {item['command']} failing for {duration(max(0.0, now - item['since']))} "
            f"({plural(item['failures'], 'call')} in a row): {item['last_error']}"
            for item in (lease or {}).get("failing_commands") or []]


def edges(after: list[dict[str, Any]] | None) -> str:
    """`⇠ train, eval:any`: the runs a row waits for (--after), '' for none; in `fray list --tree` and the dashboard."""
    if not after:
        return ""
    return "⇠ " + ", ".join(e["name"] + ("" if e["on"] == "ok" else f":{e['on']}") for e in after)
