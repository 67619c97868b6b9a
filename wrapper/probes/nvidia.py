"""Pure parsers for what `nvidia-smi` prints, and CUDA's reading of CUDA_VISIBLE_DEVICES.

    nvidia-smi -L
        GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5e7f1c3a-...)
          MIG 3g.40gb     Device  0: (UUID: MIG-c6d3e0f1-...)
    nvidia-smi --query-compute-apps=pid,process_name,gpu_uuid,used_memory --format=csv,noheader,nounits
        4242, /usr/bin/python3, GPU-5e7f1c3a-..., 1024

Older drivers (R450/R460) name MIG devices `MIG-GPU-<gpu uuid>/<gi>/<ci>`
in both places; either form is read. No IO here: the probes in `fray.wrapper.probes.gpu` run the
commands and hand their text to these functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional, Tuple

QUERY_COMPUTE_APPS = ("--query-compute-apps=pid,process_name,gpu_uuid,used_memory", "--format=csv,noheader,nounits")

_GPU_LINE = re.compile(r"^GPU (?P<index>\d+): (?P<name>.*) \(UUID: (?P<uuid>GPU-[^)\s]+)\)$")
_MIG_LINE = re.compile(r"^MIG (?P<profile>\S+)\s+Device\s+(?P<index>\d+): \(UUID: (?P<uuid>MIG-[^)\s]+)\)$")


@dataclass(frozen=True)
class MigDevice:
    index: int  # "Device N" within its GPU
    profile: str  # "3g.40gb"
    uuid: str


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    uuid: str
    migs: tuple[MigDevice, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "index": self.index,
            "name": self.name,
            "uuid": self.uuid,
            "mig": [{"index": m.index, "profile": m.profile, "uuid": m.uuid} for m in self.migs],
        }


@dataclass(frozen=True)
class GpuList:
    gpus: tuple[Gpu, ...]
    unrecognized: tuple[str, ...] = ()  # lines that are neither a GPU nor a MIG device

    @property
    def device_count(self) -> int:
        """Devices CUDA can be given: a MIG-enabled GPU counts as its MIG devices."""
        return sum(len(gpu.migs) or 1 for gpu in self.gpus)


def parse_gpu_list(text: str) -> GpuList:
    """The GPUs and MIG devices of `nvidia-smi -L`."""
    gpus: list[Gpu] = []
    unrecognized: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        gpu = _GPU_LINE.match(line)
        if gpu:
            gpus.append(Gpu(int(gpu["index"]), gpu["name"], gpu["uuid"]))
            continue
        mig = _MIG_LINE.match(line)
        if mig and gpus:
            device = MigDevice(int(mig["index"]), mig["profile"], mig["uuid"])
            last = gpus[-1]
            gpus[-1] = Gpu(last.index, last.name, last.uuid, (*last.migs, device))
            continue
        unrecognized.append(line)
    return GpuList(tuple(gpus), tuple(unrecognized))


@dataclass(frozen=True)
class ComputeApp:
    pid: int
    name: str
    gpu_uuid: str
    used_mib: int | None  # None when nvidia-smi says [N/A] (MIG, or not permitted to see)


def parse_compute_apps(text: str) -> tuple[list[ComputeApp], list[str]]:
    """Processes of `--query-compute-apps=pid,process_name,gpu_uuid,used_memory` (csv, noheader, nounits).

    Returns them and the lines that could not be read. A process name may
    itself contain ", ", so the fields are taken from both ends.
    """
    apps: list[ComputeApp] = []
    unreadable: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 4 or not fields[0].isdigit() or not fields[-2].startswith("GPU-"):
            unreadable.append(line)
            continue
        memory = fields[-1]
        apps.append(
            ComputeApp(
                pid=int(fields[0]),
                name=", ".join(fields[1:-2]),
                gpu_uuid=fields[-2],
                used_mib=int(memory) if memory.isdigit() else None,
            )
        )
    return apps, unreadable


@dataclass(frozen=True)
class VisibleDevice:
    entry: str  # as written in CUDA_VISIBLE_DEVICES
    gpu: Gpu  # the physical GPU
    mig: MigDevice | None = None  # set when the entry names a MIG device

    def as_dict(self) -> dict[str, object]:
        return {
            "entry": self.entry,
            "gpu_index": self.gpu.index,
            "gpu_uuid": self.gpu.uuid,
            "mig_uuid": self.mig.uuid if self.mig else None,
        }


@dataclass
class Visibility:
    """What CUDA would see, and every way CUDA_VISIBLE_DEVICES disagrees with the node."""

    devices: list[VisibleDevice] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


Device = Tuple[Gpu, Optional["MigDevice"]]  # a GPU used whole, or one of its MIG devices (typing's: Python 3.8)


def _by_prefix(entry: str, candidates: dict[str, Device]) -> list[Device]:
    # CUDA accepts any unique prefix of a UUID ("GPU-5e7f1c3a").
    exact = candidates.get(entry)
    if exact is not None:
        return [exact]
    return [found for uuid, found in candidates.items() if uuid.startswith(entry)]


def visible_devices(cuda_visible_devices: str | None, listing: GpuList) -> Visibility:
    """Resolve CUDA_VISIBLE_DEVICES (indices, GPU UUIDs, MIG UUIDs) against `nvidia-smi -L`.

    Unset means every GPU (a MIG-enabled one as its MIG devices). A container
    or a scheduler that exposes other devices than it claims shows up here as
    an entry that names nothing, a whole GPU that is in MIG mode, or a device
    named twice.
    """
    seen = Visibility()
    if cuda_visible_devices is None:
        for gpu in listing.gpus:
            if gpu.migs:
                seen.devices.extend(VisibleDevice(m.uuid, gpu, m) for m in gpu.migs)
            else:
                seen.devices.append(VisibleDevice(str(gpu.index), gpu))
        return seen
    by_index: dict[str, list[Device]] = {str(gpu.index): [(gpu, None)] for gpu in listing.gpus}
    gpu_uuids: dict[str, Device] = {gpu.uuid: (gpu, None) for gpu in listing.gpus}
    mig_uuids: dict[str, Device] = {mig.uuid: (gpu, mig) for gpu in listing.gpus for mig in gpu.migs}
    used: set[tuple[str, str | None]] = set()
    for entry in (e.strip() for e in cuda_visible_devices.split(",")):
        if not entry:
            continue
        matches: list[Device]
        if entry.isdigit():
            matches = by_index.get(str(int(entry)), [])
            if not matches:
                seen.problems.append(
                    f"CUDA_VISIBLE_DEVICES entry {entry!r}: nvidia-smi shows no GPU {entry} "
                    f"(it shows {len(listing.gpus)} GPU{'s' if len(listing.gpus) != 1 else ''})"
                )
                continue
        elif entry.startswith("MIG-"):
            matches = _by_prefix(entry, mig_uuids)
        elif entry.startswith("GPU-"):
            matches = _by_prefix(entry, gpu_uuids)
        else:
            seen.problems.append(f"CUDA_VISIBLE_DEVICES entry {entry!r} is neither a GPU index nor a GPU or MIG UUID")
            continue
        if len(matches) != 1:
            what = "no device nvidia-smi shows" if not matches else f"{len(matches)} devices (give more of the UUID)"
            seen.problems.append(f"CUDA_VISIBLE_DEVICES entry {entry!r} names {what}")
            continue
        gpu, mig = matches[0]
        if mig is None and gpu.migs:
            seen.problems.append(
                f"CUDA_VISIBLE_DEVICES entry {entry!r} names GPU {gpu.index}, which is in MIG mode: "
                f"CUDA cannot use it whole; name one of its MIG devices ({gpu.migs[0].uuid}, ...)"
            )
            continue
        key = (gpu.uuid, mig.uuid if mig else None)
        if key in used:
            seen.problems.append(f"CUDA_VISIBLE_DEVICES names {mig.uuid if mig else f'GPU {gpu.index}'} twice")
            continue
        used.add(key)
        seen.devices.append(VisibleDevice(entry, gpu, mig))
    return seen
