"""Backends: where attempts run. Each answers the small `Backend` protocol in `base`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shepherd.backends.base import Backend
    from shepherd.layout import Home


def load_backend(name: str, home: "Home") -> "Backend":
    """The backend called `name`, imported only when a run needs it."""
    if name == "local":
        from shepherd.backends.local import LocalBackend

        return LocalBackend(home)
    if name == "slurm":
        from shepherd.backends.slurm import SlurmBackend

        return SlurmBackend(home)
    from shepherd.errors import UsageError

    raise UsageError(f"backend {name!r} is not available in this version of fray (available: local, slurm)")
