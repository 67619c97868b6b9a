"""Backends: where attempts run. Each answers the small `Backend` protocol in `base`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from fray.backends.base import Backend
    from fray.state.layout import Home


def load_backend(name: str, home: "Home", on_attempt_exit: Callable[[], None] | None = None) -> "Backend":
    """The backend called `name`, imported only when a run needs it.

    `on_attempt_exit` is called when an attempt this process started ends, where
    the backend can tell (the local backend is the parent of its wrappers).
    """
    if name == "local":
        from fray.backends.local.backend import LocalBackend

        return LocalBackend(home, on_attempt_exit=on_attempt_exit)
    if name == "slurm":
        from fray.backends.slurm.backend import SlurmBackend

        return SlurmBackend(home)
    from fray.errors import UsageError

    raise UsageError(f"backend {name!r} is not available in this version of fray (available: local, slurm)")
