"""The wheels a remote install needs, made once on this machine and cached.

- fray's own wheel: built from the source tree (or repacked from an installed
  fray), cached per version and content hash of the sources, so an edited
  dev tree gets a new wheel and an unchanged one is never rebuilt;
- its dependencies and pip: repacked from the distributions installed here
  (their RECORD lists every file their wheel had), cached by wheel name. They
  suit a remote whose Python and platform match this machine's
  (`compatible`); elsewhere only the pure-Python ones are any use, and the
  remote's package index supplies the rest.

The cache is `$FRAY_WHEEL_CACHE`, else `$XDG_CACHE_HOME/fray/wheels`, else
`~/.cache/fray/wheels`. Every file appears there whole (written aside, then
renamed), so two fray commands can fill it at once.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import re
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

BUILD_TIMEOUT = 900.0
SOURCE_FOLDERS = ("shepherd", "wrapper", "schemas")  # what the wheel is built from (pyproject's package-dir)
SOURCE_FILES = ("pyproject.toml", "README.md")
_SKIPPED_METADATA = frozenset({"INSTALLER", "REQUESTED", "direct_url.json"})


@dataclass(frozen=True)
class Wheels:
    fray: Path
    dependencies: tuple[Path, ...]  # fray's requirements, each installed distribution once
    pip: Path | None  # pip itself, to install with on a venv made without it


def cache_dir() -> Path:
    if os.environ.get("FRAY_WHEEL_CACHE"):
        return Path(os.environ["FRAY_WHEEL_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fray" / "wheels"


def platform_key() -> str:
    """What decides whether a compiled wheel installed here runs there: interpreter, version, platform, libc."""
    libc, libc_version = platform.libc_ver()
    return f"{sys.implementation.cache_tag} {sysconfig.get_platform()} {libc or 'nolibc'} {libc_version or '0'}"


# The same, printed by the remote's python3 (one line): bootstrap's probe runs it.
PLATFORM_PROBE = ("import platform, sys, sysconfig; l, v = platform.libc_ver(); "
                  "print('platform=%s %s %s %s' % (sys.implementation.cache_tag, sysconfig.get_platform(), "
                  "l or 'nolibc', v or '0'))")


def compatible(local: str, remote: str) -> bool:
    """Whether wheels installed under `local` (a platform_key) run under `remote`: same interpreter and
    platform, and a libc at least as new (manylinux wheels need a glibc no older than they were built for)."""
    mine, theirs = local.split(), remote.split()
    if len(mine) != 4 or len(theirs) != 4 or mine[:3] != theirs[:3]:
        return False
    return _numbers(theirs[3]) >= _numbers(mine[3])


def prepare(cache: Path | None = None, dependencies: bool = True) -> Wheels:
    """fray's wheel, and (with `dependencies`) those of its requirements and of pip, from the cache or made now."""
    cache = cache or cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    fray = fray_wheel(cache)
    if not dependencies:
        return Wheels(fray, (), None)
    deps = tuple(_repacked(cache / "deps", dist) for dist in requirement_closure("fray"))
    pip = _installed("pip")
    return Wheels(fray, deps, _repacked(cache / "deps", pip) if pip else None)


def fray_wheel(cache: Path) -> Path:
    """The wheel of the fray running here, built (or repacked) only when its version or sources changed."""
    version = importlib.metadata.version("fray")
    source = _source_tree()
    folder = cache / f"fray-{version}-{_source_hash(source) if source else _record_hash()}"
    found = sorted(folder.glob("fray-*.whl")) if folder.is_dir() else []
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    if source is None:
        return _into(folder, lambda tmp: _repack_into(tmp, importlib.metadata.distribution("fray")))
    from filelock import FileLock

    # pip builds in the source's own build/ folder: two builds of one tree at once (two --remote bootstraps,
    # of any cache) delete each other's files there, so they take turns.
    (source / "build").mkdir(exist_ok=True)
    with FileLock(str(source / "build" / ".fray-wheel.lock")):
        found = sorted(folder.glob("fray-*.whl"))
        return found[0] if found else _into(folder, lambda tmp: _build(source, tmp))


def _into(folder: Path, make: Callable[[Path], Path]) -> Path:
    """The wheel `make` writes in a temporary folder, moved into `folder` whole."""
    with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as tmp:
        built = make(Path(tmp))
        final = folder / built.name
        os.replace(built, final)
    return final


