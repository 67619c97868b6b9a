"""The wrapper options every backend passes from a run's spec (`python -m wrapper run ...`).

Resources and preflight probes, the health command, the runtime commands
folder: what the wrapper on the node needs to probe the node before the
workload starts and to watch it while it runs. Options left at the wrapper's
defaults are not spelled out, so a command line stays readable in `ps`.
"""

from __future__ import annotations

from pathlib import Path

from shepherd.model import RunSpec
from wrapper import contract


def probe_and_health(spec: RunSpec, commands_dir: Path) -> list[str]:
    """`--gpus N --probes ... --health-cmd ...` for this spec (each option followed by one value)."""
    args = ["--commands-dir", str(commands_dir), "--gpus", str(spec.gpus)]
    if spec.probes is not None:
        args += ["--probes", ",".join(spec.probes) or "none"]
    if spec.skip_probes:
        args += ["--skip-probes", ",".join(spec.skip_probes)]
    if spec.probe_timeout_sec != contract.DEFAULT_PROBE_TIMEOUT_SEC:
        args += ["--probe-timeout", repr(spec.probe_timeout_sec)]
    if spec.min_free_disk_mb != contract.DEFAULT_MIN_FREE_DISK_MB:
        args += ["--min-free-disk", str(spec.min_free_disk_mb)]
    if spec.health_cmd is not None:
        args += ["--health-cmd", spec.health_cmd, "--health-interval", repr(spec.health_interval_sec),
                 "--health-retries", str(spec.health_retries)]
    return args
