"""Groups of runs by what a person typed: `--group GROUP` of `fray list` and `fray control`. Pure.

GROUP is a group id (`fray list` shows a sweep's as its RUN ID, after
`group:`), a unique prefix of one, or a sweep's name (the run name it was
submitted with; when several sweeps share it, the only one still going).
Groups are found among `fray list`'s rows, which the row cache keeps cheap.
"""

from __future__ import annotations

from typing import Any

from fray.core.sweeps.folding import KEY_PREFIX, members_of
from fray.errors import RunLookupError

Row = dict[str, Any]


def resolve(rows: list[Row], text: str) -> tuple[str, list[Row]]:
    """(group id, its member rows in index order) for what a person typed."""
    ref = text.removeprefix(KEY_PREFIX)
    groups: dict[str, dict[str, Any]] = {}
    live: dict[str, bool] = {}
    for row in rows:
        group = row.get("group")
        if group:
            groups.setdefault(group["id"], group)
            live[group["id"]] = live.get(group["id"], False) or row.get("phase") != "ended"
    if ref in groups:
        return ref, members_of(rows, ref)
    named = sorted(g for g, group in groups.items() if group.get("name") == ref)
    if len(named) > 1:
        going = [g for g in named if live[g]]
        if len(going) != 1:
            raise RunLookupError(f"{len(named)} groups are named {ref!r}; give the group id: {', '.join(named)}")
        named = going
    if not named:
        named = sorted(g for g in groups if g.startswith(ref))
        if len(named) > 1:
            raise RunLookupError(f"{len(named)} group ids start with {ref!r}; give more of it: {', '.join(named)}")
    if not named:
        known = f" (groups: {', '.join(sorted(groups)[:10])})" if groups else " (there are no groups yet)"
        raise RunLookupError(f"no group matches {text!r}: give a group id, a unique prefix of one, or a sweep's "
                             f"name; `fray list` shows each sweep as one row{known}")
    return named[0], members_of(rows, named[0])
