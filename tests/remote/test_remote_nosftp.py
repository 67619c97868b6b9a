"""A login node whose sshd has no SFTP subsystem: files travel over exec channels, and nothing breaks.

The second sshd of tests/remote_support.py has no `Subsystem sftp` line, so
`open_sftp` is refused there as it is on such clusters. Sync, bootstrap, the
cluster API's file access and the CLI must all still work, and every failure
must be the documented exit 255 with a message, never a traceback.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Iterator

import cloudpickle
import pytest

from fray.remote import command, connection, sync
from fray.remote.errors import RemoteCommandFailed
from fray.remote.files import ShellFiles, open_files
from tests.conftest import _kill_everything_of, run_fray
from tests.remote_support import RemoteHost, Sshd, sshd_without_sftp, write_ssh_config  # noqa: F401

ALIAS = "no-sftp"
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def doubled(values: list[int]) -> list[int]:
    return [2 * v for v in values]


@pytest.fixture
def bare_host(sshd_without_sftp: Sshd, tmp_path: Path, monkeypatch) -> Iterator[RemoteHost]:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(sshd_without_sftp.known_hosts_line())
    config = tmp_path / "ssh_config"
    write_ssh_config(config, sshd_without_sftp, known_hosts, alias=ALIAS)
    monkeypatch.setenv("FRAY_SSH_CONFIG", str(config))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    yield RemoteHost(ALIAS, sshd_without_sftp, config, known_hosts)
    connection.close_all()


def test_the_server_really_refuses_sftp_and_files_fall_back_to_exec_channels(bare_host, tmp_path):
    import paramiko

    conn = connection.connect(ALIAS)
    with pytest.raises(paramiko.SSHException):
        conn.client.open_sftp()
    files = open_files(conn)
    assert isinstance(files, ShellFiles)

    base = tmp_path / "remote side"
    (tmp_path / "here").mkdir()
    odd = tmp_path / "here" / "it's a $(name) `x`.txt"
    odd.write_bytes(b"0123456789")
    odd.chmod(0o640)
    files.put_tree(str(base), [(odd, "sub dir/" + odd.name)], dirs=["private"], dir_mode=0o700)
    there = base / "sub dir" / odd.name
    assert there.read_bytes() == b"0123456789" and stat.S_IMODE(there.stat().st_mode) == 0o640
    assert stat.S_IMODE((base / "private").stat().st_mode) == 0o700
    assert files.read(str(there), offset=4) == b"456789"
    assert files.stat(str(there)).size == 10 and files.stat(str(there)).uid == os.getuid()
    assert sorted(files.listdir(str(base))) == ["private", "sub dir"]
    files.write(str(base / "manifest.json"), b'{"a": 1}\n')
    assert (base / "manifest.json").read_bytes() == b'{"a": 1}\n'
    files.rename(str(base / "private"), str(base / "renamed"))
    assert (base / "renamed").is_dir() and not (base / "private").exists()
    files.remove([str(there), str(base / "never existed")])
    assert not there.exists()
    for missing in (lambda: files.read(str(base / "nope")), lambda: files.stat(str(base / "nope")),
                    lambda: files.listdir(str(base / "nope"))):
        with pytest.raises(FileNotFoundError):
            missing()
    (tmp_path / "locked").mkdir(mode=0o500)
    if os.getuid() != 0:  # root writes anywhere: the refusal needs an ordinary user
        with pytest.raises(RemoteCommandFailed, match="writing .* on no-sftp failed"):
            files.write(str(tmp_path / "locked" / "x"), b"x")


def test_sync_without_sftp_sends_only_what_changed(bare_host, tmp_path):
    project, copy = tmp_path / "project", tmp_path / "remote home" / "code" / "project"
    (project / "pkg").mkdir(parents=True)
    for i in range(20):
        (project / "pkg" / f"mod{i}.py").write_text(f"VALUE = {i}\n")
    (project / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (project / "run.sh").chmod(0o755)
    (project / ".gitignore").write_text("outputs/\n")
    (project / "outputs").mkdir()
    (project / "outputs" / "big.bin").write_bytes(b"x" * 100)
    conn = connection.connect(ALIAS)

    first = sync.sync(conn, project, str(copy))
    assert len(first.sent) == 22 and not (copy / "outputs").exists()
    assert os.access(copy / "run.sh", os.X_OK)
    assert json.loads((copy / sync.MANIFEST).read_text()) == sync.manifest(project)  # the marker at the root
    (project / "pkg" / "mod3.py").write_text("VALUE = 'changed'\n")
    (project / "pkg" / "mod4.py").unlink()
    second = sync.sync(conn, project, str(copy))
    assert (second.sent, second.removed) == (("pkg/mod3.py",), ("pkg/mod4.py",))
    assert (copy / "pkg" / "mod3.py").read_text() == "VALUE = 'changed'\n" and not (copy / "pkg" / "mod4.py").exists()
    assert sync.sync(conn, project, str(copy)).sent == ()


@pytest.mark.slow
def test_bootstrap_cli_and_the_cluster_api_work_on_a_host_without_sftp(bare_host, tmp_path, monkeypatch):
    from fray import Entrypoint, JobRequest
    from fray.cluster.remote import RemoteCluster
    from fray.remote import bootstrap

    remote_home = tmp_path / "remote home"
    monkeypatch.setenv("FRAY_REMOTE_HOME", str(remote_home))
    monkeypatch.setenv("FRAY_REMOTE_NO_MASTER", "1")
    monkeypatch.setenv("FRAY_HOME", str(tmp_path / "laptop home"))
    try:
        # fray missing there (any fray on the remote's PATH counts as older): installed over exec channels.
        real_version = bootstrap.local_version()
        monkeypatch.setattr(bootstrap, "local_version", lambda: real_version + ".1")
        conn = connection.connect(ALIAS)
        installed = bootstrap.ensure(conn, str(remote_home))
        assert installed.executable == str(remote_home / "venv" / "bin" / "fray")
        assert command.run(conn, [installed.executable, "--version"]).exit_code == 0
        monkeypatch.undo()
        monkeypatch.setenv("FRAY_REMOTE_HOME", str(remote_home))
        monkeypatch.setenv("FRAY_REMOTE_NO_MASTER", "1")
        monkeypatch.setenv("FRAY_HOME", str(tmp_path / "laptop home"))
        monkeypatch.setenv("FRAY_SSH_CONFIG", str(bare_host.config))

        # The cluster API: runs uploaded as folders, results and metadata read back, all without SFTP.
        cluster = RemoteCluster(ALIAS, home=str(remote_home))
        job = cluster.launch(JobRequest("double", Entrypoint.from_callable(doubled, ([1, 2, 3],))))
        assert cluster.wait(job, raise_on_failure=True, timeout=180).result == [2, 4, 6]
        assert [j.job_id for j in cluster.list_jobs()] == [job]

        # The CLI: sync, submit and logs; then a failure there is exit 255 with a message, not a traceback.
        project = tmp_path / "project"
        project.mkdir()
        (project / "train.py").write_text("print('trained without sftp')\n")
        monkeypatch.chdir(project)
        synced = run_fray("sync", "--json", "--remote", ALIAS, check=True)
        assert json.loads(synced.stdout)["sent"] == ["train.py"]
        submitted = run_fray("submit", "train.py", "--wait", "--json", "--remote", ALIAS, timeout=300)
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        run_id = json.loads(submitted.stdout.splitlines()[-1])["run_id"]
        assert run_fray("logs", run_id, "--remote", ALIAS, check=True).stdout == "trained without sftp\n"

        blocked = tmp_path / "not a folder"
        blocked.write_text("a file where the remote home's code folder would go")
        monkeypatch.setenv("FRAY_REMOTE_HOME", str(blocked))
        refused = run_fray("sync", "--remote", ALIAS)
        assert refused.returncode == 255, refused.stderr
        assert "Traceback" not in refused.stderr and refused.stderr.startswith("fray: error: ")
        assert "FRAY_REMOTE_HOME" in refused.stderr  # what to do
    finally:
        connection.close_all()
        _kill_everything_of(remote_home)


def test_a_failure_of_the_link_itself_becomes_the_documented_exit_255():
    import socket

    import paramiko

    from fray.remote.errors import from_transport

    for exc in (paramiko.SSHException("Channel closed."), EOFError(), socket.timeout("timed out"),
                ConnectionResetError(104, "Connection reset by peer")):
        failure = from_transport(exc, "login")
        assert failure is not None and failure.exit_code == 255 and "ssh login" in str(failure)
    assert from_transport(BrokenPipeError(), "login") is None  # a reader that left: quiet, not an error
    assert from_transport(ValueError("a bug"), "login") is None  # a bug stays a bug
