"""Sweeps whose runs the daemon has not written yet: their members as readers see them, and what is asked of them.

groups/<id>/ holds a sweep's record from `fray submit --sweep` until the
daemon has written every member's run folder (fray.daemon.sweeps); then
the daemon removes it. So `fray list` and the dashboard show a new sweep's
points at once, and cost nothing more once sweeps are under way; `fray
status` and `fray control` on such a point wait the moment it takes the
daemon to write it (`wait_for`).

A request for a whole new sweep (`fray control pause --group`, the
dashboard's keys on its row) does not wait: what is asked of the points not
written yet goes into the group's control.json (`ask_unwritten`), and the
daemon gives each member that record as its own control.json when it
writes it. So a sweep paused or stopped the moment it was submitted starts
no point (and on Slurm submits no array). Both sides hold the group's lock
(`lock_name`): the front end while it sees which points are unwritten and
records the request, the daemon while it reads the record and puts the
members' folders in place. Either the daemon sees the request, or the front
end sees the runs written and asks each of them.
"""

from __future__ import annotations

import getpass
import os
import time
from collections.abc import Container
from typing import Any

from fray.core.model import Applied, Control, Meta
from fray.core.status import PAUSED_REASON
from fray.core.sweeps import record as sweep_record
from fray.errors import CorruptFileError
from fray.state import audit, store
from fray.state.layout import GroupPaths, Home

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


def pending_members(home: Home, written: Container[str]) -> list[Meta]:
    """The members of new sweeps whose run folders are not among `written` (run ids), as they start out."""
    metas = []
    for record, launch in pending(home):
        control = None
        for index, member in enumerate(record["members"]):
            if member["run_id"] not in written:
                control = control or asked(home.group(record["id"])) or Control()
                meta = sweep_record.member_meta(record, index)
                if control.stop_requested:
                    meta.wait_reason = "stop requested: it ends once the daemon writes its run"
                elif control.paused:
                    meta.wait_reason = PAUSED_REASON
                elif launch is not None and launch.get("array_job_id"):
                    meta.wait_reason = f"submitted as task {index} of job array {launch['array_job_id']}"
                metas.append(meta)
    return metas


def lock_name(group_id: str) -> str:
    """The lock under which a new sweep's unwritten points are asked for (front ends) and written (the daemon)."""
    return f"group-{group_id}"


def asked(paths: GroupPaths) -> Control | None:
    """What people asked of a new sweep's points not written yet (None: nothing)."""
    try:
        data = store.read_json(paths.control, "control")
    except CorruptFileError:
        return None  # moved aside and reported; the points were asked nothing that can be read
    return None if data is None else Control.from_dict(data)


def ask_unwritten(home: Home, group_id: str, op: str, run_ids: list[str]) -> tuple[Control, dict[str, Meta]]:
    """Record `op` for those of `run_ids` (members of new sweep `group_id`) whose runs the daemon has not
    written: the group's control record after the request, and the points it covers by run id, as they
    start out (none: all written, ask each run)."""
    paths = home.group(group_id)
    with store.lock(home, lock_name(group_id)):
        wanted = {run_id for run_id in run_ids if not os.path.isfile(home.meta_file(run_id))}
        try:
            record = store.read_json(paths.record, "group") if wanted else None
        except CorruptFileError:
            record = None  # moved aside and reported: its points can be asked nothing
        if record is None:
            return Control(), {}
        control = asked(paths) or Control()
        covered = {member["run_id"]: sweep_record.member_meta(record, index)
                   for index, member in enumerate(record["members"]) if member["run_id"] in wanted}
        control.ask(op, Applied())  # a point not written has had nothing applied
        control.updated_at, control.updated_by = time.time(), getpass.getuser()
        store.write_json(paths.control, control.to_dict(), "control")
    audit.record(home, f"control.{op}", None, {"group": group_id, "runs": len(covered)})
    return control, covered


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
        if time.monotonic() > deadline or not _daemon_may_serve(home):
            return False
        time.sleep(0.05)
    return True


def _daemon_may_serve(home: Home) -> bool:
    """Whether the lease names a daemon that has not stopped (whether it lives is fray.daemon.lease's to judge:
    `wait_for` is bounded by its timeout anyway)."""
    try:
        lease = store.read_json(home.daemon_lease, "daemon")
    except CorruptFileError:
        return True  # being rewritten by its holder
    return lease is not None and not lease.get("stopping")
