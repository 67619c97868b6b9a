"""Code snapshots: a run's project, stored by content under FRAY_HOME/snapshots, taken once at submit.

Every attempt of a run, the first or one nine days later after the files were
edited, runs the code that was submitted. `take` lists the project
(fray.state.snapshot_listing: a git work tree through git itself, so `.gitignore`
holds exactly as git applies it; a plain folder by walking it, `.gitignore` not
applied; `.frayignore` on top of both, `!` lines included; what was left out
and by which rule kept in the snapshot's `left_out`), stores each file's bytes once under `objects/` (read-only, shared by
every run and sweep that has the same file) and writes the tree, which file is
which object, as `trees/<hash>.json`. The wrapper builds the run's own copy
from the tree (fray.wrapper.code).

Nothing half-made is ever used: objects are written under temporary names and
renamed, made durable by one sync, and the tree file (written last, atomically)
is what a run names. `collect` removes trees no run refers to any more, and the
objects no kept tree uses; it never runs while a snapshot is being taken (a
shared lock for those, an exclusive one for it), and it spares young trees,
whose runs may still be being written.

Re-hashing a big project on every submit would be slow, so a per-project index
remembers each file's size, times and inode with its hash; a file whose stat
is unchanged is not read again (git's "racily clean" rule: a file changed within
the index's own second is hashed anyway).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import orjson

from fray.errors import UsageError
from fray.state import snapshot_listing, store
from fray.state.layout import Home
from fray.wrapper import contract

SIZE_LIMIT = 200 * 1024 * 1024  # a project larger than this is refused unless forced (as `fray sync` does)
GIT_TIMEOUT_SEC = snapshot_listing.GIT_TIMEOUT_SEC
KEEP_UNREFERENCED_SEC = 3600.0  # a tree or object younger than this is kept: a submit may be about to name it
ROOT_MARKERS = (".git", ".fray-sync.json")  # a git work tree; a project synced here by `fray sync`


class Snapshot(NamedTuple):
    """A stored snapshot: its tree hash, where it was taken from, and what it holds."""

    tree: str
    root: str
    files: int
    bytes: int
    git: dict[str, Any] | None = None
    left_out: snapshot_listing.LeftOut = snapshot_listing.LeftOut([])  # what it did not take, and why

    def to_dict(self) -> dict[str, Any]:
        """The spec's `code` (schemas/meta.json): what was taken, and a summary of what was left out."""
        return {"tree": self.tree, "root": self.root, "files": self.files, "bytes": self.bytes, "git": self.git,
                "left_out": self.left_out.summary()}


