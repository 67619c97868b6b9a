"""The project folder copied to the remote by content hash: only changed files travel.

The local side lists the project (minus .git, what .gitignore and .frayignore
exclude), hashes each file and compares with the manifest the previous sync
left on the remote; new and changed files go over SFTP (or, on a server
without it, as one tar stream: fray.remote.files), files gone locally are
removed there. The manifest, `.fray-sync.json`, stays at the root of the copy:
it marks the copy as a project root. The whole tree's hash names the code a
run ran. A folder whose upload would be huge is refused unless forced.

What is left out follows `fray.core.ignore_rules` (.gitignore and .frayignore).
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
from dataclasses import dataclass
from pathlib import Path

from fray.core import ignore_rules
from fray.errors import UsageError
from fray.remote.connection import Connection
from fray.remote.files import RemoteFiles, open_files

MANIFEST = ".fray-sync.json"
DEFAULT_SIZE_LIMIT = 200 * 1024 * 1024


@dataclass(frozen=True)
class SyncResult:
    remote_path: str
    tree_hash: str
    sent: tuple[str, ...]
    removed: tuple[str, ...]
    bytes_sent: int


def code_folder(remote_home: str, project: Path) -> str:
    """Where the project's synced copy lives on the remote: one folder per project name."""
    return posixpath.join(remote_home, "code", project.resolve().name or "project")


def ignore_rules_of(root: Path) -> ignore_rules.Rules:
    """What a sync leaves out: fray's own, then `.gitignore`, then `.frayignore` (whose `!` lines bring back)."""
    rules = ignore_rules.always_rules()  # MANIFEST among them
    for name in ignore_rules.IGNORE_FILES:
        path = root / name
        if path.is_file():
            rules += ignore_rules.rules_from(path.read_text(errors="replace"), name)
    return ignore_rules.Rules(rules)


def manifest(root: Path) -> dict[str, str]:
    """{relative posix path: sha256} of every file sync would send."""
    rules = ignore_rules_of(root)
    files: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        dirnames[:] = sorted(d for d in dirnames if rules.left_out_by(posixpath.join(rel_dir, d), True) is None)
        for name in sorted(filenames):
            rel = posixpath.join(rel_dir, name)
            path = Path(dirpath) / name
            if rules.left_out_by(rel) is not None or not path.is_file():
                continue
            files[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return files


def tree_hash(files: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(f"{rel}\0{files[rel]}\n".encode())
    return digest.hexdigest()


def sync(
    conn: Connection, root: Path, remote_path: str, *, force: bool = False, size_limit: int = DEFAULT_SIZE_LIMIT
) -> SyncResult:
    """Make `remote_path` hold exactly the project files of `root`, sending only what changed."""
    root = root.resolve()
    local = manifest(root)
    files = open_files(conn)
    try:
        previous = _read_manifest(files, posixpath.join(remote_path, MANIFEST))
        to_send = [rel for rel, digest in local.items() if previous.get(rel) != digest]
        to_remove = [rel for rel in previous if rel not in local]
        size = sum((root / rel).stat().st_size for rel in to_send)
        if size > size_limit and not force:
            raise UsageError(
                f"{root} would send {size / 1e6:.0f} MB to the remote (limit {size_limit / 1e6:.0f} MB). "
                "Exclude data and outputs in .frayignore, or pass --force to send it anyway."
            )
        files.put_tree(remote_path, [(root / rel, rel) for rel in to_send])
        files.remove(posixpath.join(remote_path, rel) for rel in to_remove)
        files.write(posixpath.join(remote_path, MANIFEST), json.dumps(local, sort_keys=True).encode())
    finally:
        files.close()
    return SyncResult(remote_path, tree_hash(local), tuple(to_send), tuple(to_remove), size)


def _read_manifest(files: RemoteFiles, path: str) -> dict[str, str]:
    try:
        data = json.loads(files.read(path))
    except (FileNotFoundError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
