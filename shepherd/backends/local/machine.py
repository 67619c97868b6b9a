"""This machine's CPUs, memory and GPUs as the local backend counts them: config.json's `local` section first,
then what the machine has. Read by the backend (fray.backends.local.backend) and by `fray submit`'s check of
what a run asks (fray.backends.offers), which needs these few lookups, not the backend's process machinery.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Mapping

from fray.core.capacity import Capacity
from fray.state.layout import Home


def local_config(home: Home) -> dict[str, Any]:
    from fray.state.config import load_config

    return load_config(home).get("local", {})


def capacity(config: Mapping[str, Any]) -> Capacity:
    return Capacity(
        cpus=int(config.get("cpus") or cpu_count()),
        mem_mb=int(config.get("mem_mb") or mem_total_mb() or 0) or None,
        gpus=int(config["gpus"]) if "gpus" in config else gpu_count(),
    )


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def mem_total_mb() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return None


def gpu_count() -> int:
    if shutil.which("nvidia-smi") is None:  # no GPU tools: no fork (every `fray submit` counts the GPUs)
        return 0
    import subprocess  # only where nvidia-smi is: a submit on a machine without GPUs loads no subprocess

    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    if listing.returncode != 0:
        return 0
    return sum(1 for line in listing.stdout.splitlines() if line.startswith("GPU "))
