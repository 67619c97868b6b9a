"""The backends fray knows, by name, and where each one's code lives.

One table for every place that names backends: the `--backend` directive's
choices, the check at submit time, and `fray.backends.load_backend`. The
classes are named by string, so this pure module imports no backend; adding a
backend is one line here (and its package under backends/).
"""

from __future__ import annotations

# Every name a state file may carry (schemas/meta.json's enum): what `--backend` accepts.
BACKEND_NAMES: tuple[str, ...] = ("local", "slurm", "tpu")
# The backends this version implements: name -> "module:factory", called as factory(home, on_attempt_exit).
BACKENDS: dict[str, str] = {
    "local": "fray.backends.local.backend:LocalBackend",
    "slurm": "fray.backends.slurm.backend:SlurmBackend.for_daemon",
}


def check_available(name: str) -> None:
    """Raise ValueError (what is available) for a known backend this version does not implement yet."""
    if name not in BACKENDS:
        raise ValueError(f"backend {name!r} is not available yet; available: {', '.join(BACKENDS)}")
