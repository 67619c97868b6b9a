"""The Slurm backend against recorded command output: the failures a healthy test cluster
cannot be made to show on demand (sacct with accounting, hung or refused commands).

Each test replays what the commands printed and checks which calls the backend makes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fray.backends.protocol import AttemptKey, CancelTarget, SubmitRequest, Tracked
from fray.backends.external import CommandResult
from fray.backends.slurm.backend import SlurmBackend
from fray.errors import AmbiguousSubmission, BackendError
from fray.state.layout import Home
from fray.core.model import RunSpec
from fray.core.partition_policy import Candidates

KEY = AttemptKey("20261122-020522-r-d970", 1)
NAME = "fray-20261122-020522-r-d970-1"


def ok(stdout: str = "") -> tuple[int | None, str, str, bool]:
    return (0, stdout, "", False)


def failed(stderr: str, code: int = 1) -> tuple[int | None, str, str, bool]:
    return (code, "", stderr, False)


HUNG = (None, "", "", True)


class Recorded:
    """Replays answers per command name, in order, and records every call."""

    def __init__(self, **answers: list[tuple[int | None, str, str, bool]]) -> None:
        self.answers = {name: list(items) for name, items in answers.items()}
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv, timeout) -> CommandResult:
        self.calls.append(tuple(argv))
        code, out, err, timed_out = self.answers[argv[0]].pop(0)
        return CommandResult(tuple(argv), code, out, err, timed_out, timeout if timed_out else 0.01)

    def names(self) -> list[str]:
        return [argv[0] for argv in self.calls]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def backend(tmp_path: Path, runner: Recorded, clock: Clock | None = None, **settings) -> SlurmBackend:
    config = {"min_snapshot_interval_sec": 10.0, "sinfo_ttl_sec": 60.0, **settings}
    return SlurmBackend(Home(tmp_path / "home"), config=config, runner=runner, clock=clock or Clock())


def squeue_line(job_id: str, state: str, name: str = NAME, nodes: str = "n1") -> str:
    return f"{job_id}|{state}|{nodes}|0|None|{name}\n"


def test_a_failed_squeue_is_a_backend_error_so_the_daemon_logs_it_and_knows_nothing() -> None:
    runner = Recorded(squeue=[failed("slurm_load_jobs error: Unable to contact slurm controller")])
    with pytest.raises(BackendError, match="Unable to contact slurm controller"):
        backend(Path("/nonexistent"), runner).snapshot([Tracked(KEY, {"job_id": "7"})])


def test_squeue_runs_once_per_interval_and_a_newer_job_is_unknown_until_the_next(tmp_path) -> None:
    clock = Clock()
    runner = Recorded(squeue=[ok(squeue_line("7", "RUNNING")), ok(squeue_line("7", "RUNNING") + squeue_line(
        "8", "PENDING", "fray-other-1"))])
    slurm = backend(tmp_path, runner, clock)
    first = slurm.snapshot([Tracked(KEY, {"job_id": "7"})])
    assert first[KEY].state == "running"
    clock.now += 5
    slurm._submitted_at["8"] = clock.now  # as submit() records it
    other = AttemptKey("other", 1)
    cached = slurm.snapshot([Tracked(KEY, {"job_id": "7"}), Tracked(other, {"job_id": "8"})])
    assert runner.names() == ["squeue"] and KEY in cached and other not in cached  # unknown, not gone
    clock.now += 6
    fresh = slurm.snapshot([Tracked(other, {"job_id": "8"})])
    assert runner.names() == ["squeue", "squeue"] and fresh[other].state == "pending"


def test_a_finished_job_is_read_from_sacct_when_accounting_works(tmp_path) -> None:
    runner = Recorded(squeue=[ok("")], sacct=[ok(f"7|{NAME}|NODE_FAIL|0:0|n3\n")])
    view = backend(tmp_path, runner).snapshot([Tracked(KEY, {"job_id": "7"})])[KEY]
    assert (view.state, view.cause, view.node) == ("gone", "node_fault", "n3")
    assert runner.names() == ["squeue", "sacct"]
    sacct = runner.calls[1]
    assert "--parsable2" in sacct and "--jobs=7" in sacct


def test_without_accounting_scontrol_answers_and_sacct_is_not_asked_again_soon(tmp_path) -> None:
    clock = Clock()
    scontrol = f"JobId=7 JobName={NAME} JobState=CANCELLED Reason=None Restarts=0 ExitCode=0:15 NodeList=n2\n"
    runner = Recorded(squeue=[ok(""), ok("")], sacct=[failed("Slurm accounting storage is disabled")],
                      scontrol=[ok(scontrol), ok(scontrol)])
    slurm = backend(tmp_path, runner, clock)
    view = slurm.snapshot([Tracked(KEY, {"job_id": "7"})])[KEY]
    assert (view.state, view.cause) == ("gone", "preempted")
    clock.now += 30
    slurm.snapshot([Tracked(KEY, {"job_id": "7"})])
    assert runner.names() == ["squeue", "sacct", "scontrol", "squeue", "scontrol"]
    assert runner.calls[2] == ("scontrol", "--oneliner", "show", "job")  # all jobs in one call


def test_what_sacct_does_not_know_yet_comes_from_scontrol(tmp_path) -> None:
    other = AttemptKey("r2", 1)
    runner = Recorded(squeue=[ok("")], sacct=[ok(f"7|{NAME}|COMPLETED|0:0|n1\n")],
                      scontrol=[ok("JobId=8 JobName=fray-r2-1 JobState=TIMEOUT ExitCode=0:15 NodeList=n4\n")])
    views = backend(tmp_path, runner).snapshot([Tracked(KEY, {"job_id": "7"}), Tracked(other, {"job_id": "8"})])
    assert views[KEY].cause == "lost" and views[other].cause == "preempted"
    assert runner.names() == ["squeue", "sacct", "scontrol"]


def test_a_job_nobody_remembers_is_gone_without_a_cause(tmp_path) -> None:
    runner = Recorded(squeue=[ok("")], sacct=[HUNG], scontrol=[HUNG])
    view = backend(tmp_path, runner).snapshot([Tracked(KEY, {"job_id": "7"})])[KEY]
    assert (view.state, view.cause) == ("gone", None)  # policy reads exit.json, else calls it lost


def request(tmp_path: Path) -> SubmitRequest:
    run = tmp_path / "home" / "runs" / KEY.run_id
    return SubmitRequest(key=KEY, name="r", spec=RunSpec(backend="slurm"), home=tmp_path / "home",
                         script=run / "script.sh", attempt_dir=run / "attempts" / "1", checkpoint_dir=run / "checkpoints")


@pytest.mark.parametrize("answer", [HUNG, failed("sbatch: error: Socket timed out on send/recv operation"), ok("")])
def test_an_sbatch_without_a_clear_answer_is_ambiguous_and_found_later_by_name(tmp_path, answer) -> None:
    clock = Clock()
    runner = Recorded(sinfo=[ok("")], sbatch=[answer], squeue=[ok(squeue_line("9", "PENDING"))])
    slurm = backend(tmp_path, runner, clock)
    with pytest.raises(AmbiguousSubmission):
        slurm.submit(request(tmp_path))
    clock.now += 1
    view = slurm.snapshot([Tracked(KEY, None)])[KEY]
    assert (view.state, view.ref) == ("pending", {"job_id": "9", "job_name": NAME})


def test_an_sbatch_refusal_is_a_plain_backend_error(tmp_path) -> None:
    runner = Recorded(sinfo=[ok("")], sbatch=[failed("sbatch: error: invalid partition specified: nosuch")])
    with pytest.raises(BackendError, match="invalid partition") as caught:
        backend(tmp_path, runner).submit(request(tmp_path))
    assert not isinstance(caught.value, AmbiguousSubmission)


def test_cancel_signals_running_jobs_and_removes_pending_ones_in_one_call_each(tmp_path) -> None:
    runner = Recorded(squeue=[ok(squeue_line("7", "RUNNING") + squeue_line("8", "PENDING", "fray-b-1")
                                 + squeue_line("9", "RUNNING", "fray-c-1"))],
                      scancel=[failed("scancel: error: Kill job error on job id 9: Invalid job id specified"), ok()])
    slurm = backend(tmp_path, runner)
    slurm.snapshot([Tracked(KEY, {"job_id": "7"})])
    slurm.cancel([CancelTarget(KEY, {"job_id": "7"}), CancelTarget(AttemptKey("b", 1), None),
                  CancelTarget(AttemptKey("c", 1), {"job_id": "9"}, force=True),
                  CancelTarget(AttemptKey("never", 1), None)])
    # The pending first, so that none starts in the room the stopping ones leave (an array's %K).
    assert runner.calls[1:] == [("scancel", "8", "9"), ("scancel", "--signal=TERM", "--full", "7")]


def test_a_cancel_that_really_fails_is_reported(tmp_path) -> None:
    runner = Recorded(scancel=[HUNG])
    with pytest.raises(BackendError, match="timed out"):
        backend(tmp_path, runner).cancel([CancelTarget(KEY, {"job_id": "7"})])


def test_partition_candidates(tmp_path) -> None:
    sinfo = "n1|a100|up|idle|4|2000|gpu:a100:2\nn3|h100|up|idle|4|2000|gpu:h100:4\n"
    runner = Recorded(sinfo=[ok(sinfo)])
    slurm = backend(tmp_path, runner)
    assert slurm.partition_candidates(RunSpec(backend="slurm")) is None
    assert slurm.partition_candidates(RunSpec(backend="slurm", gpus=1, sbatch=["#SBATCH -p mine"])) is None
    assert slurm.partition_candidates(RunSpec(backend="slurm", gpus=1, prefer="max")) == Candidates(("h100", "a100"))
    assert runner.names() == ["sinfo"]  # cached


def test_without_sinfo_named_partitions_are_tried_and_gpu_runs_wait(tmp_path) -> None:
    runner = Recorded(sinfo=[HUNG, HUNG])
    slurm = backend(tmp_path, runner, sinfo_ttl_sec=0.0)
    named = slurm.partition_candidates(RunSpec(backend="slurm", partitions=["a", "b"]))
    assert named == Candidates(("a", "b"))
    waiting = slurm.partition_candidates(RunSpec(backend="slurm", gpus=1))
    assert waiting is not None and waiting.chain == () and "sinfo failed" in waiting.reason
