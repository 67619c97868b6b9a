"""The Slurm backend: attempts are batch jobs, found again by name, watched in one squeue.

    submit    one `sbatch --parsable` (script and options from `slurm_script`);
              a timeout is an AmbiguousSubmission, resolved by name afterwards
    submit_group  a sweep's attempts as one job array (`arrays`: `--array=0-N%K`,
              each task runs its attempt's own batch script); its tasks are
              `123_4` in squeue, sacct, scontrol and scancel
    snapshot  one `squeue` for all our jobs (own user), at most every
              `min_snapshot_interval_sec` (the last result is reused in between);
              for jobs that left the queue, one `sacct` when accounting works,
              else (or for what it does not know yet) one `scontrol show job`
    cancel    one `scancel --signal=TERM --full` for the polite stops (the
              wrapper forwards the signal and keeps its --stop-grace), one plain
              `scancel` for kills and for jobs still pending
    nodes     one `sinfo` (cached `sinfo_ttl_sec`), also behind partition choice

Every command goes through the `commands` seam with a timeout. A failed
squeue raises BackendError (the daemon logs it and treats every attempt as
unknown this cycle); a failed sacct or scontrol only leaves less detail.
"""

from __future__ import annotations

import getpass
import os
import secrets
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from fray.backends import cli_health
from fray.backends.slurm import arrays, partitions, refusals
from fray.backends.slurm import node_workers as slurm_workers

from fray.state import store
from fray.backends import external
from fray.backends.protocol import AttemptKey, CancelTarget, GroupOutcome, GroupSubmit, Node, SubmitRequest, Tracked
from fray.backends.slurm.parse import (
    JOB_PREFIX, PENDING_STATES, SACCT_FIELDS, SQUEUE_FORMAT, JobRecord, QueueRow, job_name, parse_sacct,
    parse_sbatch, parse_scontrol, parse_squeue, view_of_finished, view_of_queued,
)
from fray.backends.slurm.script import BatchJob, batch_script, sbatch_argv, sbatch_options
from fray.errors import AmbiguousSubmission, BackendError
from fray.state.layout import AttemptPaths, Home
from fray.core.model import RunSpec
from fray.core.placement.attributes import Worker
from fray.core.partition_policy import Candidates
from fray.core.observation import BackendView, ViewState

DEFAULTS: dict[str, Any] = {
    "poll_interval_sec": 15.0,
    "min_snapshot_interval_sec": 10.0,
    "command_timeout_sec": 30.0,
    "sinfo_ttl_sec": 60.0,
    "signal_before_limit_sec": 120,
}
# After sacct fails, use scontrol alone for this long before asking sacct again;
# "accounting storage is disabled" will not change soon.
SACCT_RETRY_SEC = 300.0
SACCT_DISABLED_RETRY_SEC = 3600.0
# scancel complaints that mean "already over": nothing left to cancel.
_ALREADY_OVER = ("Invalid job id", "already completing or completed", "Job/step already completing")


@dataclass
class _Queue:
    taken_at: float
    by_id: dict[str, QueueRow] = field(default_factory=dict)
    by_name: dict[str, QueueRow] = field(default_factory=dict)
    by_array_task: dict[tuple[str, int], QueueRow] = field(default_factory=dict)  # (array name, index)


