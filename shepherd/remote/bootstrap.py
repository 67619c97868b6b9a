"""fray on the remote: found, or installed from wheels made on this machine.

One probe (a single remote shell call) finds the remote FRAY_HOME, its
python3, its platform and the fray already there. When fray is missing or
older than the local one, it is installed into a virtual environment at
`<remote FRAY_HOME>/venv` from wheels this machine prepares once and caches
(fray.remote.wheels): fray's own, and, when the remote's Python and platform
match this machine's, those of its dependencies and of pip, repacked from
what is installed here. Only wheels the remote's `<FRAY_HOME>/wheels` does
not already hold (by content hash) travel. Then:

- platforms match: a venv without pip (instant), and pip run from its wheel
  installs exactly those wheels (`--no-index --no-deps`; pip itself included, so
  the venv has one): no package index, no download, no build, nothing to resolve;
- they differ: a venv with pip, and fray's dependencies from the remote's own
  package index (the pure-Python wheels sent along are used first);
- an offline cluster of another platform: a wheelhouse folder sent along
  (`FRAY_REMOTE_WHEELHOUSE=/path/to/wheels`, filled with `pip download` on a
  machine of the cluster's platform), installed with `--no-index`.

Byte-code is not compiled at install (`--no-compile`): Python compiles each
module the first time it is imported, so the install does not pay for the
modules a command never loads.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import posixpath
from dataclasses import dataclass
from pathlib import Path

from fray.remote import command, wheels as local_wheels
from fray.remote.connection import Connection
from fray.remote.errors import RemoteCommandFailed, RemoteError
from fray.remote.files import open_files

MIN_PYTHON = (3, 10)
INSTALL_TIMEOUT = 900.0

# $1: the FRAY_HOME asked for (may be empty). Prints key=value lines only.
_PROBE = r"""
home=${1:-${FRAY_HOME:-$HOME/.fray}}
echo "home=$home"
py=$(command -v python3 || true)
echo "python=$py"
[ -n "$py" ] && "$py" -c 'import sys; print("pyver=%d.%d" % sys.version_info[:2])'
[ -n "$py" ] && "$py" -c "$2" 2>/dev/null
for f in "$home/venv/bin/fray" "$(command -v fray || true)"; do
  if [ -n "$f" ] && [ -x "$f" ]; then
    v=$("$(dirname "$f")/python" -c 'import fray; print(fray.__version__)' 2>/dev/null) && {
      echo "fray=$f"; echo "version=$v"; break; }
  fi
