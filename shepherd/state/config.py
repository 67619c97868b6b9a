"""config.json: backends and defaults, written by hand and validated on read."""

from __future__ import annotations

from typing import Any

from fray.state import store
from fray.errors import CorruptFileError, StateError
from fray.state.layout import Home


def load_config(home: Home) -> dict[str, Any]:
    """The validated config, or {} when there is none. A bad one is an error to fix, not ignore."""
    try:
        return store.read_json(home.config, "config") or {}
    except CorruptFileError as exc:
        raise StateError(f"{exc}. Fix it (schemas/config.json describes it) and put it back.") from None
