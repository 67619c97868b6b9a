"""Target: one actor a pool can call, as a resolver found it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class Target:
    """One actor a pool can call: where it listens and what the server knows it by."""

    address: str
    actor: str  # an actor id (ClusterResolver) or a name (FixedResolver)
    actor_id: str | None = None
    run_id: str | None = None
    metadata: Mapping[str, Any] | None = None

    def __str__(self) -> str:
        return f"{self.actor}@{self.address}"