def project_root(start: Path, home: Path) -> Path:
    """The project a folder belongs to: the nearest folder from `start` up that is a git work tree or a
    synced project (never FRAY_HOME or above it, when `start` is inside it), else `start` itself."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if folder == home:
            break  # a project synced into FRAY_HOME (`fray sync`) has its marker below it
        if any((folder / marker).exists() for marker in ROOT_MARKERS):
            return folder
    return start


def take(home: Home, root: Path, *, force: bool = False, now: float | None = None) -> Snapshot:
    """Store the project at `root` (only what is new) and return its snapshot; UsageError when it cannot be
    taken as it is (too big, an unreadable file, a link out of it), saying how to fix it."""
    now = time.time() if now is None else now
    store.ensure_home(home)
    root = root.resolve()
    git = _git_state(root)
    listing = snapshot_listing.list_project(root, home.root, in_git=git is not None)
    total = sum(st.st_size for st in listing.files.values())
    if total > SIZE_LIMIT and not force:
        biggest = sorted(listing.files.items(), key=lambda item: -item[1].st_size)[:3]
        named = ", ".join(f"{rel} ({st.st_size / 1e6:.0f} MB)" for rel, st in biggest)
        raise UsageError(
            f"the project {root} holds {total / 1e6:.0f} MB in {len(listing.files)} files, more than fray "
            f"snapshots ({SIZE_LIMIT / 1e6:.0f} MB); the largest: {named}. Leave data and outputs out with "
            f".frayignore (or .gitignore), name the code's folder with --code DIR, run in place with "
            f"--code none, or pass --force to snapshot it all")
    hashes = _hashes(home, root, listing.files, now)
    executable = {rel for rel, st in listing.files.items() if st.st_mode & 0o111}
    tree = tree_hash(hashes, executable, listing.links)
    tree_path = Path(contract.snapshot_tree(str(home.root), tree))
    with _store_lock(home, fcntl.LOCK_SH):  # collect waits: an object found here stays until the tree names it
        if not tree_path.exists():
            _store_objects(home, root, hashes, executable)
            document = {"tree": tree, "files": hashes, "executable": sorted(executable), "links": listing.links,
                        "bytes": total, "created_at": now}
            store.make_dirs(tree_path.parent)
            store.write_json(tree_path, document, "snapshot")
        else:
            os.utime(tree_path)  # young again: collect keeps it while this submit writes the run naming it
    return Snapshot(tree, str(root), len(hashes) + len(listing.links), total, git, listing.left_out)


def tree_hash(hashes: dict[str, str], executable: set[str], links: dict[str, str]) -> str:
    """One hash for the whole tree: paths, contents, executable bits and links."""
    digest = hashlib.sha256()
    for rel in sorted(hashes):
        digest.update(f"f\0{rel}\0{hashes[rel]}\0{int(rel in executable)}\n".encode())
    for rel in sorted(links):
        digest.update(f"l\0{rel}\0{links[rel]}\n".encode())
    return digest.hexdigest()


# ---------------------------------------------------------------- listing


def _git_state(root: Path) -> dict[str, Any] | None:
    """{"commit", "dirty"} of the git work tree at `root`; None when it is none (or git is missing)."""
    if not (root / ".git").exists():
        return None
    import subprocess  # only a git work tree runs git: a project outside git loads no subprocess

    try:
        done = subprocess.run(["git", "-C", str(root), "status", "--porcelain=v2", "--branch"],
                              capture_output=True, timeout=GIT_TIMEOUT_SEC)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    commit = None
    dirty = False
    for line in done.stdout.decode(errors="replace").splitlines():
        if line.startswith("# branch.oid "):
            oid = line.split()[-1]
            commit = None if oid == "(initial)" else oid
        elif line and not line.startswith("#"):
            dirty = True
    return {"commit": commit, "dirty": dirty}


# ---------------------------------------------------------------- hashing and storing


def _index_path(home: Home, root: Path) -> Path:
    return home.cache_dir / "snapshot-index" / (hashlib.sha256(str(root).encode()).hexdigest()[:24] + ".json")


def _stamp(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _hashes(home: Home, root: Path, files: dict[str, os.stat_result], now: float) -> dict[str, str]:
    """{rel: sha256} of every file, reading only those whose stat changed since the last snapshot."""
    index_path = _index_path(home, root)
    try:
        index = orjson.loads(index_path.read_bytes())
        known, written_ns = index["files"], index["written_ns"]
    except (OSError, ValueError, KeyError, TypeError):
        known, written_ns = {}, 0
    hashes: dict[str, str] = {}
    fresh: dict[str, list[Any]] = {}
    for rel, st in files.items():
        stamp = _stamp(st)
        entry = known.get(rel)
        # Changed in the same second the index was written: its stat may not show a later change.
        racy = st.st_mtime_ns >= written_ns - 1_000_000_000
        if isinstance(entry, list) and entry[:4] == stamp and not racy:
            sha = entry[4]
        else:
            sha = _file_hash(root / rel)
        hashes[rel] = sha
        fresh[rel] = [*stamp, sha]
    try:
        store.make_dirs(index_path.parent)
        store.write_bytes_atomic(index_path, orjson.dumps({"written_ns": int(now * 1e9), "files": fresh}), sync=False)
    except OSError:
        pass  # only a cache: the next snapshot hashes again
    return hashes


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}; fix it or leave it out with .frayignore") from None
    return digest.hexdigest()


def _store_objects(home: Home, root: Path, hashes: dict[str, str], executable: set[str]) -> None:
    """Every file's bytes under objects/, read-only, each written once; one sync makes them durable."""
    wrote = False
    for rel, sha in hashes.items():
        is_exec = rel in executable
        target = contract.snapshot_object(str(home.root), sha, is_exec)
        if os.path.exists(target):
            continue
        store.make_dirs(Path(target).parent)
        data = (root / rel).read_bytes()
        if hashlib.sha256(data).hexdigest() != sha:
            raise UsageError(f"{root / rel} changed while fray took the snapshot; submit again")
        tmp = f"{os.path.dirname(target)}/.{sha}.{os.getpid()}.tmp"
        with open(tmp, "wb") as handle:
            handle.write(data)
            os.fchmod(handle.fileno(), 0o555 if is_exec else 0o444)
        os.replace(tmp, target)
        wrote = True
    if wrote:
        store.sync_all()


