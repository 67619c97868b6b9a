"""Reading Slurm's output and what each job state means for fray (pure, no Slurm needed)."""

from __future__ import annotations

import pytest

from fray.backends.protocol import AttemptKey
from fray.backends.slurm.parse import (
    FINAL_STATES, PENDING_STATES, RUNNING_STATES, JobRecord, QueueRow, job_name, key_of, parse_exit_code,
    parse_sacct, parse_sbatch, parse_scontrol, parse_squeue, split_state, view_of_finished, view_of_queued,
)

REF = {"job_id": "7"}

# Real `scontrol --oneliner show job` output from the test cluster: paths with spaces,
# a Reason, a Comment, and fields after them.
SCONTROL = (
    "JobId=60 JobName=fray-x-9 UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901700 Nice=0 "
    "Account=(null) QOS=(null) JobState=FAILED Reason=JobLaunchFailure Dependency=(null) Requeue=1 Restarts=0 "
    "BatchFlag=1 Reboot=0 ExitCode=0:53 RunTime=00:00:00 TimeLimit=365-00:00:00 Partition=cpu "
    "AllocNode:Sid=localhost:18073 ReqNodeList=(null) ExcNodeList=(null) NodeList=n1 BatchHost=n1 NumNodes=1 "
    "Command=(null) WorkDir=/tmp/exp Comment=fray:x:9  StdErr=/tmp/exp/a b/out JobState=RUNNING 60.log "
    "StdIn=/dev/null StdOut=/tmp/exp/a b/out 60.log Power= \n"
    "JobId=61 JobName=other UserId=u(1000) JobState=CANCELLED Reason=None Restarts=2 ExitCode=0:15 "
    "NodeList=(null) Comment=(null)\n"
)


def test_job_names_carry_the_run_and_attempt() -> None:
    key = AttemptKey("20261122-020522-train-gpt-d970", 12)
    assert job_name(key) == "fray-20261122-020522-train-gpt-d970-12"
    assert key_of(job_name(key)) == key
    assert key_of("train") is None and key_of("fray-x") is None


@pytest.mark.parametrize(("stdout", "job_id"), [
    ("123\n", "123"), ("123;cluster\n", "123"), ("sbatch: warning: x\n456\n", "456"), ("", None), ("oops\n", None),
])
def test_parse_sbatch(stdout: str, job_id: str | None) -> None:
    assert parse_sbatch(stdout) == job_id


def test_parse_squeue_puts_the_free_text_name_last() -> None:
    text = ("5|RUNNING|n[1-2]|0|None|fray-r-1\n"
            "6|PENDING|(null)|1|BeginTime|fray-a|b-2\n"  # a name with '|' cannot shift the other fields
            "garbage\n\n")
    assert parse_squeue(text) == [
        QueueRow("5", "RUNNING", "n[1-2]", 0, "None", "fray-r-1"),
        QueueRow("6", "PENDING", "", 1, "BeginTime", "fray-a|b-2"),
    ]


def test_parse_sacct_reads_cancelled_by_and_unassigned_nodes() -> None:
    text = "7|fray-r-1|CANCELLED by 1000|0:15|n3\n8|fray-r-2|PENDING|0:0|None assigned\n9|x|COMPLETED|0:0\n"
    records = parse_sacct(text)
    assert records["7"] == JobRecord("7", "fray-r-1", "CANCELLED", "0:15", "n3", cancelled_by="1000")
    assert records["8"].nodes == "" and "9" not in records


def test_parse_scontrol_keeps_values_with_spaces_and_the_first_of_a_key() -> None:
    records = parse_scontrol(SCONTROL)
    first = records["60"]
    assert (first.name, first.state, first.exit_code, first.nodes, first.reason) == (
        "fray-x-9", "FAILED", "0:53", "n1", "JobLaunchFailure")
    assert records["61"] == JobRecord("61", "other", "CANCELLED", "0:15", "", "None", restarts=2)
    assert parse_scontrol("No jobs in the system\n") == {}


@pytest.mark.parametrize(("text", "expected"), [
    ("CANCELLED by 0", ("CANCELLED", "0")), ("CANCELLED by 1000", ("CANCELLED", "1000")),
    ("RUNNING", ("RUNNING", None)), ("COMPLETING+", ("COMPLETING", None)), ("", ("", None)),
])
def test_split_state(text: str, expected: tuple[str, str | None]) -> None:
    assert split_state(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("0:0", (0, 0)), ("50:0", (50, 0)), ("0:9", (0, 9)), ("143:0", (143, 0)), ("", (None, None)), ("x:y", (None, None)),
])
def test_parse_exit_code_is_status_then_signal(text: str, expected: tuple[int | None, int | None]) -> None:
    assert parse_exit_code(text) == expected


