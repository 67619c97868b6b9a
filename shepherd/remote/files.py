"""Files on the remote host: over SFTP when its sshd offers it, else over exec channels.

Some login nodes run sshd without the SFTP subsystem. Then files travel the
way scp's legacy mode and Ansible move them: through the standard streams of
ordinary commands. Many files go as one tar stream (`tar -x`, modes kept), one
file is read with `tail -c`, written with `cat > temp && mv`, and stat, listing
and rename ask the remote python3 (the one fray's bootstrap requires), which,
unlike `ls`, has no trouble with odd names. `open_files` tries SFTP once per
connection and remembers when the server refused it.

Both kinds raise FileNotFoundError for a missing path where a caller expects
one, and RemoteCommandFailed (exit 255, saying what failed where) for anything
else, never a paramiko exception.
"""

from __future__ import annotations

import io
import posixpath
import stat as stat_module
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fray.remote import command
from fray.remote.connection import Connection
from fray.remote.errors import RemoteCommandFailed

MISSING = 44  # the exit code the helper scripts give for a path that does not exist
WHAT_TO_DO = ("check that the path is yours and writable there (`ssh HOST ls -ld PATH`), or pick another remote "
              "FRAY_HOME with FRAY_REMOTE_HOME")
_REMOVE_CHUNK = 500  # paths per `rm` (well under any ARG_MAX)
_TIMEOUT = 600.0

# $1 umask, $2 folder; then `tar -x` of stdin into it (modes as archived: -p).
_UNTAR = 'umask "$1" && mkdir -p -- "$2" && cd -- "$2" && exec tar --no-same-owner -xpf -'
_READ = f'[ -e "$1" ] || exit {MISSING}; exec tail -c "+$2" -- "$1"'
_WRITE = 'umask 077 && cat > "$1.fray-tmp" && mv -f -- "$1.fray-tmp" "$1"'
_MKDIR = 'umask "$1" && shift && mkdir "$@"'
_PY_STAT = (f"import os, sys\ntry:\n    s = os.stat(sys.argv[1])\nexcept FileNotFoundError:\n    sys.exit({MISSING})\n"
            "print(s.st_uid, s.st_mode, s.st_size)")
_PY_LIST = (f"import os, sys\ntry:\n    names = os.listdir(sys.argv[1])\nexcept FileNotFoundError:\n"
            f"    sys.exit({MISSING})\nsys.stdout.write('\\0'.join(names))")
_PY_RENAME = "import os, sys\nos.rename(sys.argv[1], sys.argv[2])"


@dataclass(frozen=True)
class Stat:
    uid: int
    mode: int
    size: int


class RemoteFiles(Protocol):
    def makedirs(self, path: str, mode: int = 0o777) -> None: ...
    def mkdir(self, path: str, mode: int) -> None: ...
    def put_tree(self, base: str, files: Sequence[tuple[Path, str]], dirs: Sequence[str] = (),
                 dir_mode: int = 0o777) -> None: ...
    def write(self, path: str, data: bytes) -> None: ...
    def read(self, path: str, offset: int = 0) -> bytes: ...
    def stat(self, path: str) -> Stat: ...
    def listdir(self, path: str) -> list[str]: ...
    def remove(self, paths: Iterable[str]) -> None: ...
    def rename(self, old: str, new: str) -> None: ...
    def close(self) -> None: ...


def open_files(conn: Connection) -> RemoteFiles:
    """SFTP when the server offers it, else the exec-channel fallback (remembered for this connection)."""
    import paramiko

    if not conn.sftp_refused:
        try:
            sftp = conn.client.open_sftp()
        except paramiko.SSHException:  # "Channel closed.": the server has no SFTP subsystem
            conn.sftp_refused = True
        except (OSError, EOFError) as exc:
            raise RemoteCommandFailed(f"opening a file session on {conn.spec.alias} failed: {exc}") from None
        else:
            sftp.get_channel().settimeout(conn.spec.connect_timeout)
            return SftpFiles(conn.spec.alias, sftp)
    return ShellFiles(conn)


