"""What Slurm's commands print, read into records, and what each job state means for fray.

    parse_squeue(text)   -> list[QueueRow]      (the SQUEUE_FORMAT fields)
    parse_sacct(text)    -> dict[id, JobRecord] (the SACCT_FIELDS, --parsable2)
    parse_scontrol(text) -> dict[id, JobRecord] (`scontrol --oneliner show job`)

A job array's task is `<array job id>_<index>` everywhere here (squeue's
JobArrayID, sacct's JobID, scontrol's ArrayJobId and ArrayTaskId), as in
the references of attempts submitted in an array.
    view_of_queued(row) / view_of_finished(record) -> BackendView
    pending_detail(reason): a pending job's reason in words (can it ever start?)
    job_name(key) / key_of(name): the name that carries a run id and attempt

Every job state Slurm documents maps to one of fray's views: waiting
(pending), alive (running), or over (gone, with the `cause` policy uses when
the wrapper left no exit record). Pure: text in, records out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fray.backends.protocol import AttemptKey
from fray.core.model import Cause
from fray.core.observation import BackendView, ViewState
from fray.wrapper import contract

JOB_PREFIX = "fray-"
_JOB_NAME = re.compile(r"^fray-(?P<run>.+)-(?P<attempt>[0-9]+)$")

# squeue --Format: width 0 means "as wide as needed"; the name goes last since it
# is the one field a user could fill with anything, '|' included.
# JobArrayID is the job id, or `<array job id>_<index>` for an array task (with squeue --array).
SQUEUE_FIELDS = ("JobArrayID", "State", "NodeList", "RestartCnt", "Reason", "Name")
SQUEUE_FORMAT = ",".join(f"{f}:0|" for f in SQUEUE_FIELDS[:-1]) + f",{SQUEUE_FIELDS[-1]}:0"
SACCT_FIELDS = ("JobID", "JobName", "State", "ExitCode", "NodeList")

# Slurm's pending reasons (squeue %r, Slurm 20-24) in words, and whether the job can never start as it is:
# Slurm accepts a job over a partition's or a QOS's per-job limit (EnforcePartLimits=NO) and keeps it pending.
PENDING_WORDS: dict[str, str] = {
    "None": "queued, not yet looked at by the scheduler",
    "Resources": "waiting for resources: the nodes it needs are busy",
    "Priority": "waiting for its turn: jobs of higher priority are ahead of it",
    "Dependency": "waiting for a job it depends on",
    "BeginTime": "waiting for its --begin time",
    "Reservation": "waiting for its reservation to start",
    "ReqNodeNotAvail": "the nodes it may use are not available now (down, drained or reserved)",
    "NodeDown": "a node it needs is down",
    "PartitionDown": "its partition is down",
    "Licenses": "waiting for licenses",
    "JobHeldUser": "held by its user (`scontrol release JOBID` lets it go)",
    "JobHeldAdmin": "held by an administrator",
    "Cleaning": "waiting for the node of an earlier job to be cleaned up",
}
NEVER_WORDS: dict[str, str] = {
    "PartitionTimeLimit": "its time limit is over its partition's MaxTime",
    "PartitionNodeLimit": "it asks for more nodes than its partition allows",
    "PartitionConfig": "its partition's configuration cannot take it (a limit it exceeds)",
    "PartitionInactive": "its partition is inactive",
    "BadConstraints": "no node has what its constraints ask",
    "InvalidQOS": "its QOS is not valid",
    "InvalidAccount": "its account is not valid",
    "ReservationDeleted": "the reservation it asks for was deleted",
    "AccountNotAllowed": "its account may not use the partition",
    "QOSNotAllowed": "its QOS may not be used on the partition",
}

# States in which the job waits for resources.
PENDING_STATES = frozenset({"PENDING", "CONFIGURING", "RESV_DEL_HOLD", "REQUEUE_HOLD"})
# States in which the job holds its nodes and the wrapper may be running.
RUNNING_STATES = frozenset({"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT",
                            "RESIZING", "UPDATE_DB", "POWER_UP_NODE"})
# Slurm put the job back in the queue: fray starts a new attempt itself (the batch
# script of a requeued job exits at once, see slurm_script).
REQUEUED_STATES = frozenset({"REQUEUED", "REQUEUE_FED"})

# A terminal state without the wrapper's exit record: (cause, what it means).
FINAL_STATES: dict[str, tuple[str, str]] = {
    "COMPLETED": (Cause.LOST.value, "Slurm says the job completed, but the wrapper left no exit record"),
    "FAILED": (Cause.LOST.value, "the batch script failed before the wrapper could report"),
    "CANCELLED": (Cause.PREEMPTED.value, "cancelled outside fray (scancel?); `fray control stop` stops a run"),
    "TIMEOUT": (Cause.PREEMPTED.value, "reached its Slurm time limit; resumed in a new attempt"),
    "DEADLINE": (Cause.PREEMPTED.value, "reached its Slurm deadline"),
    "PREEMPTED": (Cause.PREEMPTED.value, "preempted by Slurm"),
    "NODE_FAIL": (Cause.NODE_FAULT.value, "its node failed (NODE_FAIL)"),
    "BOOT_FAIL": (Cause.NODE_FAULT.value, "its node failed to boot (BOOT_FAIL)"),
    "OUT_OF_MEMORY": (Cause.WORKLOAD_FAILURE.value, "out of memory: ask for more with --mem"),
    "REVOKED": (Cause.PREEMPTED.value, "revoked by a federated cluster"),
    "SPECIAL_EXIT": (Cause.LOST.value, "ended in SPECIAL_EXIT"),
}
# The batch script's exit status when the shell could not run the wrapper's Python
# there (not found, not executable): the node's environment is at fault.
_NOT_STARTED_EXITS = frozenset({126, 127})


@dataclass(frozen=True)
class QueueRow:
    job_id: str
    state: str
    nodes: str
    restarts: int
    reason: str
    name: str


@dataclass(frozen=True)
class JobRecord:
    """A job as accounting (sacct) or the controller (scontrol) remembers it."""

    job_id: str
    name: str
    state: str  # the bare state: "CANCELLED", not "CANCELLED by 0"
    exit_code: str  # "status:signal"
    nodes: str = ""
    reason: str = ""
    cancelled_by: str | None = None  # the uid in "CANCELLED by <uid>"
    restarts: int = 0


def job_name(key: AttemptKey) -> str:
    return f"{JOB_PREFIX}{key.run_id}-{key.attempt}"


def key_of(name: str) -> AttemptKey | None:
    match = _JOB_NAME.match(name)
    return AttemptKey(match["run"], int(match["attempt"])) if match else None


def parse_sbatch(stdout: str) -> str | None:
    """The job id from `sbatch --parsable` ("123" or "123;cluster")."""
    first = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    job_id = first.split(";", 1)[0].strip()
    return job_id if job_id.isdigit() else None


def parse_squeue(text: str) -> list[QueueRow]:
    rows = []
    for line in text.splitlines():
        parts = line.split("|", len(SQUEUE_FIELDS) - 1)
        if len(parts) != len(SQUEUE_FIELDS) or not parts[0].strip():
            continue
        job_id, state, nodes, restarts, reason, name = (p.strip() for p in parts)
        rows.append(QueueRow(job_id, state.split()[0] if state else "", "" if nodes == "(null)" else nodes,
                             int(restarts) if restarts.isdigit() else 0, reason, name))
    return rows


def parse_sacct(text: str) -> dict[str, JobRecord]:
    """Rows of `sacct --parsable2 --noheader --allocations --format=<SACCT_FIELDS>`."""
    records = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) != len(SACCT_FIELDS) or not parts[0].strip():
            continue
        job_id, name, state, exit_code, nodes = parts
        bare, by = split_state(state)
        records[job_id] = JobRecord(job_id, name, bare, exit_code, "" if nodes == "None assigned" else nodes,
                                    cancelled_by=by)
    return records


def parse_scontrol(text: str) -> dict[str, JobRecord]:
    """Every job of `scontrol --oneliner show job` (one line each)."""
    records = {}
    for line in text.splitlines():
        fields = _key_values(line)
        job_id = fields.get("JobId")
        if not job_id:
            continue
        task = fields.get("ArrayTaskId", "")
        if task.isdigit() and fields.get("ArrayJobId", "").isdigit():
            job_id = f"{fields['ArrayJobId']}_{task}"  # an array task, as squeue and fray's references name it
        nodes = fields.get("NodeList", "")
        records[job_id] = JobRecord(
            job_id, fields.get("JobName", ""), split_state(fields.get("JobState", ""))[0],
            fields.get("ExitCode", ""), "" if nodes == "(null)" else nodes, fields.get("Reason", ""),
            restarts=int(fields["Restarts"]) if fields.get("Restarts", "").isdigit() else 0,
        )
    return records


_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")


def _key_values(line: str) -> dict[str, str]:
    """Key=Value pairs of one scontrol line. A value may hold spaces (Reason, paths),
    so it runs up to the next ` Key=`; the first occurrence of a key wins, so a
    path that happens to contain ` JobState=` cannot override the real field."""
    found: dict[str, str] = {}
    matches = list(_KEY.finditer(line))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(line)
        found.setdefault(match.group(1), line[match.end():end].strip())
    return found


def split_state(state: str) -> tuple[str, str | None]:
    """("CANCELLED", "0") from "CANCELLED by 0"; ("RUNNING", None) from "RUNNING"."""
    words = state.split()
    if not words:
        return "", None
    by = words[2] if len(words) >= 3 and words[1] == "by" else None
    return words[0].rstrip("+"), by


def parse_exit_code(text: str) -> tuple[int | None, int | None]:
    """(status, signal) from Slurm's `status:signal`, e.g. "50:0" -> (50, 0), "0:9" -> (0, 9)."""
    status, _, signal = text.strip().partition(":")
    return (int(status) if status.isdigit() else None, int(signal) if signal.isdigit() else None)


