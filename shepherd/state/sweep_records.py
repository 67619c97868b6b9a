"""Sweeps whose runs the daemon has not written yet, as readers see them: each member from its sweep's record.

groups/<id>/ holds a sweep's record from `fray submit --sweep` until the
daemon has written every member's run folder (fray.daemon.launching); then
the daemon removes it. So `fray list` and the dashboard show a new sweep's
points at once, and cost nothing more once sweeps are under way; `fray
status` and `fray control` on such a point wait the moment it takes the
daemon to write it (`wait_for`).
"""

from __future__ import annotations

import os
import time
from typing import Any

from fray.core import sweep_record
from fray.core.model import Meta
from fray.errors import CorruptFileError
from fray.state import store
from fray.state.layout import Home

WAIT_FOR_RUN_SEC = 30.0  # a point the daemon is writing: how long a command that names it waits


def pending(home: Home) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """(record, launch record or None) of every sweep whose runs are not all written."""
    found = []
    for group_id in home.group_ids():
        paths = home.group(group_id)
        try:
            record = store.read_json(paths.record, "group")
            launch = store.read_json(paths.launch, "launch")
        except CorruptFileError:
            continue  # moved aside; the daemon reports it
        if record is not None:
            found.append((record, launch))
    return found


def pending_members(home: Home, written: set[str]) -> list[Meta]:
    """The members of new sweeps whose run folders are not among `written` (run ids), as they start out."""
    metas = []
    for record, launch in pending(home):
        for index, member in enumerate(record["members"]):
            if member["run_id"] not in written:
                meta = sweep_record.member_meta(record, index)
                if launch is not None and launch.get("array_job_id"):
                    meta.wait_reason = f"submitted as task {index} of job array {launch['array_job_id']}"
                metas.append(meta)
    return metas


def find(home: Home, ref: str) -> str | None:
    """The run id of a point not yet written that `ref` names (its id, a unique prefix of it, or its name)."""
    members = [member for record, _ in pending(home) for member in record["members"]]
    exact = [m["run_id"] for m in members if ref in (m["run_id"], m["name"])]
    prefixed = [m["run_id"] for m in members if m["run_id"].startswith(ref)]
    chosen = exact or prefixed
    return chosen[0] if len(chosen) == 1 else None


def wait_for(home: Home, run_id: str, timeout: float = WAIT_FOR_RUN_SEC) -> bool:
    """Wait until the daemon has written the run's folder; False if it has not within `timeout`, or at once
    when no daemon runs to write it."""
    deadline = time.monotonic() + timeout
    while not os.path.isfile(home.meta_file(run_id)):
        if time.monotonic() > deadline or not store.held(home, "daemon"):
            return False
        time.sleep(0.05)
    return True