class SlurmBackend:
    name = "slurm"
    poll_interval_sec = DEFAULTS["poll_interval_sec"]
    snapshot_when_idle = False
    nodes_every_sec: float | None = None  # sinfo is a call to the controller: at the daemon's pace

    def __init__(self, home: Home, config: dict[str, Any] | None = None,
                 runner: external.Runner = external.run, clock: Callable[[], float] = time.monotonic) -> None:
        self.home = home
        settings = {**DEFAULTS, **(config if config is not None else _slurm_config(home))}
        self.python = str(settings.get("python") or sys.executable)
        self.user = str(settings.get("user") or getpass.getuser())
        self.poll_interval_sec = float(settings["poll_interval_sec"])
        self.min_snapshot_interval_sec = float(settings["min_snapshot_interval_sec"])
        self.timeout = float(settings["command_timeout_sec"])
        self.sinfo_ttl_sec = float(settings["sinfo_ttl_sec"])
        self.signal_before_limit_sec = int(settings["signal_before_limit_sec"])
        # Watched: squeue or sbatch failing every call is shown to people (fray daemon status, fray list);
        # sacct fails on every cluster without accounting, and scontrol answers instead.
        # sbatch refusing a job's own request is an answer, not a failing tool (fray.backends.slurm.refusals).
        self.cli = cli_health.WatchedRunner(runner, ignore=frozenset({"sacct"}),
                                            answered={"sbatch": lambda r: refusals.judge(r) is refusals.Answer.REFUSED})
        self.run_command: external.Runner = self.cli
        self.clock = clock
        self._queue: _Queue | None = None
        self._submitted_at: dict[str, float] = {}  # job id -> when sbatch returned it
        self._ambiguous_at: dict[str, float] = {}  # job name -> when its sbatch gave no clear answer
        self._array_tasks: dict[AttemptKey, tuple[str, int]] = {}  # ... and, in an array, its name and index
        self._sinfo: tuple[float, list[partitions.NodeRow]] | None = None
        self._workers: tuple[list[partitions.NodeRow] | None, tuple[Worker, ...]] = (None, ())
        self._sacct_after = 0.0

    @classmethod
    def for_daemon(cls, home: Home, on_attempt_exit: Callable[[], None] | None = None) -> "SlurmBackend":
        """The backend as `load_backend` builds it: Slurm reports ends through squeue, not a callback."""
        return cls(home)

    def capacity(self) -> None:
        return None  # Slurm queues by itself

    # -- submit ----------------------------------------------------------------------

    def submit(self, request: SubmitRequest) -> dict[str, Any]:
        return self._sbatch_one(self._prepare(request, self._sinfo_rows()))

    def submit_group(self, batch: GroupSubmit) -> GroupOutcome:
        """A sweep's attempts as few job arrays as their options allow (one, usually); see `arrays`."""
        rows = self._sinfo_rows()
        outcome: GroupOutcome = {}
        jobs = [self._prepare(request, rows, sync=False) for request in batch.requests]
        store.sync_all()  # every attempt's batch script on disk before any task can start: one sync, not one each
        for part in arrays.batches(jobs):
            if len(part) == 1:
                try:
                    outcome[part[0].request.key] = self._sbatch_one(part[0])
                except BackendError as exc:
                    outcome[part[0].request.key] = exc
            else:
                outcome.update(self._sbatch_array(part, batch))
        return outcome

    def _prepare(self, request: SubmitRequest, rows: list[partitions.NodeRow] | None, sync: bool = True) -> BatchJob:
        """The attempt's folder and its own batch script (what it runs, alone or as an array task)."""
        store.make_dirs(request.attempt_dir)
        job = self._job(request, rows)
        store.write_bytes_atomic(AttemptPaths(request.attempt_dir).slurm_script, batch_script(job).encode(), sync)
        return job

    def _job(self, request: SubmitRequest, rows: list[partitions.NodeRow] | None) -> BatchJob:
        return BatchJob(request, self.python, self.signal_before_limit_sec, gpu_type=self._gpu_type(request, rows),
                        known_nodes=frozenset(r.node for r in rows) if rows is not None else None)

    def _sbatch_array(self, jobs: list[BatchJob], batch: GroupSubmit) -> GroupOutcome:
        name = self.new_array_name(batch.group_id)
        try:
            array_id = self._array(jobs[0], [job.request.attempt_dir for job in jobs], name, batch.group_id,
                                   batch.max_parallel)
        except AmbiguousSubmission as exc:
            now = self.clock()
            for index, job in enumerate(jobs):  # looked for by the array's name and index (`snapshot`)
                self._ambiguous_at[job_name(job.request.key)] = now
                self._array_tasks[job.request.key] = (name, index)
            return {job.request.key: exc for job in jobs}
        except BackendError as exc:
            return {job.request.key: exc for job in jobs}
        return dict(arrays.array_refs(array_id, name, jobs))

    def _array(self, first: BatchJob, attempt_dirs: list[Path], name: str, group_id: str,
               max_parallel: int | None) -> str:
        """Submit one array, task i running the attempt in attempt_dirs[i]; its job id, else AmbiguousSubmission
        or BackendError."""
        paths = self.home.array(name)
        store.make_dirs(paths.dir)
        store.write_bytes_atomic(paths.tasks, arrays.tasks_text(self.home.root, attempt_dirs).encode())
        store.write_bytes_atomic(paths.script, arrays.array_script(self.home.root, first, len(attempt_dirs), paths,
                                                                   group_id).encode())
        result = self.run_command(arrays.array_argv(first, len(attempt_dirs), paths, name, group_id, max_parallel),
                                  self.timeout)
        array_id = parse_sbatch(result.stdout) if result.ok else None
        if array_id is None:
            answer = refusals.judge(result)
            if answer is refusals.Answer.AMBIGUOUS:
                raise AmbiguousSubmission(f"{result.describe()}; job array {name} may or may not exist")
            raise _refused(result, answer, first,
                           f"job array {name} ({len(attempt_dirs)} attempts of sweep {group_id})")
        now = self.clock()
        for index in range(len(attempt_dirs)):
            self._submitted_at[f"{array_id}_{index}"] = now
        return array_id

    # -- a new sweep, before its runs' folders exist (fray.daemon.sweeps) -----------

    def new_array_name(self, group_id: str) -> str:
        return arrays.array_name(group_id, secrets.token_hex(3))

    def launch_array(self, group_id: str, name: str, first: SubmitRequest, attempt_dirs: list[Path],
                     max_parallel: int | None) -> str:
        """The first attempts of a sweep's members as one array named `name`, before their folders are written:
        two files and one sbatch whatever the size (each task waits for its folder). Its job id; raises
        AmbiguousSubmission (look for it with `find_array`) or BackendError."""
        return self._array(self._job(first, self._sinfo_rows()), attempt_dirs, name, group_id, max_parallel)

    def batch_script_of(self, request: SubmitRequest) -> bytes:
        """The attempt's own batch script, as `submit` would write it (what its array task runs)."""
        return batch_script(self._job(request, self._sinfo_rows())).encode()

    def find_array(self, name: str) -> str | None:
        """The job id of the array named `name` while any task of it is in the queue."""
        rows = self._squeue().by_id.values()
        return next((row.job_id.partition("_")[0] for row in rows if row.name == name), None)

    def remove_finished_arrays(self, in_use: set[str], now: float) -> list[str]:
        """Remove the folders of the arrays every task of which has ended (arrays.finished); their names."""
        made_at = {}
        for name in self.home.array_names():
            try:
                made_at[name] = os.stat(self.home.array(name).dir).st_mtime
            except FileNotFoundError:
                continue
        gone = arrays.finished(made_at, in_use, now)
        for name in gone:
            shutil.rmtree(self.home.array(name).dir, ignore_errors=True)
        return gone

    def array_ref(self, array_job_id: str, name: str, index: int, partition: str | None) -> dict[str, Any]:
        """Task `index`'s reference, as `submit_group` records it."""
        return arrays.task_ref(array_job_id, name, index, partition)

    def _sbatch_one(self, job: BatchJob) -> dict[str, Any]:
        request = job.request
        paths = AttemptPaths(request.attempt_dir)
        name = job_name(request.key)
        result = self.run_command(sbatch_argv(job, paths.slurm_script, paths.slurm_log), self.timeout)
        job_id = parse_sbatch(result.stdout) if result.ok else None
        if job_id is None:
            answer = refusals.judge(result)
            if answer is refusals.Answer.AMBIGUOUS:
                self._ambiguous_at[name] = self.clock()
                raise AmbiguousSubmission(f"{result.describe()}; job {name} may or may not exist")
            raise _refused(result, answer, job, f"attempt {request.key.attempt}")
        self._submitted_at[job_id] = self.clock()
        ref: dict[str, Any] = {"job_id": job_id, "job_name": name}
        if request.partition:
            ref["partition"] = request.partition
        if job.exclude:
            ref["exclude"] = list(job.exclude)
        return ref

    def _gpu_type(self, request: SubmitRequest, rows: list[partitions.NodeRow] | None) -> str | None:
        if not request.partition or rows is None:
            return None
        chosen = next((p for p in partitions.summarize(rows) if p.name == request.partition), None)
        return partitions.gpu_type_for(chosen, _need(request.spec))

    # -- snapshot --------------------------------------------------------------------

    def snapshot(self, tracked: list[Tracked]) -> dict[AttemptKey, BackendView]:
        queue = self._squeue()
        views: dict[AttemptKey, BackendView] = {}
        missing: list[tuple[Tracked, str | None]] = []
        for item in tracked:
            name = job_name(item.key)
            job_id = str((item.ref or {}).get("job_id") or "") or None
            if job_id and self._array_tasks:
                self._array_tasks.pop(item.key, None)  # found since: its reference says where
            row = queue.by_id.get(job_id) if job_id else queue.by_name.get(name) or self._array_task_row(queue, item.key)
            if row is not None:
                views[item.key] = view_of_queued(row, {**(item.ref or {}), "job_id": row.job_id, "job_name": name})
            elif self._newer_than(queue, job_id, name):
                continue  # submitted after the (cached) squeue: unknown until the next one
            else:
                missing.append((item, job_id))
        if missing:
            views.update(self._finished(missing))
        return views

    def _array_task_row(self, queue: _Queue, key: AttemptKey) -> QueueRow | None:
        """The row of an attempt whose array's sbatch gave no clear answer, by the array's name and its index."""
        task = self._array_tasks.get(key)
        return queue.by_array_task.get(task) if task else None

    def _newer_than(self, queue: _Queue, job_id: str | None, name: str) -> bool:
        at = self._submitted_at.get(job_id) if job_id else self._ambiguous_at.get(name)
        return at is not None and at >= queue.taken_at

    def _squeue(self) -> _Queue:
        now = self.clock()
        if self._queue is not None and now - self._queue.taken_at < self.min_snapshot_interval_sec:
            return self._queue
        # --array: one row per array task, pending ones too (`123_4`, not `123_[4-19%4]`).
        result = self.run_command(["squeue", "--noheader", "--array", f"--user={self.user}",
                                   f"--Format={SQUEUE_FORMAT}"], self.timeout)
        if not result.ok:
            raise BackendError(f"could not list the Slurm queue: {result.describe()}")
        queue = _Queue(taken_at=now)
        for row in parse_squeue(result.stdout):
            if row.name.startswith(JOB_PREFIX):
                queue.by_id[row.job_id] = row
                # A name submitted twice (never by fray, barring bugs) resolves to the first job.
                queue.by_name.setdefault(row.name, row)
                index = row.job_id.partition("_")[2]
                if index.isdigit():
                    queue.by_array_task[(row.name, int(index))] = row
        self._queue = queue
        # Submissions from before this listing are in it (or over): no longer "too new to tell".
        self._submitted_at = {k: at for k, at in self._submitted_at.items() if at >= now}
        self._ambiguous_at = {k: at for k, at in self._ambiguous_at.items() if at >= now}
        return queue

    def _finished(self, missing: list[tuple[Tracked, str | None]]) -> dict[AttemptKey, BackendView]:
        """Views of jobs that left the queue, from sacct, else scontrol, else nothing but 'gone'."""
        ids = [job_id for _, job_id in missing if job_id]
        records = self._sacct(ids) if ids else {}
        unresolved = [(item, job_id) for item, job_id in missing if not job_id or job_id not in records]
        if unresolved:
            records = {**(self._scontrol() or {}), **records}
        by_name = {r.name: r for r in records.values()}
        views: dict[AttemptKey, BackendView] = {}
        for item, job_id in missing:
            name = job_name(item.key)
            record: JobRecord | None = records.get(job_id) if job_id else by_name.get(name)
            ref = {**(item.ref or {}), "job_name": name, **({"job_id": record.job_id} if record else {})}
            if record is not None:
                views[item.key] = view_of_finished(record, ref)
            else:
                views[item.key] = BackendView(ViewState.GONE, ref=item.ref, detail="no longer known to Slurm")
        return views

    def _sacct(self, ids: list[str]) -> dict[str, JobRecord]:
        now = self.clock()
        if now < self._sacct_after:
            return {}
        result = self.run_command(["sacct", "--parsable2", "--noheader", "--allocations", f"--jobs={','.join(ids)}",
                                   f"--format={','.join(SACCT_FIELDS)}"], self.timeout)
        if not result.ok:
            disabled = "accounting storage is disabled" in (result.stderr + result.stdout).lower()
            self._sacct_after = now + (SACCT_DISABLED_RETRY_SEC if disabled else SACCT_RETRY_SEC)
            return {}
        return parse_sacct(result.stdout)

    def _scontrol(self) -> dict[str, JobRecord] | None:
        # One call for every job the controller still remembers (MinJobAge): it
        # takes a single id at most, and one call per job is what we avoid.
        result = self.run_command(["scontrol", "--oneliner", "show", "job"], self.timeout)
        return parse_scontrol(result.stdout) if result.ok else None

    # -- cancel ----------------------------------------------------------------------

    def cancel(self, targets: list[CancelTarget]) -> None:
        polite: list[str] = []
        kill: list[str] = []
        for target in targets:
            row = self._row_of(target)
            job_id = str((target.ref or {}).get("job_id") or "") or (row.job_id if row else None)
            if not job_id:
                continue  # never reached Slurm, as far as anyone can tell
            # A pending job has no process to signal: only a plain scancel removes it.
            pending = row is not None and row.state in PENDING_STATES
            (kill if target.force or pending else polite).append(job_id)
        problems = []
        if kill:  # pending ones first: none may start in the room the stopping ones leave (an array's %K)
            problems += self._scancel(kill)
        if polite:
            problems += self._scancel(["--signal=TERM", "--full", *polite])
        if problems:
            raise BackendError("; ".join(problems))

    def _row_of(self, target: CancelTarget) -> QueueRow | None:
        if self._queue is None:
            return None
        job_id = (target.ref or {}).get("job_id")
        return self._queue.by_id.get(str(job_id)) if job_id else self._queue.by_name.get(job_name(target.key))

    def _scancel(self, args: list[str]) -> list[str]:
        result = self.run_command(["scancel", *args], self.timeout)
        if result.ok:
            return []
        if result.timed_out:
            return [result.describe()]
        real = [line for line in result.stderr.splitlines() if line.strip() and not any(s in line for s in _ALREADY_OVER)]
        return [result.describe()] if real else []

    # -- nodes and partitions ----------------------------------------------------------

    def nodes(self) -> list[Node]:
        rows = self._sinfo_rows()
        if rows is None:
            raise BackendError("could not list the Slurm nodes (sinfo failed)")
        return [Node(name=n.name, state=n.state, cpus=n.cpus, mem_mb=n.mem_mb, gpus=sum(g.count for g in n.gpus),
                     gpu_type=",".join(sorted({g.type for g in n.gpus if g.type})) or None, partitions=n.partitions)
                for n in partitions.nodes(rows)]

    def placement_workers(self) -> tuple[Worker, ...]:
        """Every node in every partition with its attributes, for checking that some node could ever
        take a run (empty when sinfo fails: then sbatch is the judge)."""
        rows = self._sinfo_rows()
        if rows is None:
            return ()
        if self._workers[0] is not rows:  # built once per sinfo read, not once per cycle
            self._workers = (rows, tuple(slurm_workers.workers(rows)))
        return self._workers[1]

    def list_partitions(self) -> list[partitions.Partition] | None:
        rows = self._sinfo_rows()
        return partitions.summarize(rows) if rows is not None else None

    def partition_candidates(self, spec: RunSpec) -> Candidates | None:
        """The partitions to try for a run, best first (None: Slurm's default or the user's #SBATCH line)."""
        need = _need(spec)
        if not need.named and (not need.gpus or "partition" in sbatch_options(spec.sbatch)):
            return None
        found = self.list_partitions()
        if found is None:
            if need.named:
                return Candidates(need.named)  # cannot check them now; sbatch will
            return Candidates((), "cannot choose a GPU partition: sinfo failed (retried)")
        return partitions.choose(found, need)

    def _sinfo_rows(self) -> list[partitions.NodeRow] | None:
        now = self.clock()
        if self._sinfo is not None and now - self._sinfo[0] < self.sinfo_ttl_sec:
            return self._sinfo[1]
        result = self.run_command(["sinfo", "--noheader", "--Node", f"--format={partitions.SINFO_FORMAT}"],
                                  self.timeout)
        if not result.ok:
            return self._sinfo[1] if self._sinfo is not None else None  # stale beats nothing
        self._sinfo = (now, partitions.parse_sinfo(result.stdout))
        return self._sinfo[1]