def _row(state: str, restarts: int = 0, reason: str = "None") -> QueueRow:
    return QueueRow("7", state, "n2", restarts, reason, "fray-r-1")


@pytest.mark.parametrize("state", sorted(PENDING_STATES))
def test_waiting_states_are_pending_with_the_reason(state: str) -> None:
    view = view_of_queued(_row(state, reason="Resources"), REF)
    words = "Slurm: waiting for resources: the nodes it needs are busy (Resources)"
    assert (view.state, view.detail, view.held, view.ref) == ("pending", words, words, REF)


@pytest.mark.parametrize("state", sorted(RUNNING_STATES))
def test_states_that_hold_the_nodes_are_running(state: str) -> None:
    view = view_of_queued(_row(state), REF)
    assert (view.state, view.node) == ("running", "n2")
    assert view.detail == (None if state == "RUNNING" else state.lower())


@pytest.mark.parametrize(("state", "restarts"), [("REQUEUED", 0), ("REQUEUE_FED", 0), ("PENDING", 1)])
def test_a_requeued_job_is_over_for_fray(state: str, restarts: int) -> None:
    view = view_of_queued(_row(state, restarts, "BeginTime"), REF)
    assert (view.state, view.cause) == ("gone", "preempted")
    assert "requeued" in (view.detail or "")


def test_a_terminal_state_still_in_squeue_reads_as_finished() -> None:
    view = view_of_queued(_row("CANCELLED"), REF)
    assert (view.state, view.cause) == ("gone", "preempted")


@pytest.mark.parametrize(("state", "exit_code", "cause", "words"), [
    ("COMPLETED", "0:0", "lost", "no exit record"),
    ("FAILED", "1:0", "lost", "batch script failed"),
    ("FAILED", "0:53", "lost", "batch script failed"),
    ("FAILED", "50:0", "workload_failure", "workload failed"),
    ("FAILED", "42:0", "node_fault", "node fault (wrapper exit 42)"),
    ("FAILED", "44:0", "node_fault", "node fault (wrapper exit 44)"),
    ("FAILED", "127:0", "node_fault", "could not start on the node (exit 127)"),
    ("CANCELLED", "0:15", "preempted", "cancelled outside fray"),
    ("TIMEOUT", "0:15", "preempted", "time limit"),
    ("DEADLINE", "0:0", "preempted", "deadline"),
    ("PREEMPTED", "0:15", "preempted", "preempted by Slurm"),
    ("NODE_FAIL", "0:0", "node_fault", "NODE_FAIL"),
    ("BOOT_FAIL", "0:0", "node_fault", "BOOT_FAIL"),
    ("OUT_OF_MEMORY", "0:125", "workload_failure", "out of memory"),
    ("REVOKED", "0:0", "preempted", "revoked"),
    ("SPECIAL_EXIT", "0:0", "lost", "SPECIAL_EXIT"),
    ("WEIRD_NEW_STATE", "0:0", "lost", "ended in state WEIRD_NEW_STATE"),
])
def test_every_final_state_has_a_cause_and_says_why(state: str, exit_code: str, cause: str, words: str) -> None:
    view = view_of_finished(JobRecord("7", "fray-r-1", state, exit_code, "n2", "NodeDown"), REF)
    assert (view.state, view.cause, view.node, view.ref) == ("gone", cause, "n2", REF)
    assert words in (view.detail or "")
    assert f"exit {exit_code} (status:signal)" in (view.detail or "")
    assert "reason NodeDown" in (view.detail or "")


def test_every_documented_final_state_is_in_the_table() -> None:
    documented = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
                  "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT"}
    assert documented <= set(FINAL_STATES)


def test_cancelled_by_names_the_uid() -> None:
    view = view_of_finished(JobRecord("7", "fray-r-1", "CANCELLED", "0:15", cancelled_by="0"), REF)
    assert "CANCELLED by uid 0" in (view.detail or "")