class SftpFiles:
    """RemoteFiles over one SFTP session; every other failure becomes RemoteCommandFailed."""

    def __init__(self, host: str, sftp: Any) -> None:
        self.host = host
        self.sftp = sftp

    def _failed(self, what: str, path: str, exc: BaseException) -> RemoteCommandFailed:
        return RemoteCommandFailed(f"{what} {path} on {self.host} failed: {exc}; {WHAT_TO_DO}")

    def _call(self, what: str, path: str, fn: Any, *args: Any, missing_ok: bool = False) -> Any:
        import paramiko

        try:
            return fn(*args)
        except FileNotFoundError:
            if missing_ok:
                raise
            raise self._failed(what, path, FileNotFoundError(f"no such file or folder {path}")) from None
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise self._failed(what, path, exc) from None

    def makedirs(self, path: str, mode: int = 0o777) -> None:
        parts = []
        while path not in ("", "/"):
            try:
                self._call("checking", path, self.sftp.stat, path, missing_ok=True)
                break
            except FileNotFoundError:
                parts.append(path)
                path = posixpath.dirname(path)
        for part in reversed(parts):
            self._call("creating the folder", part, self.sftp.mkdir, part, mode)

    def mkdir(self, path: str, mode: int) -> None:
        self._call("creating the folder", path, self.sftp.mkdir, path, mode)

    def put_tree(self, base: str, files: Sequence[tuple[Path, str]], dirs: Sequence[str] = (),
                 dir_mode: int = 0o777) -> None:
        made: set[str] = set()
        for rel in ["", *dirs]:
            folder = posixpath.join(base, rel) if rel else base
            self.makedirs(folder, dir_mode)
            made.add(rel)
        for local, rel in files:
            parent = posixpath.dirname(rel)
            if parent not in made:
                self.makedirs(posixpath.join(base, parent), dir_mode)
                made.add(parent)
            target = posixpath.join(base, rel)
            self._call("sending", target, self.sftp.put, str(local), target)
            self._call("setting the mode of", target, self.sftp.chmod, target, stat_module.S_IMODE(local.stat().st_mode))

    def write(self, path: str, data: bytes) -> None:
        def put() -> None:
            with self.sftp.open(path, "wb") as f:
                f.write(data)

        self._call("writing", path, put)

    def read(self, path: str, offset: int = 0) -> bytes:
        def get() -> bytes:
            with self.sftp.open(path, "rb") as f:
                f.seek(offset)
                return f.read()

        return self._call("reading", path, get, missing_ok=True)

    def stat(self, path: str) -> Stat:
        info = self._call("checking", path, self.sftp.stat, path, missing_ok=True)
        return Stat(info.st_uid or 0, info.st_mode or 0, info.st_size or 0)

    def listdir(self, path: str) -> list[str]:
        return self._call("listing", path, self.sftp.listdir, path, missing_ok=True)

    def remove(self, paths: Iterable[str]) -> None:
        for path in paths:
            try:
                self._call("removing", path, self.sftp.remove, path, missing_ok=True)
            except FileNotFoundError:
                pass

    def rename(self, old: str, new: str) -> None:
        self._call("renaming", old, self.sftp.posix_rename, old, new)

    def close(self) -> None:
        self.sftp.close()


class ShellFiles:
    """RemoteFiles over exec channels (no SFTP subsystem): tar, tail, cat, mv, rm and python3."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def _sh(self, what: str, path: str, script: str, *args: str, stdin: bytes | None = None,
            missing_ok: bool = False) -> bytes:
        result = command.run(self.conn, ["sh", "-c", script, "sh", *args], stdin=stdin, timeout=_TIMEOUT)
        return self._checked(what, path, result, missing_ok)

    def _py(self, what: str, path: str, code: str, *args: str, missing_ok: bool = False) -> bytes:
        result = command.run(self.conn, ["python3", "-c", code, *args], timeout=_TIMEOUT)
        return self._checked(what, path, result, missing_ok)

    def _checked(self, what: str, path: str, result: command.Result, missing_ok: bool) -> bytes:
        if result.exit_code == MISSING and missing_ok:
            raise FileNotFoundError(path)
        if result.exit_code != 0:
            detail = result.stderr.decode(errors="replace").strip()[-1000:] or f"exit {result.exit_code}"
            raise RemoteCommandFailed(f"{what} {path} on {self.conn.spec.alias} failed: {detail}; {WHAT_TO_DO}")
        return result.stdout

    def makedirs(self, path: str, mode: int = 0o777) -> None:
        self._sh("creating the folder", path, 'umask "$1" && mkdir -p -- "$2"', _umask(mode), path)

    def mkdir(self, path: str, mode: int) -> None:
        self._sh("creating the folder", path, _MKDIR, _umask(mode), "--", path)

    def put_tree(self, base: str, files: Sequence[tuple[Path, str]], dirs: Sequence[str] = (),
                 dir_mode: int = 0o777) -> None:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for rel in dirs:
                info = tarfile.TarInfo(rel)
                info.type, info.mode = tarfile.DIRTYPE, dir_mode
                tar.addfile(info)
            for local, rel in files:
                info = tar.gettarinfo(str(local), arcname=rel)
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                with local.open("rb") as f:
                    tar.addfile(info, f)
        self._sh("sending files to", base, _UNTAR, _umask(dir_mode), base, stdin=buffer.getvalue())

    def write(self, path: str, data: bytes) -> None:
        self._sh("writing", path, _WRITE, path, stdin=data)

    def read(self, path: str, offset: int = 0) -> bytes:
        return self._sh("reading", path, _READ, path, str(offset + 1), missing_ok=True)

    def stat(self, path: str) -> Stat:
        uid, mode, size = self._py("checking", path, _PY_STAT, path, missing_ok=True).split()
        return Stat(int(uid), int(mode), int(size))

    def listdir(self, path: str) -> list[str]:
        out = self._py("listing", path, _PY_LIST, path, missing_ok=True).decode()
        return out.split("\0") if out else []

    def remove(self, paths: Iterable[str]) -> None:
        paths = list(paths)
        for start in range(0, len(paths), _REMOVE_CHUNK):
            chunk = paths[start:start + _REMOVE_CHUNK]
            self._sh("removing", chunk[0], 'exec rm -f -- "$@"', *chunk)

    def rename(self, old: str, new: str) -> None:
        self._py("renaming", old, _PY_RENAME, old, new)

    def close(self) -> None:
        pass


def _umask(mode: int) -> str:
    """The umask that makes new folders at most `mode` (0700 -> 077)."""
    return f"{~mode & 0o777:03o}"
