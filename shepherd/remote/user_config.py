"""The user's own settings for reaching clusters: ~/.config/fray/config.toml ($XDG_CONFIG_HOME/fray/).

    remote = "gpu-login"                    # the default --remote HOST
    remotes = ["gpu-login", "tpu-admin"]    # every cluster in one view (fray.remote.clusters)
    remote_timeout = 20                     # seconds one host may take to answer a many-cluster view
    [remote_homes]                          # FRAY_HOME on a host, when not its own default
    tpu-admin = "/mnt/gcs/me/.fray"

FRAY_REMOTE_HOME, when set, names the remote FRAY_HOME for every host instead.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fray.errors import UsageError

ENV_REMOTE_HOME = "FRAY_REMOTE_HOME"


def path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "fray" / "config.toml"


def load() -> dict[str, Any]:
    """The file as a dict ({} when absent); a file that is not TOML is refused, naming it."""
    where = path()
    if not where.is_file():
        return {}
    text = where.read_text()
    try:
        import tomllib
    except ImportError:  # Python 3.10: tomli when installed, else the one `remote = "HOST"` line
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            return _remote_line(text)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{where} is not valid TOML: {exc}") from None


def _remote_line(text: str) -> dict[str, Any]:
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "remote":
            return {"remote": value.strip().strip("\"'")}
    return {}


def remote_home(host: str) -> str | None:
    """The FRAY_HOME to use on `host` (None: the host's own $FRAY_HOME, else ~/.fray there)."""
    explicit = os.environ.get(ENV_REMOTE_HOME)
    if explicit:
        return explicit
    homes = load().get("remote_homes") or {}
    value = homes.get(host) if isinstance(homes, dict) else None
    return value if isinstance(value, str) and value else None
