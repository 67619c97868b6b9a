"""Sweeps in the daemon: a new sweep's record becomes runs (`Launcher`), and a Slurm job array's
folder goes once it is done (`ArrayFolders`).

A sweep's record (groups/<id>/, by `fray submit --sweep`) becomes runs: submitted first, written after.

Why: a 1,000-point sweep written as 1,000 run folders cost 2.9 s in `fray
submit` and 6.3 s in the daemon's next cycle (two meta.json writes per
member, an events line each, a batch script each, all before and after one
`sbatch --array`), against 0.7 to 1.1 s for submitit's whole map_array
(tests/bench/bench_sweep.py). Group commit of the same writes (one sync for
all, fewer meta writes) would still leave some 7,000 file creations on the
path, about 2 s here; so the record is written whole and the members' runs
are made from it after the one thing that has to be fast, the submission.

Where the backend launches arrays (`launch_array`: Slurm), a new group's
first attempts are submitted from the record alone: the array's task list
and script, then one sbatch. Its outcome is recorded in launch.json, and
then every member's run folder is written, each whole (fray.state.runs
write_runs, one sync for all): its meta.json with attempt 1 already
submitted as its array task, the frozen script, the attempt's batch script
and the "submitted" event. An array task waits until its run's meta.json
names its array (fray.backends.slurm.arrays). From then on the members are
ordinary runs: the loop watches them, retries the failed ones (the retries
of one cycle again share an array), and fences each attempt. Elsewhere (the
local backend, or a first decision other than "submit now": a partition to
wait for, a constraint no node meets, a sweep paused or stopped before it
was launched), the members are written as queued runs and the loop starts
them as before. What people asked of the points before they were written
(groups/<id>/control.json) becomes each member's control.json as its folder
is put in place, under the group's lock (fray.state.sweeps.unwritten).

Crash-only: launch.json says how far it got, and a restarted daemon goes on
from there:
  absent        nothing was submitted: launch;
  submitting    sbatch may or may not have run: the queue is searched for
                the array's name; found, it is adopted; not found within
                policy.SUBMIT_RESOLVE_SEC, the group is launched again under
                a new name (tasks of the lost array, should it exist after
                all, run nothing: no meta.json names it);
  submitted     the missing members' folders are written (those there are kept).
Once every member's folder is written the group's folder is removed: its
members carry all of it, and readers, who show a new sweep's points from
its record until then (fray.state.sweeps.unwritten), look at new sweeps only.

A Slurm job array's folder (arrays/<name>/: its script, task list and task
logs) is needed while any task of it may still start or run: a task reads
its line of the task list when it starts, and Slurm writes the task's own
log there. So a folder goes once no attempt in flight is a task of its
array and no new sweep is being launched as it, and it has not changed for
a while (fray.backends.slurm.arrays.finished); this also removes,
in time, the folder of an array lost in a daemon crash, whose tasks run
nothing. Looked at every ARRAYS_EVERY_SEC, by the backends that keep such
folders (`remove_finished_arrays`).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import orjson

from fray.backends.protocol import AttemptKey, Backend, LaunchesArrays, SubmitRequest
from fray.core import policy, validation
from fray.core.model import Meta
from fray.core.sweeps import record as sweep_record
from fray.errors import AmbiguousSubmission, BackendError, FrayError
from fray.state import runs, store
from fray.state.sweeps import unwritten
from fray.state.layout import GroupPaths, Home

log = logging.getLogger("fray.daemon")

SUBMITTING, SUBMITTED = "submitting", "submitted"
ARRAYS_EVERY_SEC = 60.0


class Launcher:
    def __init__(self, home: Home, backend: Callable[[str], Backend], first_plan: Callable[[Meta], policy.Plan],
                 clock: Callable[[], float]) -> None:
        self.home = home
        self.backend = backend
        self.first_plan = first_plan  # what the policy would do with a member now (the same for every member)
        self.clock = clock

    def cycle(self, exclude: tuple[str, ...]) -> set[str]:
        """Advance every group not yet written out; the run ids of the folders written."""
        written: set[str] = set()
        for group_id in self.home.group_ids():
            try:
                written |= self._advance(self.home.group(group_id), exclude)
            except (OSError, FrayError, ValueError) as exc:  # retried next cycle; the others go on
                log.exception("sweep group %s: %s", group_id, exc)
        return written

    def _advance(self, paths: GroupPaths, exclude: tuple[str, ...]) -> set[str]:
        launch = store.read_json(paths.launch, "launch")
        record = store.read_json(paths.record, "group")
        if record is None:
            return set()
        first = sweep_record.member_meta(record, 0)  # the others only once submitted: 1,000 metas take 0.3 s
        backend = self.backend(first.spec.backend)
        if launch is None:
            plan = self.first_plan(first)
            if (not isinstance(backend, LaunchesArrays) or [type(a) for a in plan.actions] != [policy.Submit]
                    or unwritten.asked(paths) is not None  # paused or stopped already: the loop decides
                    or first.spec.after):  # waits for upstream runs: the loop's gate (core.dependencies) decides
                return self._write(paths, record, None)
            launch = self._launch(paths, record, first, backend, plan.meta.attempts[0].partition, exclude)
        if launch is not None and launch["state"] == SUBMITTING:
            launch = self._resolve(paths, launch, backend)
        if launch is None or launch["state"] != SUBMITTED:
            return set()
        return self._write(paths, record, launch, backend)

    def _launch(self, paths: GroupPaths, record: dict[str, Any], member: Meta, backend: Any,
                partition: str | None, exclude: tuple[str, ...]) -> dict[str, Any] | None:
        """Submit the members' first attempts as one array; the launch record (None: write them queued)."""
        name = backend.new_array_name(record["id"])
        launch: dict[str, Any] = {"state": SUBMITTING, "at": self.clock(), "array_name": name, "array_job_id": None,
                                  "partition": partition}
        store.write_json(paths.launch, launch, "launch")  # the intent first: a restarted daemon looks for it
        first = self._request(member, partition, exclude)
        dirs = [self.home.run(m["run_id"]).attempt(1).dir for m in record["members"]]
        try:
            array_id = backend.launch_array(record["id"], name, first, dirs, record["max_parallel"])
        except AmbiguousSubmission as exc:
            log.warning("sweep %s: %s; looking for it before submitting again", record["id"], exc)
            return launch
        except BackendError as exc:  # the loop submits them one cycle later, and records why that fails
            log.warning("sweep %s: %s; writing its runs queued", record["id"], exc)
            os.unlink(paths.launch)
            return None
        launch.update(state=SUBMITTED, array_job_id=array_id)
        store.write_json(paths.launch, launch, "launch")
        log.info("sweep %s: %d first attempts submitted as job array %s", record["id"], len(dirs), array_id)
        return launch

    def _resolve(self, paths: GroupPaths, launch: dict[str, Any], backend: Any) -> dict[str, Any] | None:
        """A launch whose sbatch gave no clear answer: adopt the array if the queue has it, else start over."""
        try:
            found = backend.find_array(launch["array_name"])
        except BackendError as exc:
            log.warning("looking for job array %s: %s (retried next cycle)", launch["array_name"], exc)
            return launch
        if found is not None:
            launch.update(state=SUBMITTED, array_job_id=found)
            store.write_json(paths.launch, launch, "launch")
            return launch
        if self.clock() - launch["at"] > policy.SUBMIT_RESOLVE_SEC:
            log.warning("job array %s never reached Slurm; launching sweep %s again", launch["array_name"],
                        paths.group_id)
            os.unlink(paths.launch)
        return None

    def _request(self, meta: Meta, partition: str | None, exclude: tuple[str, ...]) -> SubmitRequest:
        run = self.home.run(meta.run_id)
        return SubmitRequest(key=AttemptKey(meta.run_id, 1), name=meta.name, spec=meta.spec, home=self.home.root,
                             script=runs.entry_script(run, meta), attempt_dir=run.attempt(1).dir,
                             checkpoint_dir=run.checkpoints_dir, partition=partition, exclude_nodes=exclude,
                             namespace=meta.job_namespace)

    def _write(self, paths: GroupPaths, record: dict[str, Any], launch: dict[str, Any] | None,
               backend: Any = None) -> set[str]:
        """Every member's run folder not written yet (each whole, all made durable by one sync); then the
        group's folder goes."""
        metas = sweep_record.members_of(record)
        frozen = metas[0].script["frozen"]
        script = paths.script(frozen).read_bytes()
        new: list[runs.NewRun] = []
        for index, meta in enumerate(metas):
            run = self.home.run(meta.run_id)
            if os.path.lexists(run.dir):
                continue  # written before a crash
            files = {frozen: script}
            if launch is not None:
                ref = backend.array_ref(launch["array_job_id"], launch["array_name"], index, launch["partition"])
                meta = sweep_record.launched(meta, launch["at"], ref, launch["partition"])
                request = self._request(meta, launch["partition"], ())
                files[_inside(run.dir, run.attempt(1).slurm_script)] = backend.batch_script_of(request)
                files[_inside(run.dir, run.events)] = _submitted_event(meta, index, launch)
            new.append(runs.NewRun(meta, files))
        staged = runs.stage_runs(self.home, new, control=False, keep_ids=True)
        try:
            # What people asked of the points until now is theirs from the start; a request after this
            # finds them written and goes to their runs (fray.state.sweeps.unwritten.ask_unwritten).
            with store.lock(self.home, unwritten.lock_name(paths.group_id)):
                runs.publish_runs(self.home, new, staged, unwritten.asked(paths))
                shutil.rmtree(paths.dir)  # all written (and synced): the runs carry everything the record held
        except BaseException:
            runs.discard_staged(staged)  # those not published yet; the rest are kept, as after a crash
            raise
        return {item.meta.run_id for item in new}


