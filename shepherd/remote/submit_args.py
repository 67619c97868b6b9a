"""A remote submit's argv: where SCRIPT stands in it, and SCRIPT named inside the synced copy.

`fray submit --remote HOST train.py` syncs the current folder and runs the
remote `fray submit` from the synced copy with SCRIPT as an absolute path inside
that copy, so the remote side sees the script in the project it belongs to (the
copy's root holds the sync manifest, `.fray-sync.json`) whatever folder it
starts from. Pure: argv and paths in, argv out.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from fray.core import directives
from fray.core.command_line import SEPARATOR
from fray.errors import UsageError

MODULE_OPTIONS = frozenset({"-m", "--module"})
# Options of `fray submit` (and the global --home) that take a value as the next word.
VALUE_OPTIONS = frozenset({o.flag for o in directives.OPTIONS if not o.is_flag} | {"--sweep", "--max-parallel",
                                                                                  "--home"})


def script_index(argv: list[str]) -> int | None:
    """The index of SCRIPT in `[GLOBAL OPTIONS] submit [OPTIONS] SCRIPT ...`, or None (no script, or not a submit).

    Unknown options are taken for flags: a value option added later without being listed here
    would be mistaken for the script, so VALUE_OPTIONS is built from the directive table.
    """
    seen_submit = False
    index = 0
    while index < len(argv):
        word = argv[index]
        if word == SEPARATOR or (seen_submit and word in MODULE_OPTIONS):
            return None  # -m MODULE: the module is found in the synced copy, there is no script to rename
        if word.startswith("-") and word != "-":
            index += 2 if word in VALUE_OPTIONS else 1
            continue
        if not seen_submit:
            if word != "submit":
                return None
            seen_submit = True
        else:
            return index
        index += 1
    return None


def locate(argv: list[str], project: Path, cwd: Path) -> tuple[int, tuple[str, ...]] | None:
    """(SCRIPT's index in argv, its path's parts relative to `project`), or None when argv names no script.

    A script outside the synced project cannot run there: refused before anything is copied.
    """
    index = script_index(argv)
    if index is None:
        return None
    script = os.path.abspath(os.path.join(cwd, argv[index]))
    for root in (os.path.abspath(project), os.path.realpath(project)):
        relative = os.path.relpath(script, root)
        if relative != os.pardir and not relative.startswith(os.pardir + os.sep):
            return index, Path(relative).parts
    raise UsageError(f"{argv[index]} is outside {project}, the folder `fray submit --remote` copies to the "
                     f"cluster: run the command from the project's folder (or one above the script)")


def in_copy(argv: list[str], located: tuple[int, tuple[str, ...]] | None, remote_path: str) -> list[str]:
    """`argv` with the located SCRIPT named by its absolute path in the copy at `remote_path`."""
    if located is None:
        return argv
    index, parts = located
    return [*argv[:index], posixpath.join(remote_path, *parts), *argv[index + 1:]]