def test_array_tasks_are_named_by_array_job_and_index_in_squeue_and_scontrol() -> None:
    from fray.backends.slurm.parse import SQUEUE_FIELDS

    assert SQUEUE_FIELDS[0] == "JobArrayID"  # squeue --array prints 123_4 there, a plain job's id otherwise
    rows = parse_squeue("12_0|RUNNING|n1|0|None|fray-array-g-1a2b3c\n12_5|PENDING||0|JobArrayTaskLimit|fray-array-g-1a2b3c\n"
                        "13|RUNNING|n2|0|None|fray-x-1\n")
    assert [(r.job_id, r.state) for r in rows] == [("12_0", "RUNNING"), ("12_5", "PENDING"), ("13", "RUNNING")]
    text = ("JobId=14 ArrayJobId=12 ArrayTaskId=3 ArrayTaskThrottle=4 JobName=fray-array-g-1a2b3c JobState=FAILED "
            "Reason=NonZeroExitCode ExitCode=50:0 NodeList=n3\n"
            "JobId=12 ArrayJobId=12 ArrayTaskId=6-19%4 JobName=fray-array-g-1a2b3c JobState=PENDING ExitCode=0:0\n")
    records = parse_scontrol(text)
    assert records["12_3"].state == "FAILED" and records["12_3"].exit_code == "50:0" and records["12_3"].nodes == "n3"
    assert "12" in records  # the array's pending rest keeps its plain id


def test_sbatch_answers_are_judged_by_what_a_later_try_could_change() -> None:
    from fray.backends.external import CommandResult
    from fray.backends.slurm.refusals import Answer, judge, words

    def said(stderr: str, code: int | None = 1, timed_out: bool = False) -> CommandResult:
        return CommandResult(("sbatch",), code, "", stderr, timed_out, 1.0)

    for transient in ("sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)",
                      "sbatch: error: Slurm temporarily unable to accept job, sleeping and retrying",
                      "sbatch: error: QOSMaxSubmitJobPerUserLimit",
                      "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job submit limit,"
                      " user's size and/or time limits)",
                      "sbatch: error: Batch job submission failed: Required partition not available (inactive or drain)"):
        assert judge(said(transient)) is Answer.TRANSIENT, transient
    assert judge(said("sbatch: No such file or directory", code=127)) is Answer.TRANSIENT  # no sbatch on PATH
    for ambiguous in (said("", timed_out=True, code=None),
                      said("sbatch: error: Batch job submission failed: Socket timed out on send/recv operation")):
        assert judge(ambiguous) is Answer.AMBIGUOUS
    for refused in ("sbatch: option '--tim=1:00:00' is ambiguous; possibilities: '--time' '--time-min'",
                    "sbatch: error: invalid partition specified: gpu-big",
                    "sbatch: error: Batch job submission failed: Requested node configuration is not available",
                    "sbatch: error: Batch job submission failed: Invalid account or account/partition combination "
                    "specified", "sbatch: error: something no list has heard of"):
        assert judge(said(refused)) is Answer.REFUSED, refused
    assert words(said("sbatch: unrecognized option '--bogus'\nTry \"sbatch --help\" for more information")) == \
        "unrecognized option '--bogus'"


def test_a_refusal_points_at_the_script_line_it_is_about_or_at_frays_own_flag() -> None:
    from fray.backends.slurm.refusals import pointed

    script = "#!/bin/bash\n#FRAY --gpus 2\n#SBATCH -p gpu-big\n#SBATCH --time=1:00:00\necho hi\n"
    assert [str(p) for p in pointed("invalid partition specified: gpu-big", script, {})] == \
        ["line 3: #SBATCH -p gpu-big"]
    assert [str(p) for p in pointed("Requested time limit is invalid (missing or exceeds some limit)", script)] == \
        ["line 4: #SBATCH --time=1:00:00"]
    assert [str(p) for p in pointed("Invalid generic resource (gres) specification", script, {"gpus": 2})] == \
        ["fray's --gpus 2 (sent to sbatch as --gres)"]


def test_pending_reasons_in_words_and_those_no_wait_can_change() -> None:
    from fray.backends.slurm.parse import pending_detail

    assert pending_detail("Resources") == "Slurm: waiting for resources: the nodes it needs are busy (Resources)"
    assert pending_detail("(Priority)").startswith("Slurm: waiting for its turn")
    assert "held by a limit of its QOS" in pending_detail("QOSMaxJobsPerUserLimit")
    assert pending_detail("ReqNodeNotAvail, UnavailableNodes:n3,n4").startswith(
        "Slurm: the nodes it may use are not available now")
    for never in ("PartitionTimeLimit", "QOSMaxWallDurationPerJobLimit", "BadConstraints", "AssocMaxCpuPerJobLimit"):
        assert pending_detail(never).startswith("Slurm: can never start as it is"), never