def view_of_queued(row: QueueRow, ref: dict[str, object]) -> BackendView:
    """The view of a job squeue still lists."""
    node = row.nodes or None
    if row.state in REQUEUED_STATES or (row.restarts and row.state in PENDING_STATES):
        return BackendView(ViewState.GONE, node=node, ref=ref, cause=Cause.PREEMPTED.value,
                           detail=f"Slurm requeued the job ({row.state}, reason {row.reason}); fray starts a new attempt")
    if row.state in PENDING_STATES:
        detail = pending_detail(row.reason)
        return BackendView(ViewState.PENDING, ref=ref, detail=detail, held=detail)
    if row.state in RUNNING_STATES:
        detail = None if row.state == "RUNNING" else row.state.lower()
        return BackendView(ViewState.RUNNING, node=node, ref=ref, detail=detail)
    return view_of_finished(JobRecord(row.job_id, row.name, row.state, "", row.nodes, row.reason), ref)


def view_of_finished(record: JobRecord, ref: dict[str, object]) -> BackendView:
    """The view of a job that has left the queue: gone, with the cause its final state implies."""
    node = record.nodes or None
    status, signal = parse_exit_code(record.exit_code)
    cause, meaning = FINAL_STATES.get(record.state, (Cause.LOST.value, f"ended in state {record.state or 'unknown'}"))
    if record.state == "FAILED" and status is not None:
        if status in contract.NODE_FAULT_EXITS or status in _NOT_STARTED_EXITS:
            cause = Cause.NODE_FAULT.value
            meaning = (f"the wrapper could not start on the node (exit {status})" if status in _NOT_STARTED_EXITS
                       else f"node fault (wrapper exit {status})")
        elif status == contract.EXIT_WORKLOAD_FAILURE:
            cause, meaning = Cause.WORKLOAD_FAILURE.value, "the workload failed"
    parts = [f"Slurm: {record.state or 'unknown'}"]
    if record.cancelled_by is not None:
        parts[0] += f" by uid {record.cancelled_by}"
    if record.exit_code:
        parts.append(f"exit {record.exit_code} (status:signal)")
    if record.reason and record.reason not in ("None", "NonZeroExitCode"):
        parts.append(f"reason {record.reason}")
    if node:
        parts.append(f"on {node}")
    return BackendView(ViewState.GONE, node=node, ref=ref, cause=cause, detail=f"{meaning} [{', '.join(parts)}]")


def pending_detail(reason: str) -> str:
    """A pending job's reason in words, with Slurm's own; one no wait can change says it can never start.

    "Resources" -> "Slurm: waiting for resources: the nodes it needs are busy (Resources)"
    "QOSMaxWallDurationPerJobLimit" -> "Slurm: can never start as it is: over a per-job limit of its QOS ..."
    """
    reason = reason.strip().strip("()")
    code = reason.split(",")[0].split(":")[0].strip() or "None"
    if code in NEVER_WORDS or (code.endswith("PerJobLimit") or code.endswith("PerJob")):
        words = NEVER_WORDS.get(code) or f"over a per-job limit of its {'QOS' if code.startswith('QOS') else 'account'}"
        return (f"Slurm: can never start as it is: {words} ({reason}); `fray control stop RUN`, then submit it "
                "with less or elsewhere")
    words = PENDING_WORDS.get(code)
    if words is None and (code.startswith("QOS") or code.startswith("Assoc")):
        words = f"held by a limit of its {'QOS' if code.startswith('QOS') else 'account'}: it starts as its jobs end"
    return f"Slurm: {words or 'pending'} ({reason})"
