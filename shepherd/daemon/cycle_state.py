"""What the daemon keeps between and within cycles: each run as last read, and a cycle's counts."""

from __future__ import annotations

from dataclasses import dataclass, field

from fray.core.model import Control, Meta
from fray.state.layout import RunPaths
from fray.state.row_cache import StatKey


@dataclass
class RunState:
    paths: RunPaths
    meta: Meta | None
    control: Control
    problem: str | None = None
    meta_key: StatKey | None = None  # the stat of the files `meta` and `control` were read from
    control_key: StatKey | None = None


@dataclass
class CycleStats:
    runs: int = 0
    active: int = 0
    submitted: int = 0
    cancelled: int = 0
    errors: list[str] = field(default_factory=list)