def _inside(folder: Path, path: Path) -> str:
    return os.path.relpath(path, folder)


def _submitted_event(meta: Meta, index: int, launch: dict[str, Any]) -> bytes:
    """The line the loop logs for a submitted attempt, for this member's events.jsonl."""
    record = {"at": launch["at"], "run_id": meta.run_id, "kind": "submitted", "attempt": 1,
              "reason": f"attempt 1 submitted to {meta.spec.backend} as task {index} of job array "
                        f"{launch['array_job_id']}",
              "data": {"ref": {k: v for k, v in (meta.attempts[0].backend_ref or {}).items() if isinstance(v, (str, int))},
                       "exclude": []}}
    problems = validation.errors("event", record)
    if problems:
        raise ValueError(f"refusing to write an event that violates its schema: {'; '.join(problems)}")
    return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)


class ArrayFolders:
    def __init__(self, home: Home, backends: Callable[[], Iterable[Any]]) -> None:
        self.home = home
        self.backends = backends  # the backends loaded now
        self._removed_at = float("-inf")

    def remove_finished(self, metas: Iterable[Meta | None], now: float) -> list[str]:
        """Remove the finished arrays' folders (at most every ARRAYS_EVERY_SEC); their names."""
        if time.monotonic() - self._removed_at < ARRAYS_EVERY_SEC or not self.home.array_names():
            return []
        self._removed_at = time.monotonic()
        in_use = {launch["array_name"] for _, launch in unwritten.pending(self.home)
                  if launch is not None and launch["array_name"]}
        for meta in metas:
            attempt = meta.in_flight if meta is not None else None
            if attempt is not None and attempt.backend_ref and attempt.backend_ref.get("job_name"):
                in_use.add(attempt.backend_ref["job_name"])
        removed: list[str] = []
        for backend in self.backends():
            if isinstance(backend, LaunchesArrays):
                try:
                    removed += backend.remove_finished_arrays(in_use, now)
                except OSError as exc:
                    log.warning("removing finished job arrays' folders (retried later): %s", exc)
        if removed:
            log.info("removed the folders of %d finished job arrays", len(removed))
        return removed
