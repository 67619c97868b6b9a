"""The SSH transport against a real sshd: host keys, quoting, exit codes, errors, sync."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from fray.errors import UsageError
from fray.remote import command, connection, host_keys, sync
from fray.remote.errors import AuthenticationFailed, ChangedHostKey, UnknownHostKey, UnreachableHost
from fray.remote.ssh_config import resolve
from tests.remote_support import RemoteHost, _keygen, remote_host, sshd, write_ssh_config  # noqa: F401

ECHO_ARGV = [sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))"]


def _server_fingerprint(remote: RemoteHost) -> str:
    import base64

    import paramiko

    key_type, key_b64 = remote.sshd.host_key_pub.read_text().split()[:2]
    return host_keys.fingerprint(paramiko.PKey.from_type_string(key_type, base64.b64decode(key_b64)))


def test_unknown_host_is_refused_with_its_fingerprint_and_trusted_only_on_request(remote_host):
    remote_host.known_hosts.write_text("")
    with pytest.raises(UnknownHostKey) as refused:
        connection.connect(remote_host.alias)
    message = str(refused.value)
    assert _server_fingerprint(remote_host) in message
    assert f"fray remote trust {remote_host.alias}" in message
    assert remote_host.known_hosts.read_text() == ""  # never added silently

    trusted = host_keys.trust(resolve(remote_host.alias))
    assert (trusted.key_type, trusted.fingerprint) == ("ssh-ed25519", _server_fingerprint(remote_host))
    conn = connection.connect(remote_host.alias)
    assert command.run(conn, ["true"]).exit_code == 0


def test_changed_host_key_is_refused_loudly(remote_host, tmp_path):
    _keygen(tmp_path / "other")
    key_type, key_b64 = (tmp_path / "other.pub").read_text().split()[:2]
    remote_host.known_hosts.write_text(f"[127.0.0.1]:{remote_host.sshd.port} {key_type} {key_b64}\n")
    before = remote_host.known_hosts.read_text()
    with pytest.raises(ChangedHostKey) as refused:
        connection.connect(remote_host.alias)
    assert "HAS CHANGED" in str(refused.value)
    assert _server_fingerprint(remote_host) in str(refused.value)
    with pytest.raises(ChangedHostKey):
        host_keys.trust(resolve(remote_host.alias))  # trust does not overwrite a changed key either
    assert remote_host.known_hosts.read_text() == before


def test_hostile_arguments_reach_the_remote_unchanged_and_execute_nothing(remote_host, tmp_path):
    marker = tmp_path / "x"
    hostile = [
        f"run $(touch {marker})",
        f"`touch {marker}`",
        f"a; touch {marker}",
        "quote ' and \" and \\",
        "new\nline",
        "dollar $HOME * ?",
        "",
    ]
    conn = connection.connect(remote_host.alias)
    result = command.run(conn, [*ECHO_ARGV, *hostile], env={"FRAY_HOME": f"/tmp/a b/$(touch {marker})"})
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == hostile
    assert not marker.exists()


def test_exit_codes_and_both_streams_come_back(remote_host):
    conn = connection.connect(remote_host.alias)
    result = command.run(conn, ["sh", "-c", "echo out; echo err >&2; exit 7"])
    assert (result.exit_code, result.stdout, result.stderr) == (7, b"out\n", b"err\n")
    assert connection.connect(remote_host.alias) is conn  # one connection for all the calls


def test_auth_failure_and_unreachable_host_are_clear_errors(remote_host, tmp_path):
    _keygen(tmp_path / "stranger")
    config = tmp_path / "stranger_config"
    write_ssh_config(config, remote_host.sshd, remote_host.known_hosts)
    config.write_text(config.read_text().replace(str(remote_host.sshd.user_key), str(tmp_path / "stranger")))
    import os

    os.environ["FRAY_SSH_CONFIG"] = str(config)  # restored by the fixture's monkeypatch
    with pytest.raises(AuthenticationFailed, match="cannot log in to fray-test"):
        connection.connect(remote_host.alias)
    with pytest.raises(UnreachableHost, match="cannot reach"):
        connection.connect("127.0.0.1:1")


def test_proxy_jump_reaches_the_host_through_the_jump_host(remote_host, tmp_path, monkeypatch):
    config = tmp_path / "jump_config"
    write_ssh_config(config, remote_host.sshd, remote_host.known_hosts, alias="bastion")
    # The login node as a cluster's would be named: reached only through `bastion` (a tunnel it opens).
    config.write_text(config.read_text() + config.read_text().replace("Host bastion", "Host login-behind")
                      + "  ProxyJump bastion\n")
    monkeypatch.setenv("FRAY_SSH_CONFIG", str(config))
    conn = connection.connect("login-behind")
    assert [type(j).__name__ for j in conn.jumps] == ["SSHClient"]
    peer = conn.client.get_transport().sock  # the tunnel through bastion, not a socket of ours
    assert type(peer).__name__ == "Channel"
    assert command.run(conn, ["echo", "behind"]).stdout == b"behind\n"


def test_what_bootstrap_does_with_what_the_probe_found():
    from fray.remote.bootstrap import usable
    from fray.remote.errors import RemoteError

    here = "0.2.0"
    assert usable({"fray": "/opt/fray/bin/fray", "version": "0.2.0", "python": "/usr/bin/python3"}, here, "h")
    assert not usable({"fray": "/opt/fray/bin/fray", "version": "0.1.9", "python": "/usr/bin/python3",
                       "pyver": "3.11"}, here, "h")  # older: installed over
    assert not usable({"python": "/usr/bin/python3", "pyver": "3.10"}, here, "h")
    with pytest.raises(RemoteError, match=r"h has Python 3\.8 \(/usr/bin/python3\); fray needs Python >= 3\.10"):
        usable({"python": "/usr/bin/python3", "pyver": "3.8"}, here, "h")
    with pytest.raises(RemoteError, match="no python3 on its PATH"):
        usable({}, here, "h")


def _project(root: Path, files: int) -> None:
    for i in range(files):
        path = root / f"pkg{i % 5}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"VALUE = {i}\n")
    (root / ".gitignore").write_text("outputs/\n*.ckpt\n")
    (root / ".frayignore").write_text("data/\n")
    for ignored in ("outputs/log.txt", "model.ckpt", "data/big.bin", ".git/HEAD"):
        (root / ignored).parent.mkdir(parents=True, exist_ok=True)
        (root / ignored).write_text("ignored")


def test_sync_sends_only_what_changed_and_respects_ignore_files(remote_host, tmp_path):
    project, remote_copy = tmp_path / "project", tmp_path / "remote home" / "code"
    project.mkdir()
    _project(project, 30)
    conn = connection.connect(remote_host.alias)

    first = sync.sync(conn, project, str(remote_copy))
    assert len(first.sent) == 32  # 30 modules + the two ignore files
    assert not any(p.startswith(("outputs/", "data/", ".git/")) or p.endswith(".ckpt") for p in first.sent)
    assert (remote_copy / "pkg3" / "mod3.py").read_text() == "VALUE = 3\n"

    (project / "pkg1" / "mod6.py").write_text("VALUE = 'changed'\n")
    (project / "pkg2" / "mod7.py").unlink()
    second = sync.sync(conn, project, str(remote_copy))
    assert second.sent == ("pkg1/mod6.py",)
    assert second.removed == ("pkg2/mod7.py",)
    assert (remote_copy / "pkg1" / "mod6.py").read_text() == "VALUE = 'changed'\n"
    assert not (remote_copy / "pkg2" / "mod7.py").exists()
    assert second.tree_hash != first.tree_hash
    assert sync.sync(conn, project, str(remote_copy)).sent == ()


def test_sync_refuses_a_huge_folder_without_force(remote_host, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "weights.bin").write_bytes(b"\0" * 4096)
    conn = connection.connect(remote_host.alias)
    with pytest.raises(Exception, match="--force"):
        sync.sync(conn, project, str(tmp_path / "copy"), size_limit=1024)
    assert not (tmp_path / "copy" / "weights.bin").exists()
    assert sync.sync(conn, project, str(tmp_path / "copy"), size_limit=1024, force=True).sent == ("weights.bin",)


@pytest.mark.slow
def test_bootstrap_installs_this_fray_when_the_remote_has_none_or_an_older_one(remote_host, tmp_path, monkeypatch):
    from fray.remote import bootstrap
    from fray.remote.session import run_fray

    # The remote is this machine: a fray may already be on its PATH (CI installs one). Claiming a
    # newer local version makes any fray found there "older", so both cases take the install path.
    real_version = bootstrap.local_version()
    monkeypatch.setattr(bootstrap, "local_version", lambda: real_version + ".1")
    home = tmp_path / "remote home"
    leftover = home / "venv" / "bin" / "fray"  # an interrupted install: a script, no python beside it
    leftover.parent.mkdir(parents=True)
    leftover.write_text("#!/bin/sh\nexit 1\n")
    leftover.chmod(0o755)
    result = run_fray(remote_host.alias, ["list"], home=str(home), reuse=False)
    assert result.exit_code == 0, result.stderr
    listing = json.loads(result.stdout)
    assert (listing["home"], listing["runs"]) == (str(home), [])
    installed = home / "venv" / "bin" / "fray"
    assert installed.exists()

    monkeypatch.undo()
    stamp = installed.stat().st_mtime_ns
    conn = connection.connect(remote_host.alias)
    assert bootstrap.ensure(conn, str(home)).executable == str(installed)  # found, not reinstalled
    assert installed.stat().st_mtime_ns == stamp
    missing = run_fray(remote_host.alias, ["status", "no-such-run"], home=str(home), reuse=False)
    assert missing.exit_code != 0 and b"no-such-run" in missing.stdout + missing.stderr


@pytest.mark.slow
def test_an_offline_cluster_gets_fray_and_its_dependencies_from_a_wheelhouse_sent_along(remote_host, tmp_path,
                                                                                       monkeypatch):
    import importlib.metadata
    import subprocess

    from fray.remote import bootstrap

    # What docs/remote.md tells a user of an offline cluster to do on a machine with internet.
    wheelhouse = tmp_path / "wheels"
    deps = [r.split(";")[0].replace(" ", "") for r in importlib.metadata.requires("fray") if "extra" not in r]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "-d",
                    str(wheelhouse), *deps], check=True, timeout=600)
    monkeypatch.setenv("FRAY_REMOTE_WHEELHOUSE", str(wheelhouse))
    real_version = bootstrap.local_version()
    monkeypatch.setattr(bootstrap, "local_version", lambda: real_version + ".1")  # any fray there is "older"
    home = tmp_path / "offline home"
    conn = connection.connect(remote_host.alias)
    installed = bootstrap.ensure(conn, str(home))
    assert installed.executable == str(home / "venv" / "bin" / "fray")
    sent = {p.name for p in (home / "wheels").iterdir()}
    assert {p.name for p in wheelhouse.iterdir()} < sent and any(n.startswith("fray-") for n in sent)
    # Installed with --no-index: everything came from the wheels sent along, and it runs.
    listing = command.run(conn, [installed.executable, "list", "--json"], env={"FRAY_HOME": str(home)})
    assert listing.exit_code == 0 and json.loads(listing.stdout)["runs"] == []


def test_the_masters_socket_leaves_a_runtime_folder_too_deep_for_af_unix(monkeypatch):
    import socket

    from fray.remote import session

    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/0")
    assert session.socket_path("host", "/h").parent == Path(f"/run/user/0/fray-ssh-{os.getuid()}")
    deep = "/tmp/" + "d" * 90  # a sun_path this long cannot be bound: the master would die unseen
    monkeypatch.setenv("XDG_RUNTIME_DIR", deep)
    path = session.socket_path("host", "/h")
    assert path.parent == Path(f"/tmp/fray-ssh-{os.getuid()}")
    with socket.socket(socket.AF_UNIX) as listener, pytest.raises(OSError, match="too long"):
        listener.bind(f"{deep}/fray-ssh-{os.getuid()}/{path.stem}.4194304")


@pytest.mark.slow
def test_a_second_command_reuses_the_background_master(remote_host, tmp_path, monkeypatch):
    from fray.remote import session
    from fray.remote.session import run_fray
    from tests.conftest import _kill_everything_of, wait_until

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir()
    home = tmp_path / "remote home"
    try:
        first = run_fray(remote_host.alias, ["list"], home=str(home))  # connects, installs, leaves a master
        sock = session.socket_path(remote_host.alias, str(home))
        wait_until(sock.exists, timeout=60, what="the master's socket")
        served = session.ask(remote_host.alias, str(home), ["list", "--json"], timeout=30)
        assert served is not None and served.exit_code == 0
        assert json.loads(served.stdout)["runs"] == json.loads(first.stdout)["runs"] == []
        assert oct(sock.parent.stat().st_mode & 0o777) == "0o700"

        # While it serves, commands go through it: even with this machine's trust in the host gone, a
        # sync and a submit inside the synced copy work (they never open a connection of their own).
        from fray.remote.session import sync_project

        remote_host.known_hosts.write_text("")
        project = tmp_path / "project"
        project.mkdir()
        (project / "job.py").write_text("print('from the synced copy')\n")
        copied = sync_project(remote_host.alias, project, home=str(home))
        assert copied.sent == ("job.py",) and (Path(copied.remote_path) / "job.py").exists()
        again = sync_project(remote_host.alias, project, home=str(home))
        assert again.sent == () and again.tree_hash == copied.tree_hash
        with open(project / "weights.bin", "wb") as sparse:
            sparse.truncate(sync.DEFAULT_SIZE_LIMIT + 1)  # over the guard, without writing 200 MB
        with pytest.raises(UsageError, match="--force"):  # the master's refusal arrives as the same error
            sync_project(remote_host.alias, project, home=str(home))
        (project / "weights.bin").unlink()
        submitted = run_fray(remote_host.alias, ["submit", "job.py", "--wait"], home=str(home), cwd=copied.remote_path)
        assert submitted.exit_code == 0, submitted.stderr
        assert json.loads(submitted.stdout.splitlines()[-1])["end"]["status"] == "completed_success"
    finally:
        _kill_everything_of(home)  # the master names the remote home on its command line


def test_remote_option_is_found_anywhere_before_the_separator(monkeypatch, tmp_path):
    from fray.cli.arguments import normalize
    from fray.remote.forward import target

    def split(argv):  # the host a command line runs on, and the command's own words
        invocation = normalize(argv)
        return target(invocation.remote), invocation.command

    monkeypatch.delenv("FRAY_REMOTE", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert split(["list", "--remote", "gpu", "--json"]) == ("gpu", ["list", "--json"])
    assert split(["--remote=gpu", "logs", "r1", "--", "--remote", "x"]) == ("gpu", ["logs", "r1", "--", "--remote", "x"])
    assert normalize(["logs", "r1", "--remote", "gpu"]).args == ["--remote", "gpu", "logs", "r1"]  # click's order
    assert split(["list"]) == (None, ["list"])
    (tmp_path / "fray").mkdir()
    (tmp_path / "fray" / "config.toml").write_text('remote = "from-config"\n')
    assert split(["list"]) == ("from-config", ["list"])
    assert split(["list", "--remote", ""]) == (None, ["list"])  # `--remote ''`: here, whatever the default
    monkeypatch.setenv("FRAY_REMOTE", "from-env")
    assert split(["list"]) == ("from-env", ["list"])
    monkeypatch.setenv("FRAY_REMOTE", "")  # what the remote side is given: never forward again
    assert split(["list"]) == (None, ["list"])


def test_replace_finds_every_entry_of_the_host_plain_listed_or_hashed():
    import paramiko

    from fray.remote.host_keys import _names

    name = "[10.0.0.5]:2222"
    hashed = paramiko.HostKeys.hash_host(name)
    assert _names(f"{name} ssh-ed25519 AAAA\n", name)
    assert _names(f"login,{name} ssh-rsa AAAA\n", name)
    assert _names(f"{hashed} ssh-ed25519 AAAA\n", name)
    assert _names(f"@revoked {name} ssh-ed25519 AAAA\n", name)
    assert not _names("10.0.0.5 ssh-ed25519 AAAA\n", name)  # port 22's entry is another host
    assert not _names(f"{paramiko.HostKeys.hash_host('other')} ssh-ed25519 AAAA\n", name)
    assert not _names(f"# {name} ssh-ed25519 AAAA\n", name)
    assert not _names("\n", name)
