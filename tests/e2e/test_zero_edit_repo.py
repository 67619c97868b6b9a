"""A repo nobody edited for fray runs under it: examples/zero_edit behaves like nanoGPT (prints `iter N: loss X`,
checkpoints to out/ckpt.pt, resumes with --init_from=resume, reads data/train.bin that its .gitignore names, logs to
W&B on request), and every test submits it with flags only, through a real daemon and the local backend, the job in
a Python without fray (but for the W&B test, whose job needs wandb).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from fray.state import store
from fray.wrapper import hangwatch
from tests.conftest import REPO, run_fray, schema_validate, wait_until
from tests.e2e.test_project_code import bare_python  # noqa: F401 - the fixture
from tests.tui_support import dashboard, run, screen_text, until

EXAMPLE = REPO / "examples" / "zero_edit"
PATTERN = "iter (?P<step>\\d+): loss (?P<loss>[0-9.]+), time (?P<iter_ms>[0-9.]+)ms"
INTERVAL = 10  # the repo's checkpoint interval in these runs


def the_repo(tmp_path: Path, git: bool = False) -> Path:
    """A copy of the example with its data prepared, as a plain folder or a git checkout (data untracked)."""
    repo = tmp_path / "zero edit's repo"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("__pycache__", "data", "out", "wandb"))
    subprocess.run([sys.executable, "prepare.py"], cwd=repo, check=True)
    if git:
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        subprocess.run(["git", "add", "."], cwd=repo, check=True)
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "repo"], cwd=repo, check=True)
    return repo


def submit(repo: Path, python: str, *script_args: str, extra: tuple[str, ...] = ()) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "fray.cli.main", "submit", "--json", "train.py", "--python", python,
         "--progress-pattern", PATTERN, "--retry-args", "--init_from=resume", "--retry-args-if-exists", "out/ckpt.pt",
         "--backoff-base", "0", "--heartbeat-interval", "1", *extra, "--", f"--checkpoint_interval={INTERVAL}",
         *script_args],
        cwd=repo, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    schema_validate("cli-submit", data)
    return data


def meta(home, run_id: str) -> dict:
    return store.read_json(home.meta_file(run_id), "meta") or {}


def progress_of(home, run_id: str, attempt: int) -> dict:
    path = home.run(run_id).attempt(attempt).progress
    return json.loads(path.read_text()) if path.exists() else {}


def workload_pid(home, run_id: str, attempt: int) -> int:
    started = home.run(run_id).attempt(attempt).started
    wait_until(started.exists, what="started.json")
    return json.loads(started.read_text())["workload_pid"]


def ended(home, run_id: str, timeout: float = 120) -> dict:
    wait_until(lambda: meta(home, run_id).get("phase") == "ended", timeout=timeout, what="the run to end")
    return meta(home, run_id)


def test_it_reports_progress_and_resumes_from_its_own_checkpoint_after_a_kill_9(home, daemon, tmp_path, bare_python):
    repo = the_repo(tmp_path)
    run_id = submit(repo, str(bare_python), "--max_iters=120", "--iter_time=0.04")["run_id"]
    wait_until(lambda: (progress_of(home, run_id, 1).get("step") or 0) >= 35, timeout=60, what="step 35")
    os.kill(workload_pid(home, run_id, 1), signal.SIGKILL)
    done = ended(home, run_id)
    assert done["end"]["status"] == "completed_success" and len(done["attempts"]) == 2
    first = [json.loads(line)["step"] for line in home.run(run_id).attempt(1).history.read_text().splitlines()]
    second = home.run(run_id).attempt(2).stdout.read_text()
    resumed_at = int(second.split("resuming from iteration ")[1].split()[0])
    assert 0 <= first[-1] - resumed_at <= INTERVAL  # redone: at most one checkpoint interval
    assert progress_of(home, run_id, 2)["step"] == 120 and "iter_ms" in progress_of(home, run_id, 2)["extra"]

    status = json.loads(run_fray("status", run_id, "--json", home=home.root, check=True).stdout)
    schema_validate("cli-status", status)
    assert [a["retry_args"]["added"] for a in status["attempts"]] == [False, True]
    assert status["workdir"] == {"path": str(home.run(run_id).code_dir), "in_snapshot": True}
    assert status["goodput"]["basis"] == "steps" and status["goodput"]["restarts"] == 1
    text = run_fray("status", run_id, home=home.root, check=True).stdout
    assert "attempt 2: added (attempt 2, and out/ckpt.pt exists)" in text and "progress from its output" in text
    plot = run_fray("plot", run_id, home=home.root, check=True).stdout
    assert "loss by step" in plot and "2 attempt(s)" in plot

    async def scenario():
        async with dashboard(home, size=(160, 90), run_id=run_id) as (app, pilot):
            await until(pilot, lambda: "loss by step" in screen_text(app), what="the loss curve")
            assert "m: next metric of loss, iter_ms" in screen_text(app)

    run(scenario())


def test_a_stopped_process_is_found_within_the_hang_bound_and_the_retry_resumes(home, daemon, tmp_path, bare_python):
    repo = the_repo(tmp_path)
    run_id = submit(repo, str(bare_python), "--max_iters=100000", "--iter_time=0.02")["run_id"]
    wait_until(lambda: (progress_of(home, run_id, 1).get("step") or 0) >= 15, timeout=60, what="step 15")
    os.kill(workload_pid(home, run_id, 1), signal.SIGSTOP)
    stopped_at = time.monotonic()
    wait_until(lambda: len(meta(home, run_id).get("attempts") or []) >= 2, timeout=30, what="attempt 2")
    took = time.monotonic() - stopped_at
    first = meta(home, run_id)["attempts"][0]
    assert first["cause"] == "hang_stopped"
    assert took <= hangwatch.STOPPED_AFTER_SEC + 2 * hangwatch.TICK_SEC + 5  # the bound, and the daemon's reaction
    wait_until(lambda: "resuming from iteration" in home.run(run_id).attempt(2).stdout.read_text()
               if home.run(run_id).attempt(2).stdout.exists() else False, timeout=30, what="attempt 2 to resume")
    run_fray("control", "stop", run_id, home=home.root, check=True)
    assert ended(home, run_id)["end"]["status"] == "stopped_manual"


def test_data_beside_the_code_named_in_gitignore_runs_on_the_first_try_outside_git(home, daemon, tmp_path, bare_python):
    repo = the_repo(tmp_path)
    data = submit(repo, str(bare_python), "--max_iters=5", "--iter_time=0")
    assert data["spec"]["code"]["left_out"] is None  # outside git a .gitignore is only a file
    done = ended(home, data["run_id"])
    assert done["end"]["status"] == "completed_success" and len(done["attempts"]) == 1


def test_in_a_git_checkout_it_is_told_at_submit_and_the_job_that_needs_it_is_not_retried(home, daemon, tmp_path,
                                                                                         bare_python):
    repo = the_repo(tmp_path, git=True)
    proc = subprocess.run([sys.executable, "-m", "fray.cli.main", "submit", "train.py", "--python", str(bare_python),
                           "--", "--max_iters=5"], cwd=repo, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    told = proc.stdout
    assert "left out of the snapshot: 1 file, 16.4 kB, by 1 rule:" in told
    assert ".gitignore:1 *.bin: 1 file, 16.4 kB: data/train.bin (16.4 kB)" in told
    run_id = told.split("submitted run ")[1].split()[0]
    done = ended(home, run_id)
    assert done["end"]["status"] == "failed_config" and len(done["attempts"]) == 1
    assert done["attempts"][0]["cause"] == "snapshot_left_out"
    assert ("the workload failed on data/train.bin, which the run's code snapshot left out (.gitignore:1 *.bin)"
            in done["end"]["reason"]) and "`!data/train.bin` in .frayignore" in done["end"]["reason"]
    (repo / ".frayignore").write_text("!data/train.bin\n")
    again = submit(repo, str(bare_python), "--max_iters=5", "--iter_time=0")
    assert again["spec"]["code"]["left_out"] is None
    assert ended(home, again["run_id"])["end"]["status"] == "completed_success"


def test_two_attempts_are_one_wandb_run(home, daemon, tmp_path):
    repo = the_repo(tmp_path)
    run_id = submit(repo, sys.executable, "--max_iters=400", "--iter_time=0.02", "--wandb_log=True",
                    extra=("--env", "WANDB_MODE=offline", "--env", "WANDB_SILENT=true"))["run_id"]
    wait_until(lambda: (progress_of(home, run_id, 1).get("step") or 0) >= 30, timeout=90, what="step 30")
    os.kill(workload_pid(home, run_id, 1), signal.SIGKILL)
    assert ended(home, run_id, timeout=180)["end"]["status"] == "completed_success"
    runs_dir = home.run(run_id).code_dir / "wandb"
    offline = sorted(p for p in runs_dir.iterdir() if p.name.startswith("offline-run-"))
    assert len(offline) == 2, offline  # one folder per attempt...
    assert all(p.name.endswith(run_id) and (p / f"run-{run_id}.wandb").is_file() for p in offline)  # ...one run
