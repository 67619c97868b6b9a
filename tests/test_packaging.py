"""What a wheel of fray contains: every package, and the schemas inside it (not only in a checkout)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import REPO


def declared_packages() -> set[str]:
    text = (REPO / "pyproject.toml").read_text()
    line = re.search(r"^packages = \[(.*)\]$", text, re.MULTILINE)
    assert line, "pyproject.toml lists its packages on one `packages = [...]` line"
    return set(re.findall(r'"([^"]+)"', line.group(1)))


def test_every_package_directory_is_declared():
    found = {".".join(p.parent.relative_to(REPO).parts) for top in ("shepherd", "wrapper")
             for p in (REPO / top).rglob("__init__.py")}
    assert found <= declared_packages(), f"add to pyproject.toml packages: {sorted(found - declared_packages())}"


def test_the_wheel_carries_the_wrapper_probes_and_the_schemas(tmp_path: Path):
    source = tmp_path / "src"  # a copy, so the build leaves nothing in the checkout
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".git", "*.egg-info", "build", "__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-2000:]
    names = zipfile.ZipFile(next(tmp_path.glob("fray-*.whl"))).namelist()
    assert "wrapper/probes/__init__.py" in names
    schemas = {Path(n).name for n in names if n.startswith("shepherd/schemas/") and n.endswith(".json")}
    assert schemas == {p.name for p in (REPO / "schemas").glob("*.json")}
