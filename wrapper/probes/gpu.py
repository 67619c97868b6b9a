"""The GPU probes: visibility, MIG/container mismatch, trespassers.

- `gpu`: `nvidia-smi -L` answers and shows at least the GPUs the run asked
  for (a MIG-enabled GPU counts as its MIG devices). A failing or hung
  nvidia-smi means a broken driver: a node fault.
- `mig`: CUDA_VISIBLE_DEVICES, as the scheduler or container set it, names
  devices that nvidia-smi shows, none twice, no MIG-mode GPU whole, and at
  least as many as the run asked for.
- `trespassers`: no process of anyone else computes on the GPUs we were
  given. They are reported (pid, name, memory), never killed. Processes on
  the parent GPU of a MIG device we were given cannot be placed in an
  instance by `--query-compute-apps`, so they are listed but not counted.
"""

from __future__ import annotations

import os

from .. import procs
from . import nvidia
from .probe import FAILED, PASSED, TIMEOUT, Finding, ProbeContext


def _listing(ctx: ProbeContext, deadline: float) -> nvidia.GpuList | Finding:
    """The parsed `nvidia-smi -L`, or the finding that it failed or hung."""
    result = ctx.gpu_listing(deadline)
    if result.timed_out:
        return Finding(TIMEOUT, result.describe())
    if not result.ok:
        return Finding(FAILED, result.describe(), {"exit_code": result.exit_code})
    return nvidia.parse_gpu_list(result.stdout)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def visibility(ctx: ProbeContext, deadline: float) -> Finding:
    listing = _listing(ctx, deadline)
    if isinstance(listing, Finding):
        return listing
    data = {"gpus": [gpu.as_dict() for gpu in listing.gpus], "devices": listing.device_count, "requested": ctx.gpus}
    if listing.unrecognized:
        data["unrecognized"] = list(listing.unrecognized)
    wanted = max(ctx.gpus, 1)  # asked for explicitly with --probes gpu on a CPU run: at least one
    if listing.device_count < wanted:
        return Finding(
            FAILED,
            f"nvidia-smi -L shows {_plural(listing.device_count, 'GPU device')}; "
            f"the run asked for {ctx.gpus or 'some'}",
            data,
        )
    return Finding(PASSED, f"nvidia-smi -L shows {_plural(listing.device_count, 'GPU device')}", data)


def mig_match(ctx: ProbeContext, deadline: float) -> Finding:
    listing = _listing(ctx, deadline)
    if isinstance(listing, Finding):
        return listing
    declared = ctx.env.get("CUDA_VISIBLE_DEVICES")
    seen = nvidia.visible_devices(declared, listing)
    data = {
        "cuda_visible_devices": declared,
        "visible": [device.as_dict() for device in seen.devices],
        "problems": seen.problems,
    }
    if not seen.problems and len(seen.devices) < ctx.gpus:
        seen.problems.append(
            f"CUDA_VISIBLE_DEVICES={declared!r} gives CUDA {_plural(len(seen.devices), 'device')}; "
            f"the run asked for {ctx.gpus}"
        )
    if seen.problems:
        return Finding(FAILED, "; ".join(seen.problems), data)
    shown = "unset: every GPU" if declared is None else repr(declared)
    matched = f"CUDA_VISIBLE_DEVICES {shown} matches nvidia-smi ({_plural(len(seen.devices), 'device')})"
    return Finding(PASSED, matched, data)


def trespassers(ctx: ProbeContext, deadline: float) -> Finding:
    listing = _listing(ctx, deadline)
    if isinstance(listing, Finding):
        return listing
    seen = nvidia.visible_devices(ctx.env.get("CUDA_VISIBLE_DEVICES"), listing)
    whole = {d.gpu.uuid: d.gpu for d in seen.devices if d.mig is None}
    shared = {d.gpu.uuid: d.gpu for d in seen.devices if d.mig is not None}
    result = ctx.command(["nvidia-smi", *nvidia.QUERY_COMPUTE_APPS], deadline)
    if result.timed_out:
        return Finding(TIMEOUT, result.describe())
    if not result.ok:
        return Finding(FAILED, result.describe(), {"exit_code": result.exit_code})
    apps, unreadable = nvidia.parse_compute_apps(result.stdout)
    ours = {os.getpid(), *procs.descendants(os.getpid())}
    foreign = [a for a in apps if a.gpu_uuid in whole and a.pid not in ours]
    beside_mig = [a for a in apps if a.gpu_uuid in shared and a.pid not in ours]
    data = {
        "gpus": sorted(whole),
        "foreign": [_app(a) for a in foreign],
        "on_parent_of_mig_devices": [_app(a) for a in beside_mig],
    }
    if unreadable:
        data["unreadable"] = unreadable
    if foreign:
        listed = "; ".join(
            f"pid {a.pid} ({a.name}) on GPU {whole[a.gpu_uuid].index}"
            + (f" using {a.used_mib} MiB" if a.used_mib is not None else "")
            for a in foreign
        )
        return Finding(FAILED, f"{_plural(len(foreign), 'foreign process')} on our GPUs (left running): {listed}", data)
    return Finding(PASSED, f"no foreign processes on {_plural(len(whole), 'GPU')}", data)


def _app(app: nvidia.ComputeApp) -> dict[str, object]:
    return {"pid": app.pid, "name": app.name, "gpu_uuid": app.gpu_uuid, "used_mib": app.used_mib}
