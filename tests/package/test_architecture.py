"""The architecture holds: layer contracts (import-linter), no import cycles, small modules, no private name
of one module used by another.

The contracts live in pyproject.toml ([tool.importlinter]). They are checked on
the tree as it is installed (the `fray` package is the shepherd/ folder with
wrapper/ inside it as `fray.wrapper`), which a folder of symlinks reproduces
without building a wheel. Lazy imports inside functions count: grimp reads
every import statement, so a hidden `from fray.tui import ...` in a CLI command
breaks the contract as surely as one at the top.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import REPO

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80  # docs/architecture.md: a function a newcomer reads in one screen


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


def with_import_added(tree: Path, package: str, name: str, line: str) -> None:
    """`fray.<package>.<name>`, an existing module, with one more import: a copy, the checkout untouched."""
    real = (REPO / "shepherd" / package / f"{name}.py").read_text()
    with_module(tree, package, f"{name}_copy", "")  # the folder of symlinks (the copy's name is a placeholder)
    folder = tree / "fray" / package
    (folder / f"{name}_copy.py").unlink()
    (folder / f"{name}.py").unlink()  # a symlink: writing through it would change the checkout
    (folder / f"{name}.py").write_text(real + line)


def contracts() -> list[dict]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_the_layer_contracts_are_there_and_hold(tmp_path: Path) -> None:
    front_ends = [c for c in contracts() if c["type"] == "forbidden" and set(c["source_modules"]) == {"fray.cli", "fray.tui"}]
    assert front_ends, "no contract keeps the front ends to ops"
    assert {"fray.state", "fray.daemon", "fray.backends", "fray.cluster", "fray.actors", "fray.remote",
            "fray.wrapper"} <= set(front_ends[0]["forbidden_modules"])
    inside_core = [c["layers"] for c in contracts() if c["type"] == "layers" and c.get("containers") == ["fray.core"]]
    assert any(layers[:2] == ["policy", "budgets"] and layers[-1] == "model" for layers in inside_core), inside_core
    assert any(layers[0] == "directives" for layers in inside_core), inside_core

    proc = lint_imports(installed_tree(tmp_path))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout
    report = " ".join(proc.stdout.split())  # lint-imports wraps long names
    for contract in contracts():
        assert f"{' '.join(contract['name'].split())} KEPT" in report, contract["name"]


@pytest.mark.parametrize(("package", "source", "broken"), [
    ("cli", "from fray.tui import app\n", "fray.cli.scratch -> fray.tui.app"),
    ("tui", "def later():\n    from fray.cli import main\n", "fray.tui.scratch -> fray.cli.main"),
    ("core", "from fray.state import store\n", "fray.core.scratch -> fray.state.store"),
    ("wrapper", "from fray.core import model\n", "fray.wrapper.scratch -> fray.core.model"),
    ("wrapper", "import orjson\n", "fray.wrapper.scratch -> orjson"),
    ("cli", "from fray.state import runs\n", "fray.cli.scratch -> fray.state.runs"),
    ("tui", "def later():\n    from fray.daemon import lease\n", "fray.tui.scratch -> fray.daemon.lease"),
    ("tui", "from fray.remote import forward\n", "fray.tui.scratch -> fray.remote.forward"),
])
def test_a_forbidden_import_breaks_a_contract(tmp_path: Path, package: str, source: str, broken: str) -> None:
    tree = installed_tree(tmp_path)
    with_module(tree, package, "scratch", source)
    proc = lint_imports(tree)
    assert proc.returncode == 1, proc.stdout[-4000:]
    assert broken in proc.stdout


def test_what_a_front_end_may_import_keeps_the_contracts(tmp_path: Path) -> None:
    tree = installed_tree(tmp_path)
    with_module(tree, "cli", "scratch", "import fray\nfrom fray.ops import lookup\nfrom fray.core import status\n"
                "from fray.errors import UsageError\nfrom fray.state.layout import Home\nfrom fray.remote import forward\n")
    proc = lint_imports(tree)
    assert proc.returncode == 0, proc.stdout[-4000:]


@pytest.mark.parametrize(("module", "line", "broken"), [
    ("run_plan", "from fray.core import policy\n", "fray.core.run_plan -> fray.core.policy"),
    ("status", "from fray.core import budgets\n", "fray.core.status -> fray.core.budgets"),
    ("status", "from fray.core import scheduler\n", "fray.core.status -> fray.core.scheduler"),  # side by side
    ("model", "from fray.core import directives\n", "fray.core.model -> fray.core.directives"),
])
def test_a_core_module_importing_above_its_layer_breaks_a_contract(tmp_path: Path, module: str, line: str,
                                                                   broken: str) -> None:
    tree = installed_tree(tmp_path)
    with_import_added(tree, "core", module, line)
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


def long_functions(source: str, name: str = "<source>") -> dict[str, int]:
    """`file:line name` -> length, of every function or method (nested ones too) over MAX_FUNCTION_LINES, its
    decorators and docstring included: what a reader has to hold at once."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if (length := node.end_lineno - first + 1) > MAX_FUNCTION_LINES:  # type: ignore[operator]
                found[f"{name}:{node.lineno} {node.name}"] = length
    return found


# What a test of a layer may import of fray: that layer and those below it. tests/core is the one checked here: the
# pure core is tested as values, without the state, a backend or a front end.
CORE_TESTS_MAY_IMPORT = ("fray.core", "fray.errors", "fray.wrapper.contract")


