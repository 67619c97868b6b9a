"""The architecture holds: layer contracts (import-linter), no import cycles, small modules.

The contracts live in pyproject.toml ([tool.importlinter]). They are checked on
the tree as it is installed (the `fray` package is the shepherd/ folder with
wrapper/ inside it as `fray.wrapper`), which a folder of symlinks reproduces
without building a wheel. Lazy imports inside functions count: grimp reads
every import statement, so a hidden `from fray.tui import ...` in a CLI command
breaks the contract as surely as one at the top.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
MAX_MODULE_LINES = 500


def installed_tree(root: Path) -> Path:
    """`root/fray` laid out as an install lays it out, every file a symlink into the checkout."""
    package = root / "fray"
    package.mkdir(parents=True)
    for child in (REPO / "shepherd").iterdir():
        if child.name != "__pycache__":
            (package / child.name).symlink_to(child)
    (package / "wrapper").symlink_to(REPO / "wrapper")
    (package / "schemas").symlink_to(REPO / "schemas")
    return root


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo", str(REPO / "pyproject.toml")],
                          capture_output=True, text=True, env=env, cwd=tree, timeout=300)


def with_module(tree: Path, package: str, name: str, source: str) -> None:
    """Add `fray.<package>.<name>` to the symlinked tree without touching the checkout."""
    folder = tree / "fray" / package
    real = folder.resolve()
    folder.unlink()
    folder.mkdir()
    for child in real.iterdir():
        if child.name != "__pycache__":
            (folder / child.name).symlink_to(child)
    (folder / f"{name}.py").write_text(source)


def test_the_layer_contracts_hold(tmp_path: Path) -> None:
    proc = lint_imports(installed_tree(tmp_path))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


@pytest.mark.parametrize(("package", "source", "broken"), [
    ("cli", "from fray.tui import app\n", "fray.cli.scratch -> fray.tui.app"),
    ("tui", "def later():\n    from fray.cli import main\n", "fray.tui.scratch -> fray.cli.main"),
    ("core", "from fray.state import store\n", "fray.core.scratch -> fray.state.store"),
    ("wrapper", "from fray.core import model\n", "fray.wrapper.scratch -> fray.core.model"),
    ("wrapper", "import orjson\n", "fray.wrapper.scratch -> orjson"),
])
def test_a_forbidden_import_breaks_a_contract(tmp_path: Path, package: str, source: str, broken: str) -> None:
    tree = installed_tree(tmp_path)
    with_module(tree, package, "scratch", source)
    proc = lint_imports(tree)
    assert proc.returncode == 1, proc.stdout[-4000:]
    assert broken in proc.stdout


CYCLES = """
import json, sys
import grimp
graph = grimp.build_graph("fray")
index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
sys.setrecursionlimit(10000)
def visit(module):
    index[module] = low[module] = counter[0]; counter[0] += 1
    stack.append(module); on_stack.add(module)
    for other in graph.find_modules_directly_imported_by(module):
        if other not in index:
            visit(other); low[module] = min(low[module], low[other])
        elif other in on_stack:
            low[module] = min(low[module], index[other])
    if low[module] == index[module]:
        component = []
        while True:
            member = stack.pop(); on_stack.discard(member); component.append(member)
            if member == module:
                break
        if len(component) > 1:
            found.append(sorted(component))
for module in sorted(graph.modules):
    if module not in index:
        visit(module)
print(json.dumps(found))
"""


def test_no_import_cycles(tmp_path: Path) -> None:
    """No two modules import each other, directly or through others (lazy imports included)."""
    tree = installed_tree(tmp_path)
    proc = subprocess.run([sys.executable, "-c", CYCLES], capture_output=True, text=True, cwd=tree,
                          env={**os.environ, "PYTHONPATH": str(tree)}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


def test_no_module_is_over_500_lines() -> None:
    long = {str(path.relative_to(REPO)): count for top in ("shepherd", "wrapper")
            for path in (REPO / top).rglob("*.py")
            if (count := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}

