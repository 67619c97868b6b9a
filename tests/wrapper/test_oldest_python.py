"""Every module of the wrapper imports in the oldest Python a job may bring (3.8, pyenv's where present).

The wrapper and the job-side `fray` it lends a job run in the job's own interpreter: an alias such as
`dict[str, Any]` or `collections.abc.Callable[...]`, evaluated at import, fails there with "'type' object is
not subscriptable" on the job's first `from fray import report`, and every attempt fails alike.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def oldest_python() -> str:
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.[89].*/bin/python3")))
    return found[0] if found else sys.executable


def test_every_wrapper_module_imports_in_the_oldest_python_a_job_may_have(tmp_path: Path) -> None:
    package = tmp_path / "fray"
    package.mkdir()
    shutil.copytree(REPO / "wrapper", package / "wrapper", ignore=shutil.ignore_patterns("__pycache__"))
    modules = sorted(".".join(path.relative_to(tmp_path).with_suffix("").parts).removesuffix(".__init__")
                     for path in (package / "wrapper").rglob("*.py") if path.name != "__main__.py")
    script = ("import importlib, sys\nfailed = []\nfor name in sys.argv[1:]:\n    try:\n"
              "        importlib.import_module(name)\n    except Exception as exc:\n"
              "        failed.append(f'{name}: {type(exc).__name__}: {exc}')\nprint('\\n'.join(failed))\n")
    done = subprocess.run([oldest_python(), "-c", script, *modules], capture_output=True, text=True, cwd=tmp_path,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(modules) > 40 and done.stdout.strip() == "", done.stdout
