"""What a new run runs: its code snapshot, where it starts in it, and which Python runs it; settled at submit.

From `--code`, `--python`, `--venv`, `--conda`, `--workdir` and `-m`, given as
flags (relative to where fray was run) or as `#FRAY` lines (relative to the
script's folder), this decides the RunSpec fields `python`, `python_env`,
`module` and `workdir` and which project to snapshot (`settle`), then takes
the snapshot for `code` (`Settled.snapshot`, fray.state.snapshots) once the
other submit checks have passed. Everything that can be checked here is: a
missing interpreter, a venv without bin/python, an unknown conda env, a --code
folder that does not hold the script. A mistake is a UsageError before
anything is written, never an attempt that fails on the node.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any, NamedTuple

from fray.core.directive_options import SUBMIT_SETTLED
from fray.errors import UsageError
from fray.state import snapshots
from fray.state.layout import Home

FIELDS = SUBMIT_SETTLED  # set with a flag or a `#FRAY` line, settled here into the spec
CODE_NONE = "none"
CONDA_TIMEOUT_SEC = 30.0


class Given(NamedTuple):
    """One of FIELDS as the user gave it: its text, and the folder a relative path is taken from."""

    value: str
    base: Path

    def path(self) -> Path:
        return Path(os.path.abspath(os.path.join(self.base, os.path.expanduser(self.value))))


def module_script(module: str, root: Path) -> Path:
    """The file `python -m module` would run from the project at `root` (or its src/); UsageError if none."""
    parts = module.split(".")
    if not all(part.isidentifier() for part in parts):
        raise UsageError(f"-m {module}: not a module name (like pkg.train)")
    tried = []
    for top in (root, root / "src"):
        for candidate in (top.joinpath(*parts).with_suffix(".py"), top.joinpath(*parts, "__main__.py")):
            tried.append(candidate)
            if candidate.is_file():
                return candidate
    raise UsageError(f"-m {module}: no such module in {root} (looked for "
                     f"{', '.join(str(p.relative_to(root)) for p in tried)}); run fray from the project's top "
                     "folder or name it with --code DIR")


def module_root(given_code: str | None, cwd: Path, home: Home) -> Path:
    """The project `-m MODULE` is looked for in: --code's folder, else the project holding `cwd`."""
    if given_code not in (None, CODE_NONE):
        return Given(given_code, cwd).path()
    return snapshots.project_root(cwd, home.root)


class Settled(NamedTuple):
    """A run's interpreter and working directory, and the project to snapshot (None: --code none)."""

    fields: dict[str, Any]  # the spec's python, python_env, module, workdir
    root: Path | None
    entry: str | None  # the script, relative to root; None with -m
    cwd: str | None  # the working directory inside the snapshot; None: fields["workdir"]

    def snapshot(self, home: Home, force: bool = False) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """Take the project's snapshot: the spec's `code` (None to run in place), and the record of what it
        left out (runs/<id>/left-out.json; None when nothing was)."""
        if self.root is None:
            return None, None
        taken = snapshots.take(home, self.root, force=force)
        record = taken.left_out.record(self.root) if taken.left_out.entries else None
        return {**taken.to_dict(), "entry": self.entry, "cwd": self.cwd}, record


def settle(home: Home, script: Path, module: str | None, given: dict[str, Given], cwd: Path) -> Settled:
    """The interpreter, working directory and project of a run of `script` (the module's file with -m);
    UsageError on anything that cannot work. Nothing is written: the snapshot is `Settled.snapshot`."""
    fields: dict[str, Any] = {"module": module, **_interpreter(script, module, given)}
    explicit_workdir = given["workdir"].path() if "workdir" in given else None
    if explicit_workdir is not None and not explicit_workdir.is_dir():
        raise UsageError(f"--workdir {given['workdir'].value}: {explicit_workdir} is not a folder")
    fields["workdir"] = str(explicit_workdir or cwd)
    code = given.get("code")
    if code is not None and code.value == CODE_NONE:
        return Settled(fields, None, None, None)
    if code is not None:
        root = code.path()
        if not root.is_dir():
            raise UsageError(f"--code {code.value}: {root} is not a folder (give the project's folder, or none "
                             "to run the script where it is)")
    elif module is not None:
        root = module_root(None, cwd, home)
    else:
        root = snapshots.project_root(script.resolve().parent, home.root)
    root = root.resolve()
    entry = script.resolve()
    if root != entry.parent and root not in entry.parents:
        raise UsageError(f"the script {script} is not inside --code {root}; give the folder that holds it")
    here = cwd.resolve()
    inside = here == root or root in here.parents
    # Started where it was submitted from, mapped into the snapshot; from the top when that was elsewhere.
    start = None if explicit_workdir is not None else (here.relative_to(root).as_posix() if inside else ".")
    return Settled(fields, root, None if module else entry.relative_to(root).as_posix(), start)


