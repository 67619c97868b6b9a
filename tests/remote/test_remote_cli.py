"""`fray ... --remote HOST` end to end: the real CLI, a real sshd, fray bootstrapped into a remote home."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from tests.conftest import _kill_everything_of, run_fray, schema_validate, wait_until
from tests.remote_support import remote_host, sshd  # noqa: F401

pytestmark = pytest.mark.slow


def test_submit_list_logs_over_remote_match_local(remote_host, tmp_path, monkeypatch):
    remote_home = tmp_path / "remote fray home"
    monkeypatch.setenv("FRAY_REMOTE_HOME", str(remote_home))
    monkeypatch.setenv("FRAY_REMOTE_NO_MASTER", "1")  # no background process outlives the test
    monkeypatch.setenv("FRAY_HOME", str(tmp_path / "laptop home"))  # the laptop's own: never used
    project = tmp_path / "my project"
    project.mkdir()
    (project / "greeting.txt").write_text("hello from the synced copy")  # read from the run's workdir
    (project / "train.py").write_text("import sys\nprint(open('greeting.txt').read(), sys.argv[1:])\n")
    try:
        # An unknown host is refused; `fray remote trust` records it, printing the fingerprint.
        remote_host.known_hosts.write_text("")
        refused = run_fray("list", "--remote", remote_host.alias)
        assert refused.returncode == 255 and "fray remote trust fray-test" in refused.stderr
        trusted = run_fray("remote", "trust", remote_host.alias, check=True)
        assert "SHA256:" in trusted.stdout

        monkeypatch.chdir(project)
        synced = json.loads(run_fray("sync", "--json", "--remote", remote_host.alias, check=True).stdout)
        schema_validate("cli-sync", synced)
        assert sorted(synced["sent"]) == ["greeting.txt", "train.py"] and synced["removed"] == []
        assert synced["remote_path"] == str(remote_home / "code" / "my project")
        marker = tmp_path / "pwned"
        submitted = run_fray("submit", "train.py", "--remote", remote_host.alias, "--name", f"a $(touch {marker})",
                             "--wait", "--json", "--", "--lr", "3e-4; `touch " + str(marker) + "`", timeout=300)
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        assert not marker.exists()
        run_id = json.loads(submitted.stdout.splitlines()[-1])["run_id"]

        remote = run_fray("list", "--json", "--remote", remote_host.alias, check=True)
        local = run_fray("list", "--json", home=remote_home, check=True)
        # The same listing, but for the clock: when it was generated and the daemon's last cycle.
        strip = lambda text: {k: v for k, v in json.loads(text).items() if k not in ("generated_at", "daemon")}  # noqa: E731
        assert strip(remote.stdout) == strip(local.stdout)
        assert json.loads(remote.stdout)["daemon"]["lease"]["pid"] == json.loads(local.stdout)["daemon"]["lease"]["pid"]
        assert [r["run_id"] for r in json.loads(remote.stdout)["runs"]] == [run_id]
        assert json.loads(remote.stdout)["runs"][0]["name"] == f"a $(touch {marker})"

        # Human output is rendered here from the remote's JSON, by the renderer a local run uses.
        for command in (["list"], ["status", run_id], ["nodes", "list"]):
            over_ssh = run_fray(*command, "--remote", remote_host.alias, check=True)
            here = run_fray(*command, home=remote_home, check=True)
            assert _clockless(over_ssh.stdout) == _clockless(here.stdout) != ""

        logs = run_fray("logs", run_id, "--remote", remote_host.alias, check=True)
        assert logs.stdout == run_fray("logs", run_id, home=remote_home, check=True).stdout
        assert logs.stdout == f"hello from the synced copy ['--lr', '3e-4; `touch {marker}`']\n"

        # The run records which code it ran: the synced copy's path and the project's content hash.
        from fray.remote import sync

        status = json.loads(run_fray("status", run_id, "--json", "--remote", remote_host.alias, check=True).stdout)
        assert status["spec"]["env"]["SYNCED_CODE_HASH"] == sync.tree_hash(sync.manifest(project))
        assert status["spec"]["env"]["SYNCED_CODE_PATH"] == status["spec"]["workdir"] == str(remote_home / "code" / "my project")

        _tui_over_pty(remote_host, tmp_path, remote_home)

        missing = run_fray("status", "no-such-run", "--remote", remote_host.alias)
        missing_here = run_fray("status", "no-such-run", home=remote_home)
        assert missing.returncode == missing_here.returncode != 0
        assert missing.stderr == missing_here.stderr and "no-such-run" in missing.stderr
        assert not marker.exists()
    finally:
        _kill_everything_of(remote_home)


def _clockless(text: str) -> str:
    """Human output minus what the clock changes between two calls (ages, uptimes)."""
    return re.sub(r"\b\d+(\.\d+)?(ms|s|m|h|d)\b", "<t>", text)


def _tui_over_pty(remote_host, tmp_path, remote_home) -> None:  # noqa: ANN001
    """`fray tui --remote` in tmux shows the remote's run, follows a resize, and quits on `q` (exit restores the pane)."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    name = f"fray-remote-{os.getpid()}"

    def tmux(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", name, *args], capture_output=True, text=True, timeout=20)

    env = " ".join(f"{k}={shlex.quote(os.environ[k])}" for k in ("FRAY_SSH_CONFIG", "FRAY_REMOTE_HOME", "FRAY_HOME"))
    command = (f"env -u COLUMNS -u LINES -u SSH_AUTH_SOCK {env} FRAY_REMOTE_NO_MASTER=1 TERM=xterm-256color "
               f"{shlex.quote(sys.executable)} -m fray.cli.main tui --remote {remote_host.alias}")
    assert tmux("new-session", "-d", "-s", name, "-x", "90", "-y", "30", command).returncode == 0
    try:
        screen = lambda: tmux("capture-pane", "-p", "-t", name).stdout  # noqa: E731
        wait_until(lambda: "a $(touch" in screen() and "1 run" in screen(), timeout=60, what="the remote's run in the TUI")
        # Wider: only a remote that learnt the new size can draw past column 90.
        tmux("resize-window", "-t", name, "-x", "140", "-y", "40")
        wait_until(lambda: max(len(line.rstrip()) for line in screen().splitlines()) > 100, what="the redraw at 140 columns")
        tmux("send-keys", "-t", name, "q")
        wait_until(lambda: tmux("has-session", "-t", name).returncode != 0, timeout=20, what="fray tui to quit")
    finally:
        tmux("kill-server")


def test_under_json_a_host_that_cannot_be_reached_is_one_json_error(tmp_path):
    from tests.conftest import run_fray, schema_validate

    proc = run_fray("--json", "list", "--remote", "127.0.0.1:1", env={"FRAY_SSH_CONFIG": str(tmp_path / "none")})
    plain = run_fray("list", "--remote", "127.0.0.1:1", env={"FRAY_SSH_CONFIG": str(tmp_path / "none")})
    assert proc.returncode == plain.returncode == 255 and "cannot reach" in plain.stderr
    error = json.loads(proc.stdout)
    schema_validate("cli-error", error)
    assert error["error"]["code"] == "remote" and "cannot reach" in error["error"]["message"]


def test_logs_follow_over_ssh_stops_on_ctrl_c_and_reports_a_dropped_connection(remote_host, tmp_path, monkeypatch):
    """`fray logs -f --remote` in a terminal: lines stream; Ctrl-C ends it as locally (130) with the terminal
    restored; when the connection drops mid-stream the command says so and exits 255 instead of hanging."""
    remote_home = tmp_path / "remote fray home"
    monkeypatch.setenv("FRAY_REMOTE_HOME", str(remote_home))
    monkeypatch.setenv("FRAY_REMOTE_NO_MASTER", "1")
    monkeypatch.setenv("FRAY_HOME", str(tmp_path / "laptop home"))
    project = tmp_path / "ticker"
    project.mkdir()
    (project / "tick.py").write_text("import time\nfor i in range(100000):\n    print('tick', i, flush=True)\n"
                                     "    time.sleep(0.2)\n")
    monkeypatch.chdir(project)
    names = [f"fray-logs-{os.getpid()}", f"fray-logs-drop-{os.getpid()}"]  # one tmux server per part

    def tmux(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", names[0], *args], capture_output=True, text=True, timeout=20)

    try:
        run_id = json.loads(run_fray("submit", "tick.py", "--json", "--remote", remote_host.alias, check=True).stdout)["run_id"]
        env = " ".join(f"{k}={shlex.quote(os.environ[k])}" for k in ("FRAY_SSH_CONFIG", "FRAY_REMOTE_HOME", "FRAY_HOME"))
        follow = (f"env -u SSH_AUTH_SOCK {env} FRAY_REMOTE_NO_MASTER=1 {shlex.quote(sys.executable)} -m fray.cli.main "
                  f"logs -f {run_id} --remote {remote_host.alias}; echo exit=$?; stty -a | grep -ow -- '-\\?icanon'; "
                  "sleep 60")
        screen = lambda: tmux("capture-pane", "-p", "-t", "fray").stdout  # noqa: E731

        assert tmux("new-session", "-d", "-s", "fray", "-x", "100", "-y", "30", follow).returncode == 0
        wait_until(lambda: "tick 3" in screen(), timeout=60, what="the run's lines over ssh")
        tmux("send-keys", "-t", "fray", "C-c")
        wait_until(lambda: "exit=" in screen(), timeout=20, what="logs -f to end on Ctrl-C")
        assert "exit=130" in screen()
        assert "\nicanon" in screen()  # the terminal is out of raw mode again
        tmux("kill-server")
        names.pop(0)

        assert tmux("new-session", "-d", "-s", "fray", "-x", "100", "-y", "30", follow).returncode == 0
        wait_until(lambda: screen().count("tick") >= 3, timeout=60, what="the run's lines over ssh")
        server = int((remote_host.sshd.root / "sshd.pid").read_text())
        subprocess.run(["pkill", "-KILL", "-P", str(server)], check=True)  # every session's sshd: the link is cut
        wait_until(lambda: "exit=" in screen(), timeout=60, what="logs -f to notice the dropped connection")
        assert "exit=255" in screen() and "dropped" in screen()
        assert "\nicanon" in screen()
    finally:
        tmux("kill-server")
        _kill_everything_of(remote_home)


def test_a_changed_host_key_is_fixed_by_running_the_printed_command_as_printed(sshd, tmp_path, monkeypatch):
    """The host is reinstalled (new host key, same `[127.0.0.1]:port`): fray refuses, prints a fix that
    works pasted into a shell, and `fray remote trust HOST --replace` shows the old and new fingerprints."""
    from tests.remote_support import start_sshd, write_ssh_config

    # A host of its own, so changing its key leaves the shared sshd alone.
    (tmp_path / "login").mkdir()
    server, proc = start_sshd(tmp_path / "login")
    known_hosts, config = tmp_path / "known_hosts", tmp_path / "ssh_config"
    known_hosts.write_text("# the user's own line, kept\nother.example ssh-ed25519 "
                           + sshd.known_hosts_line().split()[2] + "\n" + server.known_hosts_line())
    write_ssh_config(config, server, known_hosts, alias="login")
    env = {"FRAY_SSH_CONFIG": str(config), "FRAY_REMOTE_NO_MASTER": "1", "FRAY_HOME": str(tmp_path / "home"),
           "FRAY_REMOTE_HOME": str(tmp_path / "remote home")}
    try:
        old = run_fray("remote", "trust", "login", "--json", env=env, check=True)
        schema_validate("cli-remote-trust", json.loads(old.stdout))
        old_fingerprint = json.loads(old.stdout)["fingerprint"]
        assert json.loads(old.stdout)["added"] is False, (old.stdout, known_hosts.read_text())

        proc.terminate()
        proc.wait(timeout=10)
        for name in ("host_key", "host_key.pub"):
            (server.root / name).unlink()
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(server.root / "host_key")], check=True)
        proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(server.root / "sshd_config")],
                                stderr=open(server.root / "sshd.log", "ab"))
        from tests.remote_support import _accepts

        wait_until(lambda: _accepts(server.port), what="the reinstalled sshd")

        for attempt in ("fray", "ssh-keygen"):
            refused = run_fray("list", "--remote", "login", env=env)
            assert refused.returncode == 255 and "HAS CHANGED" in refused.stderr, refused.stderr
            assert "Traceback" not in refused.stderr
            lines = [line.strip() for line in refused.stderr.splitlines()]
            fix = (lines[lines.index(next(x for x in lines if x.endswith("replace the recorded key with:"))) + 1]
                   if attempt == "fray" else
                   next(x for x in lines if x.startswith("(or by hand: ")).removeprefix("(or by hand: ")[:-1])
            # Run exactly what was printed, through a shell, with `fray` meaning this fray.
            shim = tmp_path / "bin" / "fray"
            shim.parent.mkdir(exist_ok=True)
            shim.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m fray.cli.main \"$@\"\n")
            shim.chmod(0o755)
            fixed = subprocess.run(["sh", "-c", fix], capture_output=True, text=True, timeout=60,
                                   env={**os.environ, **env, "PATH": f"{shim.parent}:{os.environ['PATH']}"})
            assert fixed.returncode == 0, fix + "\n" + fixed.stdout + fixed.stderr
            if attempt == "fray":
                assert f"old: ssh-ed25519 {old_fingerprint}" in fixed.stdout
                new_fingerprint = fixed.stdout.split("new: ssh-ed25519 ")[1].split()[0]
                assert new_fingerprint != old_fingerprint
            works = run_fray("list", "--remote", "login", env=env)
            assert works.returncode == 0, works.stderr
            text = known_hosts.read_text()
            assert "# the user's own line, kept\nother.example ssh-ed25519" in text  # others' entries untouched
            assert text.count(f"[127.0.0.1]:{server.port} ") == 1
            if attempt == "fray":  # again, by hand this time: put the old key back and take the other fix
                known_hosts.write_text(text.replace(text.splitlines()[-1].split()[2], sshd.known_hosts_line().split()[2]))

        replaced = json.loads(run_fray("remote", "trust", "login", "--replace", "--json", env=env, check=True).stdout)
        schema_validate("cli-remote-trust", replaced)
        # The key recorded is the host's own now: nothing to replace, nothing written.
        assert replaced["name"] == f"[127.0.0.1]:{server.port}"
        assert (replaced["added"], replaced["replaced"]) == (False, [])
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        _kill_everything_of(tmp_path / "remote home")
