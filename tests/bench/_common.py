"""Shared pieces of the benchmarks: timing a command, and filling a FRAY_HOME with runs."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]
FRAY = str(Path(sys.executable).parent / "fray")  # the console script itself, not a version-manager shim
# `python -c pass` on the VM issue 23's targets were set on: a bench judges a target as written and scaled by
# its own run's floor / this (a slower machine slows a command and its floor alike)
ISSUE_FLOOR_MS = 45.0


def time_command(argv: list[str], env: dict[str, str], repeats: int) -> list[float]:
    """Wall seconds of each of `repeats` runs of `argv` (which must succeed)."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
        samples.append(time.perf_counter() - start)
    return samples


def time_interleaved(commands: dict[str, list[str]], env: dict[str, str], repeats: int) -> dict[str, list[float]]:
    """Wall seconds of each command, run in turn `repeats` times (round robin).

    On a shared VM the speed drifts by tens of percent over seconds; taking the
    commands in turn gives each the same conditions, so a baseline and the command
    it is printed beside stay comparable.
    """
    samples: dict[str, list[float]] = {label: [] for label in commands}
    for _ in range(repeats):
        for label, argv in commands.items():
            samples[label].extend(time_command(argv, env, 1))
    return samples


def time_until(action: Callable[[], None], done: Callable[[], bool], timeout: float = 30.0) -> float:
    start = time.perf_counter()
    action()
    while not done():
        if time.perf_counter() - start > timeout:
            raise TimeoutError("the benchmarked condition never came true")
        time.sleep(0.002)
    return time.perf_counter() - start


def report(label: str, samples: list[float], target_ms: float | None = None) -> float:
    median = statistics.median(samples) * 1000
    spread = f"min {min(samples) * 1000:.1f} / max {max(samples) * 1000:.1f} ms over {len(samples)} runs"
    verdict = "" if target_ms is None else (f"  [target <= {target_ms:.0f} ms: " + ("met]" if median <= target_ms else "MISSED]"))
    print(f"{label:<52} median {median:7.1f} ms  ({spread}){verdict}")
    return median


def env_for(home: Path) -> dict[str, str]:
    """The environment of a user's shell: bytecode caching on, as after a normal pip install."""
    env = {**os.environ, "FRAY_HOME": str(home), "NO_COLOR": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def warm_up(argv: list[str], env: dict[str, str]) -> None:
    """One untimed run, so .pyc files exist as they do after `pip install`."""
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