# ---------------------------------------------------------------- removing what no run needs


@contextlib.contextmanager
def _store_lock(home: Home, mode: int) -> Iterator[bool]:
    """flock on locks/snapshots.lock: shared by snapshots being taken, exclusive for collect (which does not
    wait: it yields False when a snapshot is being taken, and tries again later). A fast guard between the
    processes of one host; what keeps a snapshot being taken on another host, or on a file system without
    flock (ENOSYS), is collect's sparing of anything younger than KEEP_UNREFERENCED_SEC."""
    store.make_dirs(home.locks_dir)
    fd = os.open(home.lock_file("snapshots"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, mode)
            held = True
        except BlockingIOError:
            held = False
        except OSError:  # no flock on this file system (ENOSYS, EOPNOTSUPP, ENOLCK): the age rule alone
            held = True
        yield held
    finally:
        os.close(fd)  # releases the lock


def read_tree(home: Home, tree: str) -> dict[str, Any] | None:
    return store.read_json(Path(contract.snapshot_tree(str(home.root), tree)), "snapshot")


def collect(home: Home, referenced: set[str], now: float | None = None,
            keep_sec: float = KEEP_UNREFERENCED_SEC) -> tuple[int, int]:
    """Remove trees no run refers to and objects no kept tree uses, sparing anything younger than `keep_sec`
    (a submit may be writing the run that names it). Returns (trees, objects) removed."""
    now = time.time() if now is None else now
    with _store_lock(home, fcntl.LOCK_EX | fcntl.LOCK_NB) as held:
        return _collect(home, referenced, now, keep_sec) if held else (0, 0)


def _collect(home: Home, referenced: set[str], now: float, keep_sec: float) -> tuple[int, int]:
    trees_dir = home.root / contract.SNAPSHOTS_DIR / contract.SNAPSHOT_TREES
    objects_dir = home.root / contract.SNAPSHOTS_DIR / contract.SNAPSHOT_OBJECTS
    used: set[str] = set()
    removed_trees = 0
    try:
        entries = list(os.scandir(trees_dir))
    except FileNotFoundError:
        return 0, 0
    for entry in entries:
        if not entry.name.endswith(".json") or entry.name.startswith("."):
            continue
        tree = entry.name[: -len(".json")]
        young = now - entry.stat().st_mtime < keep_sec
        if tree in referenced or young:
            document = read_tree(home, tree) or {}
            executable = set(document.get("executable", ()))
            used.update(sha + (contract.EXECUTABLE_SUFFIX if rel in executable else "")
                        for rel, sha in document.get("files", {}).items())
        else:
            os.unlink(entry.path)
            removed_trees += 1
    removed_objects = 0
    for folder in _scandir(objects_dir):
        for entry in _scandir(Path(folder.path)):
            if entry.name in used or now - entry.stat().st_mtime < keep_sec:
                continue
            os.unlink(entry.path)
            removed_objects += 1
    return removed_trees, removed_objects


def _scandir(folder: Path) -> list[os.DirEntry[str]]:
    try:
        return list(os.scandir(folder))
    except FileNotFoundError:
        return []
