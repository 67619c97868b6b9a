"""fray on the remote: found, or installed from a wheel built on this machine.

One probe (a single remote shell call) finds the remote FRAY_HOME, its
python3 and the fray already there. When fray is missing or older than the
local one, a wheel of the local fray is built here, sent over SFTP and
installed into a virtual environment at `<remote FRAY_HOME>/venv`: the remote
needs no internet for fray itself. fray's dependencies come from the remote's
own package index, or, on an offline cluster, from a wheelhouse folder sent
along (`FRAY_REMOTE_WHEELHOUSE=/path/to/wheels`, filled with
`pip download fray-deps -d /path/to/wheels` on a machine of the cluster's
platform).
"""

from __future__ import annotations

import importlib.metadata
import os
import posixpath
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from fray.remote import command
from fray.remote.connection import Connection
from fray.remote.errors import RemoteCommandFailed, RemoteError

MIN_PYTHON = (3, 10)
INSTALL_TIMEOUT = 900.0

# $1: the FRAY_HOME asked for (may be empty). Prints key=value lines only.
_PROBE = r"""
home=${1:-${FRAY_HOME:-$HOME/.fray}}
echo "home=$home"
py=$(command -v python3 || true)
echo "python=$py"
[ -n "$py" ] && "$py" -c 'import sys; print("pyver=%d.%d" % sys.version_info[:2])'
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
    result = command.run(conn, ["sh", "-c", _PROBE, "sh", home or ""], timeout=60)
    if result.exit_code != 0:
        raise RemoteCommandFailed(f"probing {conn.spec.alias} failed: {result.stderr.decode(errors='replace')}")
    return dict(line.split("=", 1) for line in result.stdout.decode().splitlines() if "=" in line)


def ensure(conn: Connection, home: str | None = None, wheelhouse: Path | None = None) -> RemoteFray:
    """The remote fray to run, installing the local version first when it is missing or older."""
    found = probe(conn, home)
    if usable(found, local_version(), conn.spec.alias):
        return RemoteFray(found["home"], found["fray"])
    wheelhouse = wheelhouse or (Path(os.environ["FRAY_REMOTE_WHEELHOUSE"]) if os.environ.get("FRAY_REMOTE_WHEELHOUSE") else None)
    install(conn, found["home"], found["python"], wheelhouse)
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


def install(conn: Connection, home: str, python: str, wheelhouse: Path | None) -> None:
    remote_wheels = posixpath.join(home, "wheels")
    with tempfile.TemporaryDirectory(prefix="fray-wheel-") as tmp:
        wheel = build_wheel(Path(tmp))
        sftp = conn.client.open_sftp()
        try:
            sftp.get_channel().settimeout(conn.spec.connect_timeout)
            for folder in (home, remote_wheels):
                try:
                    sftp.stat(folder)
                except FileNotFoundError:
                    sftp.mkdir(folder, 0o700)  # FRAY_HOME and its folders are private (payloads.py)
            sends = [wheel, *(sorted(wheelhouse.glob("*.whl")) if wheelhouse else [])]
            for path in sends:
                sftp.put(str(path), posixpath.join(remote_wheels, path.name))
        finally:
            sftp.close()
    venv = posixpath.join(home, "venv")
    pip = [posixpath.join(venv, "bin", "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    if wheelhouse:
        pip += ["--no-index", "--find-links", remote_wheels]
    pip.append(posixpath.join(remote_wheels, wheel.name))
    for argv in ([python, "-m", "venv", venv], pip):
        result = command.run(conn, argv, timeout=INSTALL_TIMEOUT)
        if result.exit_code != 0:
            raise RemoteCommandFailed(
                f"installing fray on {conn.spec.alias} failed ({' '.join(argv[:3])}): "
                f"{result.stderr.decode(errors='replace').strip()[-2000:]}"
            )


def build_wheel(folder: Path) -> Path:
    """A wheel of the fray running here: built from its source tree, or zipped from its install."""
    source = Path(__file__).resolve().parents[2]  # shepherd/remote/bootstrap.py -> the source tree, if any
    if (source / "pyproject.toml").is_file():
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(folder), str(source)],
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=INSTALL_TIMEOUT,
        )
        return next(folder.glob("fray-*.whl"))
    return _zip_installed(folder)


def _zip_installed(folder: Path) -> Path:
    """Repack an installed (non-editable) fray: its RECORD lists every file the wheel had."""
    dist = importlib.metadata.distribution("fray")
    wheel = folder / f"fray-{dist.version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel in dist.files or []:
            path = Path(dist.locate_file(rel))
            if path.is_file() and "__pycache__" not in rel.parts and not str(rel).startswith(".."):
                zf.write(path, str(rel))
    return wheel


def _older(remote: str, local: str) -> bool:
    def parts(version: str) -> tuple[int, ...]:
        return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))

    return not remote or parts(remote) < parts(local)
