"""`fray submit --remote HOST` on a project: the script named inside the synced copy, the code shown by status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fray.errors import UsageError
from fray.ops import detail
from fray.remote.submit_args import in_copy, locate, script_index
from tests.conftest import _kill_everything_of, run_fray
from tests.remote_support import remote_host, sshd  # noqa: F401


def test_the_script_is_found_among_submit_options_and_values():
    assert script_index(["submit", "train.py"]) == 1
    assert script_index(["--home", "/h", "submit", "--name", "x", "--wait", "--gpus=2", "-f", "a b.py", "--", "c"]) == 8
    assert script_index(["--json", "submit", "--sweep", "lr=1,2", "--env", "A=b", "train.py", "--max-retries", "0"]) == 6
    assert script_index(["submit", "--wait", "--", "x.py"]) is None  # nothing before `--` is a script
    assert script_index(["list", "train.py"]) is None
    assert script_index(["submit", "-m", "pkg.train", "--", "--lr", "1"]) is None  # a module: no script


def in_synced_copy(argv: list[str], project: Path, cwd: Path, remote_path: str) -> list[str]:
    return in_copy(argv, locate(argv, project, cwd), remote_path)


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


def test_a_run_in_place_in_the_synced_copy_shows_that_copy():
    spec = {"env": {"SYNCED_CODE_PATH": "/h/code/p", "SYNCED_CODE_HASH": "ab" * 32}}
    assert detail.synced_code(spec) == "in place, in the synced copy /h/code/p (tree abababababab)"
    assert detail.synced_code({"env": {}}) is None


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
        "import json, os, sys\n"
        "print(json.dumps({'cwd': os.getcwd(), 'marker': os.path.isfile('.fray-sync.json'),\n"
        "                  'model': os.path.isfile('model.py')}))\n")
    copy = remote_home / "code" / "project"
    try:
        monkeypatch.chdir(project)
        runs = {}
        for how in ("snapshot", "in place"):
            flags = ["--code", "none"] if how == "in place" else []
            submitted = run_fray("submit", "--wait", "--json", *flags, "scripts/train.py", "--remote",
                                 remote_host.alias, timeout=300)
            assert submitted.returncode == 0, submitted.stdout + submitted.stderr
            runs[how] = json.loads(submitted.stdout.splitlines()[-1])["run_id"]

        # Run in place: the script ran from the synced copy, whose root holds the sync's marker.
        ran = json.loads(run_fray("logs", runs["in place"], "--remote", remote_host.alias, check=True).stdout)
        assert ran == {"cwd": str(copy), "marker": True, "model": True}
        # With a snapshot, the snapshot was taken of the whole synced project, not of scripts/ alone.
        ran = json.loads(run_fray("logs", runs["snapshot"], "--remote", remote_host.alias, check=True).stdout)
        assert ran["model"] is True

        for how, expected in (("snapshot", f"of {copy}"), ("in place", f"in place, in the synced copy {copy}")):
            status = json.loads(run_fray("status", runs[how], "--json", "--remote", remote_host.alias,
                                         check=True).stdout)
            human = run_fray("status", runs[how], "--remote", remote_host.alias, check=True).stdout
            code_line = next(line for line in human.splitlines() if line.strip().startswith("code"))
            assert expected in code_line, code_line
            if how == "in place":
                assert f"tree {status['spec']['env']['SYNCED_CODE_HASH'][:12]}" in code_line

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
