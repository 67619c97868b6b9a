"""Backends: where attempts run. Each answers the small `Backend` protocol in `protocol`.

Which backends exist is `fray.core.backend_names.BACKENDS`; `load_backend`
imports one only when a run needs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Callable

from fray.core.backend_names import BACKENDS

if TYPE_CHECKING:
    from fray.backends.protocol import Backend
    from fray.state.layout import Home


def load_backend(name: str, home: "Home", on_attempt_exit: Callable[[], None] | None = None) -> "Backend":
    """The backend called `name`.

    `on_attempt_exit` is called when an attempt this process started ends, where
    the backend can tell (the local backend is the parent of its wrappers).
    """
    target = BACKENDS.get(name)
    if target is None:
        from fray.errors import UsageError

        raise UsageError(f"backend {name!r} is not available in this version of fray "
                         f"(available: {', '.join(BACKENDS)})")
    module, _, attribute = target.partition(":")
    factory = importlib.import_module(module)
    for part in attribute.split("."):
        factory = getattr(factory, part)
    return factory(home, on_attempt_exit=on_attempt_exit)
