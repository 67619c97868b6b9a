"""A workload that failed on a file its code snapshot left out: told so, and not retried as its own failure.

`fray submit` leaves files out of a run's snapshot by rule (fray.state.snapshot_listing) and writes
which into runs/<id>/left-out.json. When the workload fails, the wrapper reads the last lines of its
stderr for a missing file (`FileNotFoundError: [Errno 2] No such file or directory: 'data/train.bin'`,
`cat: data/x: No such file or directory`), takes the path relative to the run's copy of its code (an
absolute path inside the copy, or a relative one from the working directory), and looks it up among
what was left out. Found: the failure's cause is `snapshot_left_out` (exit 50), whose message names
the file, the rule and the fix, and the shepherd ends the run failed_config instead of retrying what
cannot work. Only a file of the snapshot counts: a missing file elsewhere is the workload's business.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from . import contract, records

_MISSING = re.compile(
    r"No such file or directory: '(?P<single>[^']+)'"
    r"|No such file or directory: \"(?P<double>[^\"]+)\""
    r"|(?:^|\s)(?P<bare>[^\s:'\"]+): No such file or directory"
)


class Missing(NamedTuple):
    rel: str  # relative to the project
    rule: str
    source: str  # where it would be in the project that was submitted
    folder: str | None  # the folder left out whole that holds it (`data/`), if so


def missing_paths(lines: Sequence[str]) -> list[str]:
    """Every path a line says does not exist, the last line's first."""
    found = []
    for line in reversed(lines):
        for match in _MISSING.finditer(line):
            path = match.group("single") or match.group("double") or match.group("bare")
            if path and path not in found:
                found.append(path)
    return found


def _relative(path: str, code_dir: str, cwd: str) -> str | None:
    """`path` relative to the run's copy of its code, or None when it is not inside it."""
    absolute = os.path.normpath(path if os.path.isabs(path) else os.path.join(cwd, path))
    root = os.path.normpath(code_dir)
    if absolute != root and not absolute.startswith(root + os.sep):
        return None
    return os.path.relpath(absolute, root).replace(os.sep, "/")


def find(record: dict[str, Any], rel: str) -> tuple[str, str | None] | None:
    """(the rule that left `rel` out, the folder left out whole that holds it) per the record
    (schemas/left-out.json), or None when it was not left out."""
    files = record.get("files") or {}
    if isinstance(files, dict) and rel in files:
        return str(files[rel]), None
    rules = record.get("rules") or {}
    for folder in record.get("folders") or ():
        if rel == folder.rstrip("/") or rel.startswith(folder):
            return str(rules.get(folder, folder)), folder
    return None


def lookup(home: str, run_id: str, code_dir: str, cwd: str, stderr_tail: Sequence[str]) -> Missing | None:
    """The file the workload failed on that its snapshot left out, or None."""
    candidates = missing_paths(stderr_tail)
    if not candidates:
        return None
    try:
        record = records.read_json(os.path.join(home, contract.RUNS_DIR, run_id, contract.LEFT_OUT))
    except (OSError, ValueError):
        return None  # nothing was left out, or a run from before this record was kept
    if not isinstance(record, dict):
        return None
    for path in candidates:
        rel = _relative(path, code_dir, cwd)
        if rel is None:
            continue
        found = find(record, rel)
        if found is not None:
            return Missing(rel, found[0], posixpath.join(str(record.get("root", "")), rel), found[1])
    return None


def message(missing: Missing) -> str:
    back = f"!{missing.folder}" if missing.folder else f"!{missing.rel}"
    return (f"the workload failed on {missing.rel}, which the run's code snapshot left out ({missing.rule}); "
            f"retrying cannot bring it back, so the run is not retried. Bring it back with a line `{back}` in "
            f".frayignore and submit again, or read it from where it is ({missing.source}: an absolute path, "
            "or --workdir)")
