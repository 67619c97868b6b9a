"""Real projects run as written: their own modules, data files and packages, in the user's own Python.

Each run here is a real `fray submit` served by a real daemon and the local
backend, with the job in a bare virtual environment made by the test (no fray
installed in it), so `from fray import report` must come from the wrapper's
job-side helpers. Slurm, the TPU simulator and `--remote` run the same example
in their own test files.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fray.errors import UsageError
from fray.state import runs, snapshots
from tests.conftest import REPO, run_fray, schema_validate, wait_until

PROJECT = REPO / "examples" / "project"


def oldest_python() -> str:
    """The oldest Python 3.8+ on this machine (pyenv's, where present), else this one: the helpers must work
    in whatever Python a user's job has."""
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.[89].*/bin/python3")))
    return found[0] if found else sys.executable


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment without fray (nor pip): the user's own interpreter."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([oldest_python(), "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import fray"], capture_output=True, text=True,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert probe.returncode != 0, "the bare venv must not see fray"
    return python


def submit_json(*args: str, cwd: Path | None = None, code: int = 0, timeout: float = 120) -> dict:
    proc = subprocess.run([sys.executable, "-m", "fray.cli.main", "submit", "--json", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout)
    assert proc.returncode == code, proc.stdout + proc.stderr
    document = json.loads(proc.stdout)
    schema_validate("cli-submit", document)
    return document


def stdout_of(home, run_id: str, attempt: int) -> str:
    return home.run(run_id).attempt(attempt).stdout.read_text()


def test_the_example_project_runs_as_written_in_a_python_without_fray(home, daemon, bare_python):
    data = submit_json("--wait", "train.py", "--python", str(bare_python), "--", "--steps", "12", "--crash-at", "7",
                       cwd=PROJECT)
    assert data["end"]["status"] == "completed_success", data["end"]
    assert data["end"]["attempts"] == 2 and data["end"]["result"]["steps"] == 12
    code = data["spec"]["code"]
    assert code["entry"] == "examples/project/train.py" and code["cwd"] == "examples/project"
    assert code["git"] is not None and len(code["tree"]) == 64
    run_id = data["run_id"]
    second = stdout_of(home, run_id, 2)
    assert "40 points from points.csv" in second and "resuming at step 5" in second
    assert f"at {bare_python}" in second
    progress = json.loads(home.run(run_id).attempt(2).progress.read_text())
    assert progress["step"] == 12  # report.progress from the job-side helpers
    # The copy the attempts ran is the run's own, under FRAY_HOME, not the project folder.
    assert (home.run(run_id).code_dir / "examples" / "project" / "model.py").is_file()


def test_every_attempt_runs_the_code_that_was_submitted(home, daemon, tmp_path):
    project = tmp_path / "proj"
    (project / "lib").mkdir(parents=True)
    (project / "lib" / "__init__.py").write_text("")
    (project / "lib" / "version.py").write_text("VERSION = 'as submitted'\n")
    (project / "job.py").write_text(
        "import os, sys\nfrom lib.version import VERSION\nprint('running', VERSION, flush=True)\n"
        "sys.exit(1 if os.environ['FRAY_ATTEMPT'] == '1' else 0)\n")
    data = submit_json("job.py", "--max-retries", "1", "--backoff-base", "1s", "--heartbeat-interval", "1",
                       cwd=project)
    # Edited the moment the submit returned: the attempts still run what was submitted.
    (project / "lib" / "version.py").write_text("VERSION = 'edited later'\n")
    (project / "job.py").write_text("print('edited job')\n")
    wait_until(lambda: home.run(data["run_id"]).ended.exists(), timeout=90, what="the run to end")
    for attempt in (1, 2):
        assert stdout_of(home, data["run_id"], attempt) == "running as submitted\n"


def test_a_module_of_a_src_layout_runs_with_dash_m(home, daemon, tmp_path, bare_python):
    project = tmp_path / "srcproj"
    package = project / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("def answer():\n    return 42\n")
    (package / "train.py").write_text(
        "#FRAY --name by-module\nimport sys\nfrom pkg.helpers import answer\nfrom fray import report\n"
        "report.final(answer=answer(), argv=sys.argv[1:])\n")
    data = submit_json("--wait", "-m", "pkg.train", "--python", str(bare_python), "--", "--lr", "3", cwd=project)
    assert data["name"] == "by-module"
    assert data["spec"]["module"] == "pkg.train" and data["spec"]["code"]["entry"] is None
    assert data["end"]["status"] == "completed_success", home.run(data["run_id"]).attempt(1).stderr.read_text()
    assert data["end"]["result"] == {"answer": 42, "argv": ["--lr", "3"]}


def test_status_shows_the_code_and_the_interpreter(home, daemon, tmp_path, bare_python):
    project = tmp_path / "p"
    project.mkdir()
    (project / "a.py").write_text("print('hi')\n")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    run_id = submit_json("a.py", "--python", str(bare_python), cwd=project)["run_id"]
    human = run_fray("status", run_id, check=True).stdout
    assert "code:" in human and "of " + str(project) in human and "1 file" in human and "git no commit" in human
    assert f"python:    {bare_python}" in human or f"python: {bare_python}" in " ".join(human.split())
    status = json.loads(run_fray("status", run_id, "--json", check=True).stdout)
    assert status["spec"]["code"]["files"] == 1 and status["spec"]["python"] == str(bare_python)


def test_code_none_runs_the_script_where_it_is(home, daemon, tmp_path):
    project = tmp_path / "live"
    project.mkdir()
    (project / "helper.py").write_text("WHERE = 'live folder'\n")
    (project / "job.py").write_text("import os, helper\nprint(helper.WHERE, os.getcwd(), __file__)\n")
    data = submit_json("--wait", "job.py", "--code", "none", cwd=project)
    assert data["spec"]["code"] is None
    assert stdout_of(home, data["run_id"], 1).split() == ["live", "folder", str(project), str(project / "job.py")]


# ---------------------------------------------------------------- what goes into a snapshot


def make_project(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def tree_files(home, tree: str) -> set[str]:
    document = json.loads(home.snapshot_tree(tree).read_text())
    schema_validate("snapshot", document)
    return set(document["files"]) | set(document["links"])


def test_ignore_files_venvs_and_fray_home_stay_out(home, tmp_path):
    root = make_project(tmp_path / "proj", {
        "train.py": "", "model.py": "", ".gitignore": "*.log\noutputs/\n", ".frayignore": "data/big.bin\n",
        "run.log": "", "outputs/ckpt.pt": "", "data/small.csv": "", "data/big.bin": "",
        ".venv/pyvenv.cfg": "", ".venv/lib/site.py": "", "pkg/__pycache__/x.pyc": "", "pkg/__init__.py": ""})
    inner_home = type(home)(root / "state")
    (root / "state" / "runs").mkdir(parents=True)
    (root / "state" / "runs" / "meta.json").write_text("{}")
    taken = snapshots.take(inner_home, root)
    # Outside git a .gitignore is only a file: what it names (often the data) is taken.
    assert tree_files(inner_home, taken.tree) == {"train.py", "model.py", ".gitignore", ".frayignore", "run.log",
                                                    "outputs/ckpt.pt", "data/small.csv", "pkg/__init__.py"}
    assert {group["rule"]: group["files"] for group in taken.left_out.summary()["rules"]} == {
        ".frayignore:1 data/big.bin": 1, "FRAY_HOME": 0, "a virtual environment": 0}


def test_a_git_work_tree_is_listed_by_git(home, tmp_path):
    root = make_project(tmp_path / "repo", {"a.py": "", "sub/b.py": "", ".gitignore": "!keep.log\n*.tmp\n",
                                            "x.tmp": "", ".frayignore": "sub/\n"})
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "a.py"], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a"],
                   check=True)
    taken = snapshots.take(home, root)
    assert tree_files(home, taken.tree) == {"a.py", ".gitignore", ".frayignore"}
    assert taken.git is not None and len(taken.git["commit"]) == 40 and taken.git["dirty"]  # untracked files


def test_files_are_stored_once_across_snapshots_and_a_resubmit_reads_only_what_changed(home, tmp_path):
    root = make_project(tmp_path / "p", {f"m{i}.py": f"X = {i}\n" for i in range(50)})
    first = snapshots.take(home, root)
    objects = home.snapshots_dir / "objects"
    count = sum(1 for _ in objects.rglob("*") if _.is_file())
    (root / "m3.py").write_text("X = 'changed'\n")
    second = snapshots.take(home, root)
    assert first.tree != second.tree
    assert sum(1 for _ in objects.rglob("*") if _.is_file()) == count + 1  # only the changed file is new
    assert snapshots.take(home, root).tree == second.tree  # unchanged: the same tree


# ---------------------------------------------------------------- mistakes, refused at submit


def refused(home, tmp_path: Path, *args: str, cwd: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "fray.cli.main", "submit", *args], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "FRAY_HOME": str(home.root)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert not home.runs_dir.exists() or not any(home.runs_dir.iterdir()), "a refused submit wrote a run"
    return proc.stderr


def test_bad_interpreters_and_code_folders_are_refused_at_submit(home, tmp_path):
    project = make_project(tmp_path / "p", {"job.py": "print(1)\n", "nopy/readme": "", "sub/x.py": ""})
    (project / "out").symlink_to("/etc")
    assert "a link to /etc, outside the project" in refused(home, tmp_path, "job.py", cwd=project)
    (project / "out").unlink()
    assert "no such interpreter" in refused(home, tmp_path, "job.py", "--python", "/no/python3", cwd=project)
    assert "has no bin/python" in refused(home, tmp_path, "job.py", "--venv", "nopy", cwd=project)
    assert "give one" in refused(home, tmp_path, "job.py", "--python", sys.executable, "--venv", "nopy",
                                 cwd=project)
    assert "is not inside --code" in refused(home, tmp_path, "job.py", "--code", "sub", cwd=project)
    assert "not a folder" in refused(home, tmp_path, "job.py", "--code", "missing", cwd=project)
    assert "no such module" in refused(home, tmp_path, "-m", "pkg.nothing", cwd=project)
    (project / "job.py").write_text("#!/usr/bin/env python-that-is-not-here\nprint(1)\n")
    assert "python-that-is-not-here" in refused(home, tmp_path, "job.py", cwd=project)


def test_a_project_over_the_size_limit_is_refused_unless_forced(home, tmp_path, monkeypatch):
    project = make_project(tmp_path / "big", {"job.py": "print(1)\n", "weights.bin": "x" * 5000})
    monkeypatch.setattr(snapshots, "SIZE_LIMIT", 4000)
    options = runs.SubmitOptions(script=project / "job.py", overrides={}, workdir=str(project))
    with pytest.raises(UsageError, match=r"weights.bin .* --force"):
        runs.create_run(home, options)
    assert not any(home.runs_dir.iterdir()) and not home.snapshots_dir.exists()  # no run, nothing stored
    meta = runs.create_run(home, runs.SubmitOptions(script=project / "job.py", overrides={}, workdir=str(project),
                                                    force=True))
    assert meta.spec.code["bytes"] == 5009


def test_a_snapshot_cut_short_leaves_nothing_a_run_can_use(home, tmp_path, monkeypatch):
    project = make_project(tmp_path / "p", {f"f{i}.py": f"{i}\n" for i in range(20)})
    real_replace = os.replace
    calls = {"n": 0}

    def dies_halfway(src, dst):
        calls["n"] += 1
        if calls["n"] == 10:
            raise KeyboardInterrupt  # the CLI killed while storing objects
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", dies_halfway)
    with pytest.raises(KeyboardInterrupt):
        runs.create_run(home, runs.SubmitOptions(script=project / "f0.py", overrides={}, workdir=str(project)))
    monkeypatch.setattr(os, "replace", real_replace)
    assert not list(home.snapshots_dir.glob("trees/*.json"))  # no tree: nothing names the stored part
    assert not home.runs_dir.exists() or not any(home.runs_dir.iterdir())
    meta = runs.create_run(home, runs.SubmitOptions(script=project / "f0.py", overrides={}, workdir=str(project)))
    assert tree_files(home, meta.spec.code["tree"]) == {f"f{i}.py" for i in range(20)}


def test_snapshots_no_run_refers_to_are_removed(home, tmp_path):
    shared = "SHARED = 1\n"
    first = runs.create_run(home, runs.SubmitOptions(
        script=make_project(tmp_path / "a", {"job.py": "1\n", "common.py": shared}) / "job.py", overrides={},
        workdir=str(tmp_path / "a")))
    second = runs.create_run(home, runs.SubmitOptions(
        script=make_project(tmp_path / "b", {"job.py": "2\n", "common.py": shared}) / "job.py", overrides={},
        workdir=str(tmp_path / "b")))
    shutil.rmtree(home.run(first.run_id).dir)  # the first run is gone
    removed = snapshots.collect(home, {second.spec.code["tree"]}, keep_sec=0)
    assert removed == (1, 1)  # its tree, and its job.py; common.py is still used by the second
    assert not home.snapshot_tree(first.spec.code["tree"]).exists()
    assert home.snapshot_tree(second.spec.code["tree"]).exists()
    assert tree_files(home, second.spec.code["tree"]) == {"job.py", "common.py"}
