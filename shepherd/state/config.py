"""config.json: backends and defaults, written by hand and validated on read.

The schema (schemas/config.json) checks the shape; what it cannot say (a
notify section's rate limit, port, or user without password) is checked here
by the section's own parser, so a config.json is accepted or refused whole.
"""

from __future__ import annotations

from typing import Any

from fray.state import store
from fray.errors import CorruptFileError, StateError
from fray.state.layout import Home


def load_config(home: Home) -> dict[str, Any]:
    """The validated config, or {} when there is none. A bad one is an error to fix, not ignore."""
    try:
        config = store.read_json(home.config, "config") or {}
    except CorruptFileError as exc:
        raise StateError(f"{exc}. Fix it (schemas/config.json describes it) and put it back.") from None
    if "notify" not in config:
        return config
    from fray.core import notify  # its parser, only for a config that has the section (not for every submit)

    try:
        notify.settings_from(config)
    except ValueError as exc:
        raise StateError(f"{home.config}: {exc}. Fix it (docs/keeping-alive.md, Notifications, shows an example).") from None
    return config
