"""Priority bands and per-user credits: the order pending work is placed in (pure).

Every job names a band (`#FRAY --priority production|interactive|batch`,
default interactive). Bands are strict: all pending production work is placed
before any interactive work, and interactive before batch. Within a band,
work is first in, first out (by submission time, then job id, then task
index), so the same input always gives the same order.

Credits keep one user from holding a high band forever. Each user has a
budget of resource-hours per window (`Credits.budget`); what their runs use
(`usage_hours`: CPU-hours plus GPU-hours weighted by `GPU_WEIGHT`) depletes
it. A user with no credit left is demoted: their production and interactive
work is placed as batch until usage inside the window falls again. Batch work
is never demoted further, and nobody's work is ever refused for lack of credit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Mapping

from fray.errors import UsageError

GPU_WEIGHT = 8.0  # one GPU-hour costs as much as eight CPU-hours


class Band(IntEnum):
    PRODUCTION = 0
    INTERACTIVE = 1
    BATCH = 2

    @property
    def label(self) -> str:
        return self.name.lower()


DEFAULT_BAND = Band.INTERACTIVE


def parse_band(text: str) -> Band:
    try:
        return Band[text.strip().upper()]
    except KeyError:
        choices = ", ".join(b.label for b in Band)
        raise UsageError(f"unknown priority {text!r}: choose one of {choices}") from None


def usage_hours(cpus: int, gpus: int, seconds: float) -> float:
    """What running with `cpus` and `gpus` for `seconds` costs in credits."""
    return (cpus + GPU_WEIGHT * gpus) * max(0.0, seconds) / 3600.0


@dataclass(frozen=True)
class Credits:
    """Each user's budget (resource-hours per window) and what they used in the window.
    budget None: credits are off, every job keeps the band it asked for."""

    budget: float | None = None
    usage: Mapping[str, float] = field(default_factory=dict)

    def remaining(self, user: str) -> float:
        if self.budget is None:
            return float("inf")
        return self.budget - self.usage.get(user, 0.0)


def effective_band(band: Band, remaining_credit: float) -> Band:
    """The band work is placed in: the one asked for, or batch once its user's credit is spent."""
    return Band.BATCH if remaining_credit <= 0 else band

