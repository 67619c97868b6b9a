"""Finding a run by what a person typed (an id, a unique id prefix, a name) and reading its meta and control.

Apart from fray.state.runs (creating runs), so that the commands that only read
one run (`fray status`, `fray logs`) import none of the submission machinery.
"""

from __future__ import annotations

import os
import re

from fray.core.model import Control, Meta
from fray.errors import AmbiguousRun, CorruptFileError, RunLookupError
from fray.state import meta_file, store
from fray.state.layout import Home

_NAME_SEGMENT = re.compile(r"^[0-9]{8}-[0-9]{6}-(.+)-[0-9a-f]{4}$")


def slug(name: str) -> str:
    """A run name as its run id spells it."""
    cleaned = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40].strip("-")
    return cleaned or "run"


def resolve(home: Home, ref: str) -> str:
    """The run id that `ref` names: an id, a unique id prefix, or a run name."""
    if ref and not ref.startswith(".") and os.sep not in ref and os.path.isdir(home.run_folder(ref)):
        return ref  # a run id: no need to list every run to find it
    # The names in runs/ as plain strings (no DirEntry per run), folders checked among the few that match:
    # `fray status NAME` among 10,000 runs lists them once and builds nothing per run.
    try:
        listed = sorted(os.listdir(home.runs_dir))
    except FileNotFoundError:
        listed = []
    wanted = slug(ref)  # an id's name is what lies between its date and its 4 hex digits: sliced, then matched
    prefixed = _folders(home, [i for i in listed if i.startswith(ref) and not i.startswith(".")])
    if len(prefixed) == 1:
        return prefixed[0]
    named = _folders(home, [i for i in listed if i[16:-5] == wanted and _name_segment(i) == wanted])
    if len(named) == 1:
        return named[0]
    if len(named) > 1:
        active = [i for i in named if not home.run(i).ended.exists()]
        if len(active) == 1:
            return active[0]
        raise AmbiguousRun(_ambiguous(ref, named, "runs are named"), list(reversed(named)))
    if prefixed:
        raise AmbiguousRun(_ambiguous(ref, prefixed, "run ids start with"), list(reversed(prefixed)))
    from fray.state.sweeps import unwritten  # only when nothing else matched: its imports are not cheap

    point = unwritten.find(home, ref)
    if point is not None:  # a new sweep's point: the daemon writes its folder in a moment
        if unwritten.wait_for(home, point):
            return point
        raise RunLookupError(f"run {point} is a point of a new sweep whose runs the daemon has not written yet; "
                             "it writes them once it runs (`fray daemon status`, `fray daemon start`)")
    ids = home.run_ids()
    hint = f"; newest: {ids[-1]}" if ids else ""
    raise RunLookupError(f"no run matches {ref!r} in {home.root} (give an id, a unique id prefix, or a name; "
                         f"`fray list` shows them{hint})")


def _folders(home: Home, names: list[str]) -> list[str]:
    return [name for name in names if os.path.isdir(home.run_folder(name))]


def _ambiguous(ref: str, candidates: list[str], what: str) -> str:
    shown = "\n  ".join(reversed(candidates[-10:]))
    more = f"\n  ... and {len(candidates) - 10} more" if len(candidates) > 10 else ""
    return f"{len(candidates)} {what} {ref!r}; give the run id:\n  {shown}{more}"


def _name_segment(run_id: str) -> str | None:
    match = _NAME_SEGMENT.match(run_id)
    return match.group(1) if match else None


def read_meta(home: Home, run_id: str) -> Meta:
    """The run's meta, or a UsageError explaining why it cannot be read."""
    paths = home.run(run_id)
    raw, problem = meta_file.read(paths)  # a corrupt meta.json: its last good copy
    if raw is None:
        raise CorruptFileError(paths.meta, f"run {run_id} cannot be used: {problem}. Its files are in {paths.dir}", None)
    return Meta.from_dict(raw)


def read_control(home: Home, run_id: str) -> Control:
    try:
        return Control.from_dict(store.read_json(home.run(run_id).control, "control"))
    except CorruptFileError:
        return Control()  # moved aside (and reported by status); the next request rewrites it
