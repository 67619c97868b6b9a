"""config.json as the daemon holds it: loaded at start, reloaded when the file changes.

A new file is validated before it takes effect. A bad edit keeps the config in
force (the file is moved aside as every corrupt state file is, so the edit is not
lost) and the error is kept for the lease, where `fray daemon status` shows it;
the next valid file clears it. Whether the file changed is its stat key, checked
once a cycle: the watcher only makes the cycle come sooner.
"""

from __future__ import annotations

import logging
from typing import Any

from fray.errors import StateError
from fray.state.config import load_config
from fray.state.layout import Home
from fray.state.row_cache import StatKey, stat_key

log = logging.getLogger("fray.daemon")


class Settings:
    def __init__(self, home: Home) -> None:
        self.home = home
        self.config: dict[str, Any] = load_config(home)  # a bad file at start is the start's error
        self.error: str | None = None
        self._key: StatKey | None = stat_key(home.config)

    def reload(self) -> dict[str, Any] | None:
        """The new config when config.json changed to a valid one that differs; else None (nothing to do)."""
        key = stat_key(self.home.config)
        if key == self._key:
            return None
        self._key = key
        if key is None and self.error is not None:
            return None  # the bad file was moved aside: the config in force stays until a good one appears
        try:
            config = load_config(self.home)
        except StateError as exc:
            self.error = f"config.json not applied, the previous config stays in force: {exc}"
            log.error("%s", self.error)
            self._key = stat_key(self.home.config)
            return None
        self.error = None
        if config == self.config:
            return None
        self.config = config
        log.info("config.json changed: applied")
        return config
