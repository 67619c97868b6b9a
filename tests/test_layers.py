"""The front ends stay apart and the operations layer has no cycles, read from the source itself.

Every import counts, also one inside a function or under TYPE_CHECKING: a lazy
import is still a dependency. `cli/` and `tui/` never import each other; within
cli, tui and ops no module reaches itself again; no module grows past ~500 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "shepherd"
LAYERS = ("cli", "tui", "ops")
MAX_LINES = 500


def _module_name(path: Path) -> str:
    parts = ["fray", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The fray modules a file imports (`from fray.x import y` is fray.x.y when that is a module, else fray.x)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            # `from fray.tui import theme` imports the module fray.tui.theme (as grimp reads it)
            found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names}
    return {module for module in found if module in known and module != name}


def _graph() -> dict[str, set[str]]:
    files = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    known = set(files)
    return {name: _imports(path, name, known) for name, path in files.items()
            if name.split(".")[1:2] and name.split(".")[1] in LAYERS}


def _layer(module: str) -> str:
    return module.split(".")[1] if module.count(".") else ""


def test_the_cli_and_the_dashboard_never_import_each_other():
    crossing = sorted(f"{module} -> {imported}" for module, imports in _graph().items() for imported in imports
                      if {_layer(module), _layer(imported)} == {"cli", "tui"})
    assert not crossing, crossing


def test_no_import_cycles_in_cli_tui_and_ops():
    graph = _graph()

    def reaches(start: str, target: str) -> list[str] | None:
        seen, stack = {start}, [[start]]
        while stack:
            path = stack.pop()
            for nxt in sorted(graph.get(path[-1], ())):
                if nxt == target:
                    return path + [nxt]
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(path + [nxt])
        return None

    cycles = [" -> ".join(chain) for module in sorted(graph) if (chain := reaches(module, module))]
    assert not cycles, cycles


@pytest.mark.parametrize("layer", LAYERS)
def test_no_module_grows_past_a_few_hundred_lines(layer):
    sizes = {str(path.relative_to(PACKAGE)): len(path.read_text().splitlines())
             for path in (PACKAGE / layer).rglob("*.py")}
    assert {path: lines for path, lines in sizes.items() if lines > MAX_LINES} == {}


def test_the_ops_layer_imports_no_front_end():
    leaks = sorted(f"{module} -> {imported}" for module, imports in _graph().items() for imported in imports
                   if _layer(module) == "ops" and _layer(imported) in ("cli", "tui"))
    assert not leaks, leaks