def requirement_closure(name: str) -> list[importlib.metadata.Distribution]:
    """The installed distributions `name` requires, directly or not, each once (extras followed when asked for).

    Environment markers other than extras are not evaluated: a requirement whose
    distribution is installed here is included, and pip on the remote skips any it
    does not need.
    """
    found: dict[str, importlib.metadata.Distribution] = {}
    visited: set[tuple[str, tuple[str, ...]]] = set()

    def visit(requirement_name: str, extras: tuple[str, ...]) -> None:
        key = _normalized(requirement_name)
        if (key, extras) in visited:
            return
        visited.add((key, extras))
        dist = _installed(requirement_name)
        if dist is None:
            return
        if key != _normalized(name):
            found.setdefault(key, dist)
        for requirement in dist.requires or []:
            match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", requirement)
            if not match:
                continue
            extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", requirement)
            if extra and extra.group(1) not in extras:
                continue
            wanted = tuple(sorted(x.strip() for x in (match.group(2) or "").split(",") if x.strip()))
            visit(match.group(1), wanted)

    visit(name, ())
    return [found[key] for key in sorted(found)]


def wheel_name(dist: importlib.metadata.Distribution) -> str:
    """The file name a repacked wheel of `dist` gets: its name, version and the tags its WHEEL file lists."""
    text = dist.read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Tag:")] or ["py3-none-any"]
    parts = [sorted({tag.split("-")[i] for tag in tags}) for i in range(3)]
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    return f"{name}-{dist.version}-{'.'.join(parts[0])}-{'.'.join(parts[1])}-{'.'.join(parts[2])}.whl"


def pure(wheel: Path) -> bool:
    """Whether a wheel (by its name's tags) runs on any platform."""
    return wheel.name.endswith("-none-any.whl")


def _repacked(folder: Path, dist: importlib.metadata.Distribution) -> Path:
    target = folder / wheel_name(dist)
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".repack-") as tmp:
        os.replace(_repack_into(Path(tmp), dist), target)
    return target


def _repack_into(folder: Path, dist: importlib.metadata.Distribution) -> Path:
    """A wheel of an installed distribution: the files its RECORD lists inside site-packages.

    Scripts (outside site-packages) are left out: pip writes them again from entry_points.txt.
    Compression is light: these wheels travel once over a fast link and are unpacked at once.
    """
    wheel = folder / wheel_name(dist)
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for rel in dist.files or []:
            path = Path(dist.locate_file(rel))
            if rel.parts[0] == ".." or "__pycache__" in rel.parts or not path.is_file():
                continue
            if rel.parts[0].endswith(".dist-info") and rel.name in _SKIPPED_METADATA:
                continue
            zf.write(path, rel.as_posix())
    return wheel


def _build(source: Path, folder: Path) -> Path:
    """`pip wheel` of the source tree: with the build tools installed here when they work (no download),
    else in pip's isolated build environment."""
    from fray.remote.errors import RemoteError

    base = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check", "-w",
            str(folder), str(source)]
    failure = b""
    for argv in ([*base, "--no-build-isolation"], base):
        try:
            done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=BUILD_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as exc:
            failure = str(exc).encode()
            continue
        built = sorted(folder.glob("fray-*.whl"))
        if done.returncode == 0 and built:
            return built[0]
        failure = done.stderr
    raise RemoteError(f"building a wheel of fray from {source} to install on the remote failed: "
                      f"{failure.decode(errors='replace').strip()[-1500:]}")


def _source_tree() -> Path | None:
    """The source tree this fray runs from (an editable or dev install), or None for an installed wheel."""
    source = Path(__file__).resolve().parents[2]  # shepherd/remote/wheels.py -> the source tree, if any
    return source if (source / "pyproject.toml").is_file() else None


def _source_hash(source: Path) -> str:
    digest = hashlib.sha256()
    paths = [source / name for name in SOURCE_FILES if (source / name).is_file()]
    for folder in SOURCE_FOLDERS:
        paths += sorted(p for p in (source / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in paths:
        digest.update(path.relative_to(source).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _record_hash() -> str:
    record = importlib.metadata.distribution("fray").read_text("RECORD") or ""
    return hashlib.sha256(record.encode()).hexdigest()[:16]


def _installed(name: str) -> importlib.metadata.Distribution | None:
    try:
        return importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))
