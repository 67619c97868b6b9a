"""The `tpu` probe: accelerator device files present, in the expected number, held by nobody.

A TPU VM exposes its chips as /dev/accel* (v2-v4) or /dev/vfio/<n> (v5e and
later). A process left over from a preempted or killed job that still holds
one open makes the next job fail to initialise the TPU: the commonest cause of
a "dead" host. Holders are found by reading every /proc/<pid>/fd link; a
process whose fds we may not read is counted as unknown, not as a holder.
When JAX is importable, a child Python reports how many TPU devices it sees.
The device globs are a parameter (`--tpu-device-glob`) so tests can point
them at plain files.
"""

from __future__ import annotations

import glob
import json
import os

from .. import procs
from .probe import FAILED, PASSED, TIMEOUT, Finding, ProbeContext

PROC = "/proc"
JAX_COUNT = (
    "import json, sys\n"
    "try:\n"
    "    import jax\n"
    "except ImportError as exc:\n"
    "    print(json.dumps({'importable': False, 'detail': str(exc)})); sys.exit(0)\n"
    "try:\n"
    "    count = len(jax.devices('tpu'))\n"
    "except RuntimeError as exc:\n"
    "    print(json.dumps({'importable': True, 'devices': 0, 'detail': str(exc).splitlines()[0][:300]})); sys.exit(0)\n"
    "print(json.dumps({'importable': True, 'devices': count}))\n"
)


def device_files(patterns: tuple[str, ...]) -> list[str]:
    found: set[str] = set()
    for pattern in patterns:
        found.update(glob.glob(pattern))
    return sorted(found)


def holders(paths: list[str], exclude: set[int], proc: str = PROC) -> tuple[dict[str, list[int]], int]:
    """Which processes hold each of `paths` open (by /proc/<pid>/fd), and how many processes we could not read."""
    wanted = {os.path.realpath(p): p for p in paths}
    held: dict[str, list[int]] = {}
    unreadable = 0
    try:
        pids = [int(name) for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return held, 0
    for pid in pids:
        if pid in exclude:
            continue
        fd_dir = os.path.join(proc, str(pid), "fd")
        try:
            fds = os.listdir(fd_dir)
        except PermissionError:
            unreadable += 1
            continue
        except OSError:
            continue  # gone meanwhile
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target in wanted:
                held.setdefault(wanted[target], []).append(pid)
    return held, unreadable


def accelerators(ctx: ProbeContext, deadline: float) -> Finding:
    files = device_files(ctx.tpu_device_globs)
    data: dict[str, object] = {"globs": list(ctx.tpu_device_globs), "devices": files, "expected": ctx.tpu_devices}
    wanted = max(ctx.tpu_devices, 1)
    if len(files) < wanted:
        return Finding(
            FAILED,
            f"{len(files)} accelerator device file(s) match {', '.join(ctx.tpu_device_globs)}; "
            f"expected {ctx.tpu_devices or 'some'}",
            data,
        )
    held, unreadable = holders(files, {os.getpid(), *procs.descendants(os.getpid())})
    data["held"] = {path: pids for path, pids in held.items()}
    data["unreadable_processes"] = unreadable
    if held:
        listed = "; ".join(f"{path} by pid {', '.join(map(str, pids))}" for path, pids in sorted(held.items()))
        return Finding(FAILED, f"accelerator devices held by other processes (stale job? left running): {listed}", data)
    result = ctx.command([ctx.python, "-c", JAX_COUNT], deadline)
    if result.timed_out:
        return Finding(TIMEOUT, f"JAX did not list the TPU devices within {result.seconds:.1f}s", data)
    jax = _last_json(result.stdout)
    data["jax"] = jax if jax is not None else {"error": result.describe()}
    if jax is not None and jax.get("importable") and not jax.get("devices"):
        detail = f"{len(files)} device file(s) present but JAX sees no TPU: {jax.get('detail', '')}"
        return Finding(FAILED, detail, data)
    seen = f"; JAX sees {jax['devices']} TPU devices" if jax and jax.get("importable") else ""
    return Finding(PASSED, f"{len(files)} accelerator device file(s), none held by another process{seen}", data)


def _last_json(stdout: str) -> dict[str, object] | None:
    lines = stdout.strip().splitlines()
    try:
        value = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
