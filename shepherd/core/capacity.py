"""What a machine has (`Capacity`) and what a run holds on one (`Request`, `run_request`) (pure).

The scheduler (fray.core.scheduler) admits requests against a machine's capacity; `fray submit` only
compares the two, to refuse a run that can never fit (fray.core.submit_checks), and so imports these
records alone, not the scheduler's ledger.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Capacity:
    """A machine's CPUs, memory and GPUs."""

    cpus: int
    mem_mb: int | None  # None: memory is not accounted
    gpus: int


@dataclass(frozen=True)
class Request:
    """What a run holds on one machine while it runs."""

    cpus: int
    mem_mb: int | None
    gpus: int
    queueable: bool = False  # may wait in the backend's own queue (a function for the warm worker)


def run_request(cpus: int, mem_mb: int | None, gpus: int, replicas: int = 1, queueable: bool = False) -> Request:
    """What a run holds on one machine: its tasks' resources, for all its replicas side by side."""
    return Request(cpus * replicas, mem_mb * replicas if mem_mb else mem_mb, gpus * replicas,
                   queueable and replicas == 1 and gpus == 0)