def _interpreter(script: Path, module: str | None, given: dict[str, Given]) -> dict[str, Any]:
    chosen = [name for name in ("python", "venv", "conda") if name in given]
    if len(chosen) > 1:
        raise UsageError(f"{' and '.join('--' + name for name in chosen)} each choose the interpreter; give one")
    if "python" in given:
        return {"python": _executable(given["python"]), "python_env": None}
    if "venv" in given:
        prefix = given["venv"].path()
        python = prefix / "bin" / "python"
        if not os.access(python, os.X_OK):
            raise UsageError(f"--venv {given['venv'].value}: {prefix} has no bin/python; give the folder of a "
                             "virtual environment (python -m venv DIR makes one)")
        return {"python": str(python), "python_env": str(prefix)}
    if "conda" in given:
        prefix = _conda_prefix(given["conda"].value)
        return {"python": str(prefix / "bin" / "python"), "python_env": str(prefix)}
    if module is None and _has_shebang(script):
        return {"python": None, "python_env": None}  # fray.backends.offers checks it is here (local backend)
    if module is None and script.suffix.lower() != ".py":
        return {"python": None, "python_env": None}
    # A Python script with no #! line: the python3 the user would have typed, from their PATH.
    return {"python": shutil.which("python3") or sys.executable, "python_env": None}


def _executable(given: Given) -> str:
    value = given.value
    found = shutil.which(value) if os.sep not in value else None
    path = Path(found) if found else given.path()
    if not path.exists():
        raise UsageError(f"--python {value}: no such interpreter ({path}); give the path of a python "
                         "executable, or use --venv DIR")
    if path.is_dir() or not os.access(path, os.X_OK):
        raise UsageError(f"--python {value}: {path} is not an executable file")
    return str(Path(os.path.abspath(path)))


def _conda_prefix(name: str) -> Path:
    if os.sep in name:
        prefix = Path(os.path.abspath(os.path.expanduser(name)))
    else:
        conda = os.environ.get("CONDA_EXE") or shutil.which("conda")
        if not conda:
            raise UsageError(f"--conda {name}: conda is not on PATH here; give the env's folder "
                             "(--conda /path/to/env) or --python PATH")
        import json
        import subprocess  # only --conda NAME runs a command: a plain submit's start loads neither

        try:
            done = subprocess.run([conda, "env", "list", "--json"], capture_output=True, timeout=CONDA_TIMEOUT_SEC)
            envs = [Path(p) for p in json.loads(done.stdout)["envs"]]
        except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"--conda {name}: `conda env list` failed ({exc}); give the env's folder") from None
        named = [p for p in envs if p.name == name]
        if not named:
            known = ", ".join(p.name for p in envs) or "none"
            raise UsageError(f"--conda {name}: no such conda env (known: {known})")
        prefix = named[0]
    if not os.access(prefix / "bin" / "python", os.X_OK):
        raise UsageError(f"--conda {name}: {prefix} has no bin/python")
    return prefix


def _has_shebang(script: Path) -> bool:
    """Whether the script's first line starts with `#!`, as the wrapper reads it (fray.wrapper.workload): its
    first two bytes, read here without loading the wrapper's launcher (argparse, process tags)."""
    try:
        with open(script, "rb") as handle:
            return handle.read(2) == b"#!"
    except OSError:
        return False