done
exit 0  # a candidate that fails to import fray is skipped, not an error of the probe
"""


@dataclass(frozen=True)
class RemoteFray:
    home: str  # the remote FRAY_HOME
    executable: str  # the remote `fray` to run


def local_version() -> str:
    # The installed distribution's version (importing `fray` itself would load the cluster API).
    return importlib.metadata.version("fray")


def probe(conn: Connection, home: str | None) -> dict[str, str]:
    result = command.run(conn, ["sh", "-c", _PROBE, "sh", home or "", local_wheels.PLATFORM_PROBE], timeout=60)
    if result.exit_code != 0:
        raise RemoteCommandFailed(f"probing {conn.spec.alias} failed: {result.stderr.decode(errors='replace')}")
    return dict(line.split("=", 1) for line in result.stdout.decode().splitlines() if "=" in line)


def ensure(conn: Connection, home: str | None = None, wheelhouse: Path | None = None) -> RemoteFray:
    """The remote fray to run, installing the local version first when it is missing or older."""
    found = probe(conn, home)
    if usable(found, local_version(), conn.spec.alias):
        return RemoteFray(found["home"], found["fray"])
    wheelhouse = wheelhouse or (Path(os.environ["FRAY_REMOTE_WHEELHOUSE"]) if os.environ.get("FRAY_REMOTE_WHEELHOUSE") else None)
    install(conn, found["home"], found["python"], wheelhouse, found.get("platform", ""))
    return RemoteFray(found["home"], posixpath.join(found["home"], "venv", "bin", "fray"))


def usable(found: dict[str, str], local: str, alias: str) -> bool:
    """Whether the probe found a fray to run as is; False: install one. RemoteError when none can be."""
    if found.get("fray") and not _older(found.get("version", ""), local):
        return True
    if not found.get("python"):
        raise RemoteError(f"{alias} has no python3 on its PATH; fray needs Python >= 3.10 there")
    pyver = tuple(int(p) for p in found.get("pyver", "0.0").split(".") if p.isdigit())
    if pyver < MIN_PYTHON:
        raise RemoteError(
            f"{alias} has Python {found.get('pyver') or 'of unknown version'} ({found['python']}); fray needs "
            "Python >= 3.10 there (load a newer Python module in your login shell's startup file)"
        )
    return False


# $1: the folder; prints "<sha256> <name>" for each wheel in it (nothing when it does not exist yet).
_LIST_WHEELS = """
import hashlib, os, sys
folder = sys.argv[1]
for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
    if name.endswith(".whl"):
        digest = hashlib.sha256()
        with open(os.path.join(folder, name), "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        print(digest.hexdigest(), name)
"""


@dataclass(frozen=True)
class Plan:
    """How to install: which wheels to have there, and the pip command's shape."""

    send: tuple[Path, ...]  # every wheel the remote's wheels folder must hold
    fray: Path
    pip_wheel: Path | None  # run pip from this wheel in a venv made without pip; None: a venv with pip
    offline: bool  # --no-index: everything is in the wheels folder


def plan(prepared: local_wheels.Wheels, same_platform: bool, wheelhouse: list[Path]) -> Plan:
    """Pure: what to send and how to install, from the wheels made here and what the remote is.

    A wheelhouse the user named is what they want installed: fray and it, nothing of this machine's.
    """
    if wheelhouse:
        return Plan((prepared.fray, *wheelhouse), prepared.fray, None, offline=True)
    if same_platform and prepared.pip:
        return Plan((prepared.fray, *prepared.dependencies, prepared.pip), prepared.fray, prepared.pip, offline=True)
    pure = tuple(w for w in prepared.dependencies if local_wheels.pure(w))
    return Plan((prepared.fray, *pure), prepared.fray, None, offline=False)


def install(conn: Connection, home: str, python: str, wheelhouse: Path | None,
            remote_platform: str = "") -> None:
    same = local_wheels.compatible(local_wheels.platform_key(), remote_platform)
    house = sorted(wheelhouse.glob("*.whl")) if wheelhouse else []
    prepared = local_wheels.prepare(dependencies=not house)
    chosen = plan(prepared, same, house)
    remote_wheels = posixpath.join(home, "wheels")
    send_missing(conn, python, home, remote_wheels, chosen.send)
    venv = posixpath.join(home, "venv")
    venv_python = posixpath.join(venv, "bin", "python")
    make_venv = [python, "-m", "venv", *(["--without-pip"] if chosen.pip_wheel else []), venv]
    pip = [venv_python, posixpath.join(remote_wheels, chosen.pip_wheel.name, "pip")] if chosen.pip_wheel else \
        [venv_python, "-m", "pip"]
    pip += ["install", "-q", "--disable-pip-version-check", "--no-compile", "--find-links", remote_wheels]
    if chosen.pip_wheel:
        # This machine's own set of versions, known to work together: installed as it is, nothing to resolve.
        pip += ["--no-index", "--no-deps", *(posixpath.join(remote_wheels, w.name) for w in chosen.send)]
    else:
        if chosen.offline:
            pip.append("--no-index")
        pip.append(posixpath.join(remote_wheels, chosen.fray.name))
    for argv in (make_venv, pip):
        result = command.run(conn, argv, timeout=INSTALL_TIMEOUT)
        if result.exit_code != 0:
            raise RemoteCommandFailed(
                f"installing fray on {conn.spec.alias} failed ({' '.join(argv[:3])}): "
                f"{result.stderr.decode(errors='replace').strip()[-2000:]}"
            )


def send_missing(conn: Connection, python: str, home: str, remote_wheels: str,
                 wanted: tuple[Path, ...]) -> tuple[Path, ...]:
    """Send the wheels `remote_wheels` does not hold with the same content; those sent."""
    listed = command.run(conn, [python, "-c", _LIST_WHEELS, remote_wheels], timeout=INSTALL_TIMEOUT)
    there = {}
    if listed.exit_code == 0:
        for line in listed.stdout.decode(errors="replace").splitlines():
            digest, _, name = line.partition(" ")
            there[name] = digest
    missing = tuple(w for w in wanted if there.get(w.name) != _sha256(w))
    files = open_files(conn)
    try:
        files.makedirs(home, 0o700)  # FRAY_HOME and its folders are private (payloads.py)
        files.put_tree(remote_wheels, [(w, w.name) for w in missing], dir_mode=0o700)
    finally:
        files.close()
    return missing


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _older(remote: str, local: str) -> bool:
    def parts(version: str) -> tuple[int, ...]:
        return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))

    return not remote or parts(remote) < parts(local)
