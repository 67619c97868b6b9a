"""What a wheel of fray contains: one import name, `fray`, with every package and the schemas inside it.

The folders keep the design's names (shepherd/, wrapper/, schemas/) and are
installed as fray, fray.wrapper and fray.schemas: nothing generic lands at the
top level of site-packages.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import REPO


FOLDER_PACKAGES = {"shepherd": "fray", "wrapper": "fray.wrapper"}


def declared_packages() -> set[str]:
    import tomllib

    return set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])


def test_every_package_directory_is_declared():
    found = {".".join([FOLDER_PACKAGES[top], *p.parent.relative_to(REPO / top).parts])
             for top in FOLDER_PACKAGES for p in (REPO / top).rglob("__init__.py")}
    assert found <= declared_packages(), f"add to pyproject.toml packages: {sorted(found - declared_packages())}"


def test_the_wheel_carries_the_wrapper_probes_and_the_schemas(tmp_path: Path, fray_wheel: Path):
    wheel = fray_wheel  # built by pip from a copy of the checkout (tests/conftest.py)
    names = zipfile.ZipFile(wheel).namelist()
    assert "fray/wrapper/probes/__init__.py" in names
    schemas = {Path(n).name for n in names if n.startswith("fray/schemas/") and n.endswith(".json")}
    assert schemas == {p.name for p in (REPO / "schemas").glob("*.json")}
    assert {n.split("/")[0] for n in names if not n.startswith("fray-")} == {"fray"}

    # In a fresh environment: `import fray` and `from fray import report` work with the
    # standard library alone (no dependencies installed), the old generic names do not.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    zipfile.ZipFile(wheel).extractall(site)
    ok = subprocess.run([python, "-c", "import fray; from fray import report; print(report.__name__)"],
                        capture_output=True, text=True, cwd=tmp_path)
    assert ok.returncode == 0 and ok.stdout.strip() == "fray.wrapper.report", ok.stderr
    for generic in ("shepherd", "wrapper"):
        gone = subprocess.run([python, "-c", f"import {generic}"], capture_output=True, text=True, cwd=tmp_path)
        assert gone.returncode == 1 and f"No module named '{generic}'" in gone.stderr
