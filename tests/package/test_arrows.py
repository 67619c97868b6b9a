"""The arrows import-linter cannot see, drawn and checked: package loops, spawned modules, dynamic imports, and
the wrapper's one face.

- No loop between packages (fray.daemon -> fray.actors -> fray.cluster -> fray.daemon was one), counting the
  imports inside functions: grimp reads every import statement.
- A process started as `python -m fray.x` (found by ast: a list with "-m" and the module after it) and a module
  loaded by `importlib.import_module` are arrows too: each goes down the layers of pyproject.toml's first
  contract, stays in its package, or is declared below with its reason. One this test cannot read fails it.
- Outside fray.wrapper, only its face is imported: fray.wrapper.face, the attempt's contract (fray.wrapper.contract)
  and `report`, the module a job imports (fray.report); the warm worker aside (WRAPPER_INSIDE).
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
from test_architecture import installed_tree

# Arrows that go up or across the layers, on purpose: (from, to) -> why.
DECLARED = {
    ("fray.cli.main", "fray.tui.entry"):
        "`fray tui` and `fray web` are commands of the one fray program: click loads the dashboard's module by "
        "name only when one of them runs, so no other command imports textual",
    ("fray.tui.web", "fray"):
        "each browser tab runs the fray command (`python -m fray tui`), a program, as a person would",
    ("fray.remote.clusters", "fray"):
        "a many-cluster view asks this machine as it asks a host over SSH: the fray command, its --json answer",
}
# Spawns and dynamic imports whose module is not fray's: where -> what it is.
NOT_FRAYS = {
    "fray.wrapper.attempt": "`--module`: the workload's own module, `python -m MODULE`",
    "fray.wrapper.warm_imports": "standard-library modules a workload named (learn() keeps only those)",
}
# A dynamic import whose names come from a table: where it is called -> the module that holds the table.
FACE = {"fray.wrapper.face", "fray.wrapper.contract", "fray.wrapper.report"}
# Not the login side: processes that are the wrapper itself, forked (what each runs of it, it imports).
WRAPPER_INSIDE = {
    "fray.warm.worker": "imports the whole wrapper once, then forks wrappers from itself (fray.wrapper.main)",
}
TABLES = {
    "fray": "fray",  # fray.__all__, loaded on first use (PEP 562)
    "fray.cli.main": "fray.cli.main",  # the lazy subcommands
    "fray.cli.remote_output": "fray.cli.remote_output",  # the renderers of a remote command's JSON
    "fray.backends": "fray.core.backend_names",  # a backend by its name
}


def module_files() -> dict[str, Path]:
    """fray's module names -> their files, as installed (shepherd/ is fray, wrapper/ is fray.wrapper)."""
    found = {}
    for top, prefix in (("shepherd", ["fray"]), ("wrapper", ["fray", "wrapper"])):
        for path in (REPO / top).rglob("*.py"):
            parts = [*prefix, *path.relative_to(REPO / top).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def package_of(module: str) -> str:
    """The package an arrow is judged by: fray.x for fray.x.y..., fray itself for the top-level module."""
    return ".".join(module.split(".")[:2])


def layers() -> list[set[str]]:
    """The layers of the packages contract, top first: each a set of fray.x names."""
    contract = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    return [{f"fray.{name.strip(' ()')}" for name in layer.replace(":", "|").split("|")} for layer in contract["layers"]]


def allowed(source: str, target: str) -> bool:
    """Whether the arrow keeps the layers: inside a package, down them, or to the wrapper (a program of its own,
    started on the node by whoever runs attempts; what imports it is import-linter's to check)."""
    ours, theirs = package_of(source), package_of(target)
    if ours == theirs or theirs in {"fray.wrapper", "fray.errors", "fray.version"} or ours == "fray":
        return True
    rank = {package: index for index, layer in enumerate(layers()) for package in layer}
    return ours in rank and theirs in rank and rank[theirs] > rank[ours]


def _constants(tree: ast.Module) -> dict[str, str]:
    """The module's top-level NAME = "text" assignments."""
    return {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            for target in node.targets if isinstance(target, ast.Name)}


def _imported_modules(tree: ast.Module) -> dict[str, str]:
    """Local names bound to fray modules: `from fray.x import y` (y a module) and `import fray.x as y`."""
    files = module_files()
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if f"{node.module}.{alias.name}" in files:
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            bound.update({alias.asname: alias.name for alias in node.names if alias.asname and alias.name in files})
    return bound


def _resolve(node: ast.expr, module: str, constants: dict[str, str], imported: dict[str, str]) -> str | None:
    """The module name `node` evaluates to, when the source says it plainly; None when it does not."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return module if node.id in {"__name__", "__package__"} else constants.get(node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in imported:
        source = imported[node.value.id]
        return _constants(ast.parse(module_files()[source].read_text())).get(node.attr)
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.FormattedValue) \
            and isinstance(node.values[0].value, ast.Name) and node.values[0].value.id in {"__name__", "__package__"}:
        return module  # f"{__name__}.{part}": a module of its own package
    return None


def _table(module: str) -> list[str]:
    """The fray modules a table of `module` names ("fray.x.y" or "fray.x.y:attribute"), docstrings aside."""
    files = module_files()
    return sorted({node.value.partition(":")[0] for node in ast.walk(ast.parse(files[module].read_text()))
                   if isinstance(node, ast.Constant) and isinstance(node.value, str)
                   and node.value.partition(":")[0] in files and node.value.startswith("fray.")})


def arrows(module: str, source: str) -> tuple[set[tuple[str, str, str]], list[str]]:
    """(from, to, kind) for each spawn and dynamic import in `source`, and what could not be read."""
    tree = ast.parse(source)
    constants, imported = _constants(tree), _imported_modules(tree)
    found: set[tuple[str, str, str]] = set()
    unread: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)):
            items = node.elts
            for at, item in enumerate(items[:-1]):
                if isinstance(item, ast.Constant) and item.value == "-m":
                    target = _resolve(items[at + 1], module, constants, imported)
                    if target is None:
                        unread.append(f"{module}: -m {ast.unparse(items[at + 1])}")
                    elif target == "fray" or target.startswith("fray."):
                        found.add((module, target, "spawn"))
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in {"importlib.import_module", "import_module",
                                                                        "__import__"}:
            target = _resolve(node.args[0], module, constants, imported) if node.args else None
            if target is not None:
                found.add((module, target, "import"))
            elif module in TABLES:
                found |= {(module, name, "import") for name in _table(TABLES[module])}
            else:
                unread.append(f"{module}: {ast.unparse(node)}")
    return found, [line for line in unread if line.partition(":")[0] not in NOT_FRAYS]


def every_arrow() -> tuple[set[tuple[str, str, str]], list[str]]:
    found: set[tuple[str, str, str]] = set()
    unread: list[str] = []
    for module, path in sorted(module_files().items()):
        more, cannot = arrows(module, path.read_text())
        found |= more
        unread += cannot
    return found, unread


def test_every_spawned_module_and_dynamic_import_keeps_the_layers_or_is_declared() -> None:
    found, unread = every_arrow()
    assert unread == [], "a spawn or dynamic import this test cannot read: name its module plainly"
    assert {target for _, target, _ in found} <= {*module_files(), "fray"}, "a spawn of a module that is not there"
    breaking = {(source, target) for source, target, _ in found if not allowed(source, target)}
    assert breaking - DECLARED.keys() == set(), "declare it in DECLARED with its reason, or move it"
    assert DECLARED.keys() - breaking == set(), "declared, but no longer there (or no longer breaking)"


def test_the_spawns_and_dynamic_imports_are_found() -> None:
    """What the scan sees in the tree today: the warm worker, the daemon, the wrapper, the lazy commands."""
    found, _ = every_arrow()
    assert ("fray.warm.daemon_side", "fray.warm.worker", "spawn") in found  # through its MODULE constant
    assert ("fray.daemon.lease", "fray.daemon", "spawn") in found
    assert ("fray.backends.wrapper_command", "fray.wrapper", "spawn") in found
    assert ("fray.cli.main", "fray.tui.entry", "import") in found  # from the lazy table
    assert ("fray.backends", "fray.backends.slurm.backend", "import") in found  # a table in another module


@pytest.mark.parametrize(("module", "source", "arrow"), [
    ("fray.backends.scratch", 'import subprocess, sys\nsubprocess.run([sys.executable, "-m", "fray.cli.main"])\n',
     ("fray.backends.scratch", "fray.cli.main")),
    ("fray.state.scratch", 'import importlib\nimportlib.import_module("fray.daemon.loop")\n',
     ("fray.state.scratch", "fray.daemon.loop")),
    ("fray.backends.scratch", 'MODULE = "fray.ops.submit"\ndef go(py):\n    return [py, "-m", MODULE]\n',
     ("fray.backends.scratch", "fray.ops.submit")),
    ("fray.cli.scratch", 'from importlib import import_module\nimport_module("fray.tui.app")\n',
     ("fray.cli.scratch", "fray.tui.app")),  # front ends side by side
])
def test_a_spawn_or_dynamic_import_up_the_layers_is_caught(module: str, source: str, arrow: tuple[str, str]) -> None:
    found, unread = arrows(module, source)
    assert unread == []
    assert {(s, t) for s, t, _ in found} == {arrow}
    assert not allowed(*arrow)


def test_a_spawn_this_test_cannot_read_is_caught() -> None:
    _, unread = arrows("fray.daemon.scratch", "import sys\ndef go(name):\n    return [sys.executable, '-m', name]\n")
    assert unread == ["fray.daemon.scratch: -m name"]


PACKAGE_LOOPS = """
import json, sys
import grimp
graph = grimp.build_graph("fray")
def package(module):
    return ".".join(module.split(".")[:2])
edges = {}
for module in graph.modules:
    for other in graph.find_modules_directly_imported_by(module):
        if package(module) != package(other):
            edges.setdefault(package(module), set()).add(package(other))
index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
def visit(node):
    index[node] = low[node] = counter[0]; counter[0] += 1
    stack.append(node); on_stack.add(node)
    for other in edges.get(node, ()):
        if other not in index:
            visit(other); low[node] = min(low[node], low[other])
        elif other in on_stack:
            low[node] = min(low[node], index[other])
    if low[node] == index[node]:
        component = []
        while True:
            member = stack.pop(); on_stack.discard(member); component.append(member)
            if member == node:
                break
        if len(component) > 1:
            found.append(sorted(component))
for node in sorted(edges):
    if node not in index:
        visit(node)
print(json.dumps(found))
"""


def package_loops(tree: Path) -> list[list[str]]:
    proc = subprocess.run([sys.executable, "-c", PACKAGE_LOOPS], capture_output=True, text=True, cwd=tree,
                          env={**os.environ, "PYTHONPATH": str(tree)}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_no_package_imports_a_package_that_imports_it_back(tmp_path: Path) -> None:
    """Packages (fray.daemon, fray.cluster, ... and the top-level fray) form no loop, lazy imports included."""
    assert package_loops(installed_tree(tmp_path)) == []


def test_a_package_loop_through_a_lazy_import_is_caught(tmp_path: Path) -> None:
    from test_architecture import with_module

    tree = installed_tree(tmp_path)
    with_module(tree, "daemon", "scratch", "def later():\n    from fray.cluster import api\n")
    assert package_loops(tree) == [["fray.cluster", "fray.daemon"]]


WRAPPER_FACE = """
import json
import grimp
graph = grimp.build_graph("fray")
print(json.dumps(sorted({f"{m} -> {o}" for m in graph.modules if not m.startswith("fray.wrapper")
                         for o in graph.find_modules_directly_imported_by(m) if o.startswith("fray.wrapper")})))
"""


def behind_the_face(tree: Path) -> list[str]:
    """The imports of a wrapper module that is not its face, from outside the wrapper and its forks."""
    proc = subprocess.run([sys.executable, "-c", WRAPPER_FACE], capture_output=True, text=True, cwd=tree,
                          env={**os.environ, "PYTHONPATH": str(tree)}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return [arrow for arrow in json.loads(proc.stdout)
            if arrow.split(" -> ")[1] not in FACE and arrow.split(" -> ")[0] not in WRAPPER_INSIDE]


def test_outside_the_wrapper_only_its_face_is_imported(tmp_path: Path) -> None:
    assert behind_the_face(installed_tree(tmp_path)) == [], "import it through fray.wrapper.face"


def test_an_import_behind_the_face_is_caught(tmp_path: Path) -> None:
    from test_architecture import with_module

    tree = installed_tree(tmp_path)
    with_module(tree, "cluster", "scratch", "def later():\n    from fray.wrapper import fence\n")
    assert "fray.cluster.scratch -> fray.wrapper.fence" in behind_the_face(tree)
