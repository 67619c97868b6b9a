"""The backends fray knows, by name, and where each one's code lives.

One table for every place that names backends: the `--backend` directive's
choices, the schemas' enum check, and `fray.backends.load_backend`. The classes
are named by string, so this pure module imports no backend; adding a backend
is one line here (and its package under backends/).
"""

from __future__ import annotations

# name -> "module:factory", called as factory(home, on_attempt_exit).
BACKENDS: dict[str, str] = {
    "local": "fray.backends.local.backend:LocalBackend",
    "slurm": "fray.backends.slurm.backend:SlurmBackend.for_daemon",
    "tpu": "fray.backends.tpu.backend:TpuBackend.for_daemon",
}
# Every name a state file may carry (schemas/meta.json's enum): what `--backend` accepts.
BACKEND_NAMES: tuple[str, ...] = tuple(BACKENDS)