def test_the_core_tests_import_nothing_above_the_core() -> None:
    above = {}
    for path in sorted((REPO / "tests" / "core").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module == "fray.wrapper":
                names = [f"fray.wrapper.{alias.name}" for alias in node.names]
            for name in names:
                if name.startswith("fray") and not name.startswith(CORE_TESTS_MAY_IMPORT):
                    above.setdefault(str(path.relative_to(REPO)), []).append(name)
    assert above == {}


def test_no_function_is_over_80_lines() -> None:
    long = {key: length for top in ("shepherd", "wrapper") for path in sorted((REPO / top).rglob("*.py"))
            for key, length in long_functions(path.read_text(), str(path.relative_to(REPO))).items()}
    assert long == {}


def test_the_function_cap_counts_methods_nested_functions_and_decorators() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES - 1))
    fits = f"def ok():\n{body}"
    assert long_functions(fits) == {}
    assert long_functions(f"@decorated\n{fits}") == {"<source>:2 ok": MAX_FUNCTION_LINES + 1}
    method = "class C:\n" + "".join(f"    {line}\n" for line in f"def m(self):\n{body}    y = 1".splitlines())
    assert long_functions(method) == {"<source>:2 m": MAX_FUNCTION_LINES + 1}
    nested = "def outer():\n" + "".join(f"    {line}\n" for line in f"def inner():\n{body}    y = 1".splitlines())
    assert set(long_functions(nested)) == {"<source>:1 outer", "<source>:2 inner"}



# Private names of other libraries, used on purpose (each says why where it is used).
THEIRS = {
    ("shepherd/tui/widgets/virtual.py", "widget._scroll_update"),  # Textual's own no-layout path
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_names_crossing(source: str) -> list[str]:
    """Private names (`_x`) this module uses but does not define: imported from fray, or read off a fray
    module or another object. `self._x`, `cls._x`, `super()._x` and other libraries' modules (`os._exit`)
    are their own affair."""
    tree = ast.parse(source)
    theirs: set[str] = set()  # names bound to modules that are not fray's
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            theirs |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] != "fray"}
        elif isinstance(node, ast.ImportFrom):
            ours = node.level > 0 or (node.module or "").split(".")[0] == "fray"
            if not ours:
                theirs |= {a.asname or a.name for a in node.names}
            found += [f"from {node.module} import {a.name}" for a in node.names if ours and _private(a.name)]
    defined = {name for node in ast.walk(tree) for name in _bound(node) if _private(name)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _private(node.attr) or node.attr in defined:
            continue
        base = node.value
        if isinstance(base, ast.Name) and base.id in {"self", "cls", *theirs}:
            continue
        if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super":
            continue
        found.append(ast.unparse(node))
    return found


def _bound(node: ast.AST) -> list[str]:
    """The names `node` defines in its module: a function, a class, a variable, an attribute set, an argument."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        return [node.id]
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
        return [node.attr]
    return [node.arg] if isinstance(node, ast.arg) else []


def test_no_private_name_crosses_a_module() -> None:
    crossing = {(str(path.relative_to(REPO)), use) for top in ("shepherd", "wrapper")
                for path in (REPO / top).rglob("*.py") for use in private_names_crossing(path.read_text())}
    assert crossing - THEIRS == set()


@pytest.mark.parametrize(("source", "found"), [
    ("from fray.state.runs import _read\n", ["from fray.state.runs import _read"]),
    ("from .runs import _read\n", ["from runs import _read"]),
    ("from fray.state import runs\nruns._read(1)\n", ["runs._read"]),
    ("def f(cluster):\n    cluster._family()\n", ["cluster._family"]),
    ("class A:\n    def f(self):\n        self._pool._alive()\n", ["self._pool._alive"]),
    ("import os\nimport atexit\natexit._run_exitfuncs()\nos._exit(0)\n", []),
    ("class A:\n    def __init__(self):\n        self._n = 1\n    def same(self, other):\n"
     "        return other._n == self._n\n", []),
    ("class B(A):\n    def f(self):\n        return super()._f() + self._g\n", []),
])
def test_the_private_name_scan_finds_what_crosses(source: str, found: list[str]) -> None:
    assert private_names_crossing(source) == found


# A module name repeated across packages means one concept, each package's side of it (state/runs.py and
# ops/runs.py are both about runs). A name that meant two things (backends/base.py and cluster/base.py,
# core/placement/groups.py and state/groups.py) was renamed; a new repeat is added here only when it is
# the same concept.
SAME_CONCEPT = {
    "__init__": "a package", "__main__": "`python -m` of a package", "audit": "the audit log",
    "backend": "a backend's Backend", "clusters": "many clusters in one view", "config": "config.json",
    "curves": "a run's metric curves", "detail": "one run in full", "entry": "an entry point",
    "errors": "errors", "family": "families of the cluster API", "history": "a run's progress history",
    "logs": "a run's output", "lookup": "finding what a person named (a run, a group)", "main": "a program's main", "nodes": "nodes and the blacklist",
    "parse": "a backend's command output read", "partitions": "Slurm partitions", "queue": "the queue",
    "runs": "runs", "settings": "a live run's safe settings", "strays": "processes a closed attempt left",
    "submit": "submitting a run", "sweeps": "sweeps", "tpu": "TPUs", "usage": "resource use",
    "values": "directive values",
}


def test_a_repeated_module_name_means_one_concept() -> None:
    seen: dict[str, list[str]] = {}
    for top in ("shepherd", "wrapper"):
        for path in (REPO / top).rglob("*.py"):
            seen.setdefault(path.stem, []).append(str(path.relative_to(REPO)))
    repeated = {name: sorted(paths) for name, paths in seen.items() if len(paths) > 1 and name not in SAME_CONCEPT}
    assert repeated == {}
