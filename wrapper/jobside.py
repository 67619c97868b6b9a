"""`from fray import report` in any job, whatever Python runs it: the job-side helpers, importable everywhere.

A job runs in the user's own interpreter (its #! line, --python, --venv,
--conda), where fray is usually not installed. The wrapper is standard-library
only, and so is `report`; so the wrapper copies its own package, once per
version, into a folder on the node's disk as a tiny `fray` package, and puts
that folder last on the job's PYTHONPATH. Nothing in the user's environment
changes.

Where the job's Python has a real fray of its own (the cluster API, fray.submit),
the tiny package steps aside: its `__init__` finds the real one further along
sys.path and loads it in its place, so `import fray` is always the real thing
when there is one.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile

from . import records

SHIM = '''"""fray's job-side helpers, for a Python where fray is not installed (laid out by fray's wrapper)."""
import importlib.util as _util
import os as _os
import sys as _sys


def _find_real():
    # Every finder, not only sys.path: an editable install is found by its own finder on sys.meta_path.
    here = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
    saved = _sys.path[:]
    _sys.path[:] = [p for p in saved if _os.path.abspath(p or _os.curdir) != here]
    try:
        for finder in _sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(__name__, None) if find is not None else None
            if spec is not None:
                return spec
    finally:
        _sys.path[:] = saved
    return None


_real = _find_real()
if _real is not None and _real.loader is not None:  # this Python has fray itself: use it whole
    _module = _util.module_from_spec(_real)
    _sys.modules[__name__] = _module
    _real.loader.exec_module(_module)
else:
    from .wrapper import faultsignal as _faultsignal, report  # noqa: F401

    _faultsignal.arm()  # the stacks the wrapper asks for when the job hangs (fray.wrapper.stacks)

    def __getattr__(name):
        raise AttributeError(
            "fray.%s needs fray installed in the job's Python (%s); only `from fray import report` works "
            "without it: pip install fray there, or run the job with --python/--venv of an environment "
            "that has it" % (name, _sys.executable))
'''


def _own_dir() -> str:
    return os.path.dirname(os.path.abspath(__file__))


@functools.lru_cache(maxsize=1)  # once per process, as _digest: a warm worker's wrappers run what it imported
def _sources() -> tuple[str, ...]:
    """The wrapper package's modules, relative to it (probes/ included: report imports only its siblings,
    but a partial copy would break the day it imports one more)."""
    found = []
    root = _own_dir()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                found.append(os.path.relpath(os.path.join(dirpath, name), root))
    return tuple(found)


def private_tmp() -> str:
    """This user's folder in the node's temporary directory, 0700 and checked to be theirs (a folder another
    user made there first could hold code we would run)."""
    folder = os.path.join(tempfile.gettempdir(), f"fray-{os.getuid()}")
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(folder)
    if st.st_uid != os.getuid() or st.st_mode & 0o077 or not os.path.isdir(folder) or os.path.islink(folder):
        raise OSError(f"{folder} is not a private folder of this user; remove it")
    return folder


@functools.lru_cache(maxsize=1)
def _digest(sources: tuple[str, ...]) -> str:
    """The helpers' version: a hash of the wrapper's sources. Once per process: a warm worker computes it
    before it forks the wrappers that need it (fray.warm.worker); their code is what it imported."""
    digest = hashlib.sha256(SHIM.encode())
    root = _own_dir()
    for rel in sources:
        with open(os.path.join(root, rel), "rb") as handle:
            digest.update(rel.encode() + b"\0" + handle.read())
    return digest.hexdigest()[:16]


def helpers_path() -> str:
    """A folder holding the tiny `fray` package for this wrapper's version (made once per node and version)."""
    sources = _sources()
    root = _own_dir()
    folder = os.path.join(private_tmp(), "jobside-" + _digest(sources))
    if os.path.isdir(folder):
        return folder
    with records.built_folder(folder, ".jobside-") as staging:  # another wrapper on this node may win
        package = os.path.join(staging, "fray")
        for rel in sources:
            target = os.path.join(package, "wrapper", rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(os.path.join(root, rel), target)
        with open(os.path.join(package, "__init__.py"), "w") as handle:
            handle.write(SHIM)
    return folder
