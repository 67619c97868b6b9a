"""examples/project over `--remote` to the real test sshd: on the remote's local backend and on its Slurm.

The laptop runs the real CLI from the project's folder; the folder is synced to
the login node, and the run's code snapshot is taken there from the synced copy
(its top is the project), so the job imports its own modules and reports
through `from fray import report` in a Python without fray (a bare venv).
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import _kill_everything_of, run_fray
from tests.remote_support import remote_host, sshd  # noqa: F401 - fixtures
from tests.e2e.test_project_code import PROJECT, bare_python  # noqa: F401 - a fixture
from tests.backends.slurm.test_slurm_backend import FAST

pytestmark = pytest.mark.slow


def run_remotely(remote_host, tmp_path, monkeypatch, python, *flags: str, entry: tuple[str, ...] = ("train.py",)) -> None:  # noqa: ANN001
    remote_home = tmp_path / "login node home"
    remote_home.mkdir()
    (remote_home / "config.json").write_text(json.dumps({"slurm": FAST}))
    monkeypatch.setenv("FRAY_REMOTE_HOME", str(remote_home))
    monkeypatch.setenv("FRAY_REMOTE_NO_MASTER", "1")
    monkeypatch.setenv("FRAY_HOME", str(tmp_path / "laptop home"))
    monkeypatch.chdir(PROJECT)
    try:
        submitted = run_fray("submit", *entry, "--wait", "--json", "--remote", remote_host.alias, "--python",
                             str(python), *flags, "--", "--steps", "12", "--crash-at", "7", timeout=300)
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        data = json.loads(submitted.stdout.splitlines()[-1])
        assert data["end"]["status"] == "completed_success" and data["end"]["attempts"] == 2, data["end"]
        code = data["spec"]["code"]
        assert code["root"] == str(remote_home / "code" / "project")
        assert code["entry"] == (None if entry[0] == "-m" else "train.py")
        logs = run_fray("logs", data["run_id"], "--remote", remote_host.alias, check=True).stdout
        assert "40 points from points.csv" in logs and "resuming at step 5" in logs and f"at {python}" in logs
        status = json.loads(run_fray("status", data["run_id"], "--json", "--remote", remote_host.alias,
                                     check=True).stdout)
        assert status["progress"]["step"] == 12  # report.progress, through the job-side helpers
    finally:
        _kill_everything_of(remote_home)


def test_the_example_project_runs_over_remote_on_the_login_node(remote_host, tmp_path, monkeypatch, bare_python):  # noqa: F811
    run_remotely(remote_host, tmp_path, monkeypatch, bare_python)


def test_the_example_project_runs_as_a_module_over_remote(remote_host, tmp_path, monkeypatch, bare_python):  # noqa: F811
    run_remotely(remote_host, tmp_path, monkeypatch, bare_python, entry=("-m", "train"))


def test_the_example_project_runs_over_remote_on_its_slurm(slurm_cluster, remote_host, tmp_path, monkeypatch,  # noqa: F811
                                                           bare_python):
    run_remotely(remote_host, tmp_path, monkeypatch, bare_python, "--backend", "slurm", "--mem", "100M")
