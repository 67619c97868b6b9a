"""Virtual environments for EnvironmentConfig, cached in FRAY_HOME by the hash of their requirements.

`ensure(home, key, requirements)` returns the environment's Python, building
it the first time: under the lock `locks/venv-<key>.lock`, in place at
`venvs/<key>` (virtual environments are not relocatable), with `uv` when it is
on PATH, else `python -m venv` and pip. The marker `fray-venv.json` is written
last, so a folder without it is a build that died and is made again. Later
attempts and runs asking for the same requirements reuse it at once.

Environments see the packages of the Python that builds them: the base
interpreter's (--system-site-packages) and, when fray runs in a virtual
environment, that environment's too, through a .pth file. So fray and the very
cloudpickle that pickled a job's payload are what unpickle it; a venv made
inside a venv would otherwise see only the base interpreter's (older) copies.
"""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from fray.state import store
from fray.errors import CorruptFileError, StateError
from fray.state.layout import Home

BUILD_LOCK_TIMEOUT_SEC = 3600.0


def ready(home: Home, key: str) -> bool:
    try:
        return store.read_json(home.venv_ready(key), "venv") is not None
    except CorruptFileError:
        return False


def ensure(home: Home, key: str, requirements: list[str], log: "callable[[str], None]" = print) -> Path:  # type: ignore[valid-type]
    """The Python of the environment `key`, built from `requirements` if it does not exist yet."""
    venv = home.venv(key)
    if ready(home, key):
        return home.venv_python(key)
    store.make_dirs(home.venvs_dir)
    with store.lock(home, f"venv-{key}", timeout=BUILD_LOCK_TIMEOUT_SEC):
        if ready(home, key):  # another job built it while this one waited
            return home.venv_python(key)
        if venv.exists():
            log(f"fray: removing the unfinished environment {venv}")
            shutil.rmtree(venv)
        started = time.time()
        installer = "uv" if shutil.which("uv") else "pip"
        log(f"fray: building the environment {venv} with {installer}: {' '.join(requirements)}")
        try:
            if installer == "uv":
                _run(["uv", "venv", "--quiet", "--system-site-packages", "--python", sys.executable, str(venv)])
                _inherit_packages(venv)
                _run(["uv", "pip", "install", "--quiet", "--python", str(home.venv_python(key)), *requirements])
            else:
                _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)])
                _inherit_packages(venv)
                # pip comes from the base interpreter (system site packages) and installs into the venv.
                _run([str(home.venv_python(key)), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                      "--no-input", *requirements])
        except BaseException:
            shutil.rmtree(venv, ignore_errors=True)
            raise
        store.write_json(home.venv_ready(key), {
            "key": key, "requirements": list(requirements), "python": sys.executable, "installer": installer,
            "created_at": time.time(), "build_sec": round(time.time() - started, 3)}, "venv")
        log(f"fray: environment {key} ready in {time.time() - started:.1f}s")
    return home.venv_python(key)


def _inherit_packages(venv: Path) -> None:
    """Put this interpreter's site-packages on the new environment's path, after its own."""
    if sys.prefix == sys.base_prefix:
        return  # --system-site-packages already covers it
    own = sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)})
    # addsitedir, not a bare path line: the parent's own .pth files must run too,
    # or an editable install of fray (a .pth that installs an import hook) is not seen.
    inherited = "".join(f"import site; site.addsitedir({path!r})\n" for path in site.getsitepackages())
    Path(own, "_fray_parent_packages.pth").write_text(inherited)


def _run(argv: list[str]) -> None:
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-20:])
        raise StateError(f"building the environment failed: `{' '.join(argv)}` exited {proc.returncode}:\n{tail}")
