"""`fray ... | head`: a reader that goes away early ends every command quietly, local and over `--remote`.

The reader here is the harshest `head`: its end of the pipe is closed before the
command writes a byte, so every first write meets a closed pipe. Each command
must then exit as click does locally (1), with no traceback on stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import _kill_everything_of, run_fray
from tests.remote_support import remote_host, sshd  # noqa: F401

pytestmark = pytest.mark.slow


def _into_closed_pipe(*args: str) -> subprocess.CompletedProcess[bytes]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line
    try:
        return subprocess.run([sys.executable, "-m", "fray.cli.main", *args], stdout=write_end,
                              stderr=subprocess.PIPE, timeout=300)
    finally:
        os.close(write_end)


WRITERS = ("submit", "sync", "remote")


def _commands(run_id: str) -> list[list[str]]:
    return [["list"], ["list", "--json"], ["status", run_id], ["status", run_id, "--json"], ["logs", run_id],
            ["logs", run_id, "--json"], ["nodes"], ["nodes", "list", "--json"], ["daemon", "status"], ["usage"],
            ["audit", "show"], ["submit", "job.py"], ["submit", "job.py", "--wait"], ["submit", "job.py", "--json"]]


def test_every_command_into_a_closed_pipe_exits_quietly_here_and_over_remote(remote_host, tmp_path, monkeypatch):
    remote_home, local_home = tmp_path / "remote home", tmp_path / "local home"
    monkeypatch.setenv("FRAY_REMOTE_HOME", str(remote_home))
    monkeypatch.setenv("FRAY_REMOTE_NO_MASTER", "1")
    monkeypatch.setenv("FRAY_HOME", str(local_home))
    project = tmp_path / "project"
    project.mkdir()
    (project / "job.py").write_text("for i in range(3000):\n    print('line', i)\n")
    monkeypatch.chdir(project)
    try:
        local_run = json.loads(run_fray("submit", "job.py", "--wait", "--json", check=True).stdout.splitlines()[-1])
        remote_run = json.loads(run_fray("submit", "job.py", "--wait", "--json", "--remote", remote_host.alias,
                                         check=True, timeout=300).stdout.splitlines()[-1])
        calls = [(where, argv + extra)
                 for where, extra, run_id in (("here", [], local_run["run_id"]),
                                              ("remote", ["--remote", remote_host.alias], remote_run["run_id"]))
                 for argv in _commands(run_id) + ([["sync"], ["sync", "--json"], ["remote", "trust", remote_host.alias]]
                                                  if where == "remote" else [])]
        # Each command has its own pipe and process. The readers go three at a time (they mostly wait on ssh and
        # on startup); the writers (submit, sync, trust: the same project and known_hosts) one after another.
        readers = [i for i, (_where, argv) in enumerate(calls) if argv[0] not in WRITERS]
        with ThreadPoolExecutor(max_workers=3) as pool:
            read = dict(zip(readers, pool.map(lambda i: _into_closed_pipe(*calls[i][1]), readers)))
        results = [read[i] if i in read else _into_closed_pipe(*argv) for i, (_where, argv) in enumerate(calls)]
        failures = []
        for (where, argv), done in zip(calls, results):
            stderr = done.stderr.decode(errors="replace")
            if done.returncode != 1 or "Traceback" in stderr or "BrokenPipe" in stderr:
                failures.append(f"{where}: fray {' '.join(argv)} exited {done.returncode}: {stderr[-500:]}")
        assert not failures, "\n".join(failures)
    finally:
        _kill_everything_of(remote_home)
        _kill_everything_of(local_home)


def test_a_bare_group_over_remote_answers_as_here(remote_host, tmp_path, monkeypatch):
    """`fray nodes --remote H` (not on a terminal) is `fray nodes list`, rendered here, as locally."""
    remote_home = tmp_path / "remote home"
    monkeypatch.setenv("FRAY_REMOTE_HOME", str(remote_home))
    monkeypatch.setenv("FRAY_REMOTE_NO_MASTER", "1")
    monkeypatch.setenv("FRAY_HOME", str(tmp_path / "laptop home"))
    try:
        over_ssh = run_fray("nodes", "--remote", remote_host.alias, timeout=120)
        assert over_ssh.returncode == 0, over_ssh.stderr
        assert "nodes" in over_ssh.stdout
        assert over_ssh.stdout == run_fray("nodes", home=remote_home, check=True).stdout
    finally:
        _kill_everything_of(remote_home)
