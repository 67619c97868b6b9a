"""`fray submit --remote HOST` on a project: the script named inside the synced copy, the code shown by status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fray.errors import UsageError
from fray.ops import detail
from fray.remote.submit_args import in_synced_copy, script_index
from tests.conftest import _kill_everything_of, run_fray
from tests.remote_support import remote_host, sshd  # noqa: F401


def test_the_script_is_found_among_submit_options_and_values():
    assert script_index(["submit", "train.py"]) == 1
    assert script_index(["--home", "/h", "submit", "--name", "x", "--wait", "--gpus=2", "-f", "a b.py", "--", "c"]) == 8
    assert script_index(["--json", "submit", "--sweep", "lr=1,2", "--env", "A=b", "train.py", "--max-retries", "0"]) == 6
    assert script_index(["submit", "--wait", "--", "x.py"]) is None  # nothing before `--` is a script
    assert script_index(["list", "train.py"]) is None


def test_the_script_is_named_by_its_path_in_the_synced_copy(tmp_path):
    project = tmp_path / "my project"
    (project / "scripts").mkdir(parents=True)
    copy = "/remote home/code/my project"
    assert in_synced_copy(["submit", "--wait", "scripts/train.py", "--", "--lr", "1"], project, project, copy) == [
        "submit", "--wait", f"{copy}/scripts/train.py", "--", "--lr", "1"]
    # From a folder inside the project, and by absolute path: the same file, the same place in the copy.
    assert in_synced_copy(["submit", "train.py"], project, project / "scripts", copy)[1] == f"{copy}/scripts/train.py"
    assert in_synced_copy(["submit", str(project / "t.py")], project, project, copy)[1] == f"{copy}/t.py"
    with pytest.raises(UsageError, match="outside .*my project"):
        in_synced_copy(["submit", "../elsewhere.py"], project, project, copy)
    assert in_synced_copy(["status", "r1"], project, project, copy) == ["status", "r1"]


def test_the_code_line_shows_whatever_the_record_has():
    synced = {"spec": {"env": {"SYNCED_CODE_PATH": "/h/code/p", "SYNCED_CODE_HASH": "ab" * 32}}}
    assert detail.code_summary(detail.code_record(synced)) == "/h/code/p (tree abababababab)"
    snapshot = {"code": {"path": "/h/snapshots/1f", "hash": "1f" * 32, "files": 12, "git_commit": "9f8e7d6c5b4a3",
                         "dirty": True}, **synced}
    assert detail.code_summary(detail.code_record(snapshot)) == "/h/snapshots/1f (tree 1f1f1f1f1f1f, 12 files, " \
                                                                "git 9f8e7d6c5b, dirty)"
    assert detail.code_record({"spec": {"env": {}}}) is None


@pytest.mark.slow
def test_a_remote_submit_runs_the_script_in_the_synced_project_and_status_shows_the_code(remote_host, tmp_path,
                                                                                          monkeypatch):
    remote_home = tmp_path / "remote home"
    monkeypatch.setenv("FRAY_REMOTE_HOME", str(remote_home))
    monkeypatch.setenv("FRAY_REMOTE_NO_MASTER", "1")
    monkeypatch.setenv("FRAY_HOME", str(tmp_path / "laptop home"))
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    (project / "model.py").write_text("WIDTH = 3\n")
    (project / "scripts" / "train.py").write_text(
        "import json, os\n"
        "root = os.getcwd()  # the frozen script runs elsewhere today (issue 20, parts 1-2): its folder is the copy\n"
        "print(json.dumps({'root': root, 'marker': os.path.isfile(os.path.join(root, '.fray-sync.json')),\n"
        "                  'model': os.path.isfile(os.path.join(root, 'model.py'))}))\n")
    try:
        monkeypatch.chdir(project)
        submitted = run_fray("submit", "--wait", "--json", "scripts/train.py", "--remote", remote_host.alias,
                             timeout=300)
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        run_id = json.loads(submitted.stdout.splitlines()[-1])["run_id"]
        copy = remote_home / "code" / "project"
        status = json.loads(run_fray("status", run_id, "--json", "--remote", remote_host.alias, check=True).stdout)
        assert status["script"]["source"] == str(copy / "scripts" / "train.py")  # the script inside the copy
        ran = json.loads(run_fray("logs", run_id, "--remote", remote_host.alias, check=True).stdout)
        assert ran == {"root": str(copy), "marker": True, "model": True}

        human = run_fray("status", run_id, "--remote", remote_host.alias, check=True).stdout
        code_line = next(line for line in human.splitlines() if line.strip().startswith("code"))
        tree = status["spec"]["env"]["SYNCED_CODE_HASH"]
        assert str(copy) in code_line and f"tree {tree[:12]}" in code_line

        monkeypatch.chdir(project / "scripts")
        outside = run_fray("submit", "../model.py", "--remote", remote_host.alias)
        assert outside.returncode == 2 and "outside" in outside.stderr and "Traceback" not in outside.stderr
        assert not (remote_home / "code" / "scripts").exists()  # refused before anything was copied
    finally:
        _kill_everything_of(remote_home)


def test_the_sync_marker_stays_at_the_root_of_the_copy():
    from fray.remote import sync

    assert sync.MANIFEST == ".fray-sync.json"  # the lead's snapshot finds the project root by it
    assert Path(sync.code_folder("/h", Path("/x/proj"))) == Path("/h/code/proj")
