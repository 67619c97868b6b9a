"""The generated batch script and sbatch command line (pure; bash runs the script with a stub Python)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fray.backends.protocol import AttemptKey, SubmitRequest
from fray.backends.slurm.script import BatchJob, batch_script, node_count, sbatch_argv, sbatch_options
from fray.state.layout import Home
from fray.core.model import RunSpec

HOSTILE = "fray home's; $dir \\ \"q\"\nnewline"


def request(tmp_path: Path, spec: RunSpec, **extra) -> SubmitRequest:
    home = tmp_path / HOSTILE
    run = home / "runs" / "20261122-020522-r-d970"
    return SubmitRequest(key=AttemptKey("20261122-020522-r-d970", 3), name="it's $name", spec=spec, home=home,
                         script=run / "script.sh", attempt_dir=run / "attempts" / "3", checkpoint_dir=run / "checkpoints",
                         **extra)


def job(tmp_path: Path, spec: RunSpec | None = None, **extra) -> BatchJob:
    known = extra.pop("known_nodes", frozenset({"n1", "n2", "n3"}))
    gpu_type = extra.pop("gpu_type", None)
    return BatchJob(request(tmp_path, spec or RunSpec(backend="slurm"), **extra), "/usr/bin/python3", 120,
                    gpu_type=gpu_type, known_nodes=known)


def test_sbatch_options_reads_long_short_and_joined_forms() -> None:
    lines = ["#SBATCH -c 4 --mem=8G", "#SBATCH -p a100,h100  # a comment", "#SBATCH --gres gpu:a100:2",
             "#SBATCH -N2 --exclusive", "#SBATCH -x n1,n2", "#SBATCH --time=1:00:00"]
    assert sbatch_options(lines) == {"cpus-per-task": "4", "mem": "8G", "partition": "a100,h100",
                                     "gres": "gpu:a100:2", "nodes": "2", "exclusive": "", "exclude": "n1,n2",
                                     "time": "1:00:00"}


@pytest.mark.parametrize(("lines", "count"), [
    ([], 1), (["#SBATCH -N 2"], 2), (["#SBATCH --nodes=2-4"], 4), (["#SBATCH --nodes=1"], 1), (["#SBATCH -N1"], 1),
])
def test_node_count(lines: list[str], count: int) -> None:
    assert node_count(sbatch_options(lines)) == count


def test_fray_controls_name_comment_output_requeue_and_the_time_limit_signal(tmp_path: Path) -> None:
    batch = job(tmp_path)
    attempt = batch.request.attempt_dir
    argv = sbatch_argv(batch, attempt / "sbatch.sh", attempt / "50% done" / "slurm.log")
    assert argv[:2] == ["sbatch", "--parsable"]
    assert "--job-name=fray-20261122-020522-r-d970-3" in argv
    assert "--comment=fray:20261122-020522-r-d970:3" in argv
    assert f"--output={attempt}/50%% done/slurm.log" in argv  # sbatch would expand a lone %
    assert f"--error={attempt}/50%% done/slurm.log" in argv
    assert "--no-requeue" in argv and "--signal=B:USR1@120" in argv and f"--chdir={attempt}" in argv
    assert argv[-1] == str(attempt / "sbatch.sh")
    assert not [a for a in argv if a.startswith(("--partition", "--exclude", "--cpus", "--mem", "--gres"))]


def test_resources_map_to_sbatch_unless_the_users_sbatch_lines_set_them(tmp_path: Path) -> None:
    spec = RunSpec(backend="slurm", cpus=8, mem_mb=4096, gpus=2)
    argv = sbatch_argv(job(tmp_path, spec, gpu_type="h100"), Path("s"), Path("l"))
    assert {"--cpus-per-task=8", "--mem=4096M", "--gres=gpu:h100:2"} <= set(argv)
    assert "--gres=gpu:2" in sbatch_argv(job(tmp_path, spec), Path("s"), Path("l"))
    users = RunSpec(backend="slurm", cpus=8, mem_mb=4096, gpus=2,
                    sbatch=["#SBATCH --cpus-per-task=2 --mem-per-cpu=1G", "#SBATCH --gpus-per-node=1"])
    argv = sbatch_argv(job(tmp_path, users), Path("s"), Path("l"))
    assert not [a for a in argv if a.startswith(("--cpus", "--mem", "--gres"))]


def test_partition_and_exclude_from_the_request_merged_with_the_users_exclude(tmp_path: Path) -> None:
    spec = RunSpec(backend="slurm", sbatch=["#SBATCH --exclude=n9"])
    batch = job(tmp_path, spec, partition="h100", exclude_nodes=("n3", "vm", "n9"))
    argv = sbatch_argv(batch, Path("s"), Path("l"))
    assert "--partition=h100" in argv
    # "vm" is not a Slurm node (the blacklist is shared with the local backend): sbatch would refuse it.
    assert "--exclude=n9,n3" in argv and batch.exclude == ("n9", "n3")
    unknown = job(tmp_path, RunSpec(backend="slurm"), exclude_nodes=("n3",), known_nodes=None)
    assert unknown.exclude == ()  # without a node list nothing unknown is risked


def run_script(tmp_path: Path, text: str) -> list[str]:
    """Run the batch script with a stub Python that prints its arguments, one per line."""
    stub = tmp_path / "python"
    stub.write_text('#!/bin/bash\nprintf "%s\\0" "$@"\nprintf "ENV:%s\\0" "$WEIRD" "$FRAY_TASK_INDEX" "$FRAY_NUM_TASKS"\n')
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    script = tmp_path / "sbatch.sh"
    script.write_text(text.replace("/usr/bin/python3", str(stub)))
    env = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": "1234"}
    done = subprocess.run(["bash", str(script)], capture_output=True, env=env, check=True)
    return done.stdout.decode().split("\0")[:-1]


def test_every_value_reaches_the_wrapper_intact_through_bash(tmp_path: Path) -> None:
    args = ["two words", "$HOME", "it's", "back\\slash", "--", "%j", "line\nbreak", ""]
    spec = RunSpec(backend="slurm", args=args, env={"WEIRD": "a b $c \"d\" \\e `x`"}, workdir=HOSTILE,
                   heartbeat_interval_sec=0.5, stop_grace_sec=2.0, gpus=2, health_cmd="nvidia-smi -q | grep -q 'ECC'; $X")
    batch = job(tmp_path, spec)
    printed = run_script(tmp_path, batch_script(batch))
    r = batch.request
    assert printed == ["-m", "fray.wrapper", "run", "--home", str(r.home), "--run-id", r.key.run_id, "--attempt", "3",
                       "--attempt-dir", str(r.attempt_dir), "--script", str(r.script), "--job-name=it's $name",
                       f"--namespace={r.key.run_id}", "--workdir", HOSTILE, "--checkpoint-dir", str(r.checkpoint_dir),
                       "--heartbeat-interval", "0.5", "--stop-grace", "2.0",
                       "--fence-grace", repr(r.spec.heartbeat_timeout_sec / 2),
                       "--commands-dir", str(Home(r.home).run(r.key.run_id).commands_dir),
                       "--gpus", "2", "--progress-timeout", repr(spec.progress_timeout_sec),
                       "--health-cmd", "nvidia-smi -q | grep -q 'ECC'; $X", "--health-interval", repr(spec.health_interval_sec), "--health-retries", str(spec.health_retries), "--", *args,
                       "ENV:a b $c \"d\" \\e `x`", "ENV:0", "ENV:1"]


def test_the_users_sbatch_lines_come_first_and_verbatim(tmp_path: Path) -> None:
    lines = ["#SBATCH --time=1:00:00", "#SBATCH --job-name='mine $x'", "#SBATCH   -c 2   # spaced"]
    text = batch_script(job(tmp_path, RunSpec(backend="slurm", sbatch=lines)))
    assert text.splitlines()[:4] == ["#!/bin/bash", *lines]
    assert "#SBATCH" not in "\n".join(text.splitlines()[4:])  # nothing of ours Slurm would read as an option


def test_a_requeued_job_exits_at_once_without_starting_the_wrapper(tmp_path: Path) -> None:
    script = tmp_path / "sbatch.sh"
    script.write_text(batch_script(job(tmp_path)))
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "SLURM_RESTART_COUNT": "1"})
    assert done.returncode == 0 and "requeued" in done.stderr and done.stdout == ""


def test_several_nodes_start_one_wrapper_per_node_through_srun(tmp_path: Path) -> None:
    text = batch_script(job(tmp_path, RunSpec(backend="slurm", sbatch=["#SBATCH -N 2"])))
    srun = next(line for line in text.splitlines() if line.startswith("exec srun"))
    assert "--kill-on-bad-exit=1" in srun and "--ntasks-per-node=1" in srun
    assert 'task_dir="$task_dir/tasks/$SLURM_PROCID"' in text
    assert "FRAY_COORDINATOR_ADDRESS=" in text and "scontrol show hostnames" in text
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


def test_placement_constraints_become_sbatch_options(tmp_path: Path) -> None:
    spec = RunSpec(backend="slurm", gpus=2, constraints=["feature:ib", "gpu-type=h100", "hostname!=n2",
                                                           "partition in (gpu, gpu-long)"])
    batch = job(tmp_path, spec, gpu_type="a100")
    argv = sbatch_argv(batch, batch.request.attempt_dir / "sbatch.sh", batch.request.attempt_dir / "slurm.log")
    assert "--constraint=ib" in argv and "--gres=gpu:h100:2" in argv  # the constraint wins over the memory pick
    assert "--partition=gpu,gpu-long" in argv and "--exclude=n2" in argv
    mine = job(tmp_path, RunSpec(backend="slurm", constraints=["feature:ib"], sbatch=["#SBATCH -C nvme"]))
    assert not any(a.startswith("--constraint") for a in sbatch_argv(mine, Path("s"), Path("l")))  # the user's wins


def test_replicas_ask_for_one_allocation_with_one_task_per_node(tmp_path: Path) -> None:
    batch = job(tmp_path, RunSpec(backend="slurm", replicas=4, group_by="hostname"))
    argv = sbatch_argv(batch, Path("s"), Path("l"))
    assert "--nodes=4" in argv and "--ntasks-per-node=1" in argv
    text = batch_script(batch)
    assert any(line.startswith("exec srun --kill-on-bad-exit=1") for line in text.splitlines())  # one fails: all end
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


def test_a_sweeps_attempts_share_one_array_unless_their_options_differ(tmp_path) -> None:
    from fray.backends.slurm import arrays

    spec = RunSpec(backend="slurm", sbatch=["#SBATCH --time=5"])
    same = [job(tmp_path, spec), job(tmp_path, spec)]
    moved = job(tmp_path, spec, partition="h100")  # fell back to another partition: its own array
    parts = arrays.batches([same[0], moved, same[1]])
    assert parts == [[same[0], same[1]], [moved]]
    paths = Home(tmp_path / "home 100%").array("fray-array-g-abc123")
    argv = arrays.array_argv(parts[0][0], len(parts[0]), paths, "fray-array-g-abc123", "g", max_parallel=4)
    assert "--array=0-1" in argv  # %4 would limit nothing for two tasks
    assert f"--output={tmp_path}/home 100%%/arrays/fray-array-g-abc123/task-%a.log" in argv
    assert arrays.throttle(4, 20) == "%4" and arrays.throttle(None, 20) == ""


def _array_home(tmp_path: Path, recorded: dict[str, str]) -> tuple[Home, list[BatchJob], Any]:
    """A home with two attempts whose batch scripts say where they ran; `recorded`: run id -> the array job id
    its meta.json names (what the daemon records)."""
    from fray.backends.slurm import arrays

    home = Home(tmp_path / HOSTILE)
    jobs = []
    for run_id in ("20261122-020522-a-0001", "20261122-020522-b-0002"):
        folder = home.run(run_id).attempt(1)
        folder.dir.mkdir(parents=True)
        folder.slurm_script.write_text(f'echo "{run_id} ran in $PWD"\n')
        if run_id in recorded:
            record(home, run_id, recorded[run_id])
        jobs.append(BatchJob(SubmitRequest(key=AttemptKey(run_id, 1), name="n", spec=RunSpec(backend="slurm"),
                                           home=home.root, script=folder.dir / "script.sh", attempt_dir=folder.dir,
                                           checkpoint_dir=folder.dir), "/usr/bin/python3", 120))
    paths = home.array("fray-array-g-abc123")
    paths.dir.mkdir(parents=True)
    paths.tasks.write_text(arrays.tasks_text(home.root, [j.request.attempt_dir for j in jobs]))
    return home, jobs, paths


def record(home: Home, run_id: str, array_job_id: str) -> None:
    """meta.json as the daemon writes it, attempt 1 being task of array `array_job_id`."""
    from fray.state import store

    home.run(run_id).meta.write_bytes(store.dumps({"attempts": [{"number": 1, "backend_ref": {
        "job_id": f"{array_job_id}_0", "array_job_id": array_job_id}}]}))


def task(paths: Any, index: int, array_job_id: str = "77", wait: bool = True) -> Any:
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": str(index), "SLURM_ARRAY_JOB_ID": array_job_id}
    run = subprocess.run if wait else subprocess.Popen
    return run(["bash", str(paths.script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_array_task_i_runs_the_batch_script_of_the_attempt_on_line_i_plus_1_under_a_hostile_home(tmp_path) -> None:
    from fray.backends.slurm import arrays

    home, jobs, paths = _array_home(tmp_path, {"20261122-020522-b-0002": "77"})
    paths.script.write_text(arrays.array_script(home.root, jobs[0], len(jobs), paths, "g"))
    done = task(paths, 1)
    assert done.returncode == 0, done.stderr
    second = home.run("20261122-020522-b-0002").attempt(1)
    assert second.slurm_log.read_text() == f"20261122-020522-b-0002 ran in {second.dir}\n"
    assert not home.run("20261122-020522-a-0001").attempt(1).slurm_log.exists()
    missing = task(paths, 2)
    assert missing.returncode == 1 and "array task 2 has no line" in missing.stderr


def test_an_array_task_waits_for_the_daemon_to_record_it_and_one_of_an_unrecorded_array_runs_nothing(tmp_path) -> None:
    """A new sweep's array is submitted before its runs are written (fray.daemon.sweeps): a task that starts
    first waits for its run to name its array; a task of an array no run names (lost in a daemon crash and
    submitted again under another id) gives up without running anything."""
    from fray.backends.slurm import arrays

    home, jobs, paths = _array_home(tmp_path, {})
    paths.script.write_text(arrays.array_script(home.root, jobs[0], len(jobs), paths, "g", wait_sec=30))
    early = task(paths, 0, wait=False)
    first = home.run("20261122-020522-a-0001").attempt(1)
    assert early.poll() is None and not first.slurm_log.exists()  # waiting: nothing names array 77 yet
    record(home, "20261122-020522-a-0001", "77")
    out, err = early.communicate(timeout=30)
    assert early.returncode == 0, err
    assert first.slurm_log.read_text() == f"20261122-020522-a-0001 ran in {first.dir}\n"
    record(home, "20261122-020522-b-0002", "77")
    paths.script.write_text(arrays.array_script(home.root, jobs[0], len(jobs), paths, "g", wait_sec=1))
    lost = task(paths, 1, array_job_id="76")
    assert lost.returncode == 1 and "is not array job 76's" in lost.stderr
    assert not home.run("20261122-020522-b-0002").attempt(1).slurm_log.exists()