def _refused(result: external.CommandResult, answer: refusals.Answer, job: BatchJob, what: str) -> BackendError:
    """The error for an sbatch that gave no job id: a transient answer (retried), or a refusal of the job's own
    request with sbatch's words and the line of the script they point at (the run ends failed_config).
    A request no node can meet while fray excludes banned nodes is the bans' doing: it waits for them."""
    request = job.request
    said = refusals.words(result)
    if answer is refusals.Answer.TRANSIENT:
        return BackendError(f"sbatch could not take {what} now: {said}", temporary=True)
    banned = [node for node in job.exclude if node in request.exclude_nodes]
    if banned and refusals.about_placement(said):
        return BackendError(f"sbatch finds no node for {what} outside the banned ones ({', '.join(banned)}): {said}; "
                            "retried as bans expire (`fray nodes` lists them, `fray nodes unban NODE` lifts one)",
                            temporary=True)
    try:
        text = Path(request.script).read_text(errors="replace")
    except OSError:
        text = "\n".join(request.spec.sbatch)  # the #SBATCH lines at least, without their line numbers
    pointers = refusals.pointed(said, text, request.spec.to_dict())
    shown = Path(str((request.spec.code or {}).get("entry") or request.script)).name  # the user's name for it
    return BackendError(refusals.refusal(said, pointers, shown), temporary=False)


_need = partitions.need_of


def _slurm_config(home: Home) -> dict[str, Any]:
    from fray.state.config import load_config

    return load_config(home).get("slurm", {})
