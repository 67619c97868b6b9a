"""The actor secret, `$FRAY_HOME/secret`: 32 random bytes in hex, 0600, created on first use.

Whoever can read it can read FRAY_HOME, so an actor connection proves it knows
it before anything is unpickled (fray.actors.auth, the handshake). A cluster
handle loads it (fray.cluster.shared), and so does a resolver given fixed
addresses (fray.actors.resolver).
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from fray.errors import StateError


def load_secret(path: Path, create: bool = True) -> bytes:
    """The secret at `path`, created (0600, atomically) when absent; refused when others may read it."""
    try:
        return _read(path)
    except FileNotFoundError:
        if not create:
            raise StateError(f"no actor secret at {path}; it is created when an actor server starts") from None
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(3)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, secrets.token_hex(32).encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # create-if-absent: two first users agree on one secret
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)
    return _read(path)


def _read(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        info = os.fstat(fd)
        if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
            raise StateError(f"the actor secret {path} must be yours and private (chmod 600 {path}); "
                             "refusing to use it")
        data = os.read(fd, 4096).strip()
    finally:
        os.close(fd)
    if len(data) < 32:
        raise StateError(f"the actor secret {path} is too short; delete it and it is made again")
    return data
