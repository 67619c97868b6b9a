"""Every cluster in one view: two real sshd on 127.0.0.1 ("east", "west"), each with its own remote FRAY_HOME,
and this machine. `fray list` / `fray usage` show all three with a CLUSTER column; status, logs and control
reach the run's own cluster; a host that stops (west, mid-test) or never answers is one row, never a wait.

The remote FRAY_HOMEs run this branch's fray: it is bootstrapped into each (the local version bumped, so the
fray a login shell's PATH may offer is not taken).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import _kill_everything_of, run_fray, schema_validate, wait_until
from tests.docs_pages import block_under
from tests.remote_support import require_sshd, start_sshd

pytestmark = pytest.mark.slow

# Each host's answer waits this long: a fresh ssh login and a remote fray on two cores busy with the rest of
# the suite took 6 s, and once more than 12 (a fresh-clone run of the suite: west "no answer within 12s").
REMOTE_TIMEOUT = 30

HELLO = """#!/usr/bin/env python3
import os
from fray import report
print("hello from " + os.environ["FRAY_HOME"], flush=True)
report.final()
"""
SLEEPER = """#!/usr/bin/env python3
import time
while True:
    time.sleep(0.2)
"""


class Clusters:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.homes = {"east": root / "east home", "west": root / "west home"}
        self.servers: dict[str, subprocess.Popen[bytes]] = {}
        self.ssh_config = root / "ssh_config"
        self.xdg = root / "xdg"
        self.project = root / "project"


def _ssh_config(clusters: Clusters, ports: dict[str, int], keys: dict[str, Path]) -> None:
    lines = []
    for alias, port in ports.items():
        lines.append(f"Host {alias}\n  HostName 127.0.0.1\n  Port {port}\n  User {os.environ.get('USER') or 'root'}\n"
                     f"  IdentityFile {keys[alias]}\n  UserKnownHostsFile {clusters.root / 'known_hosts'}\n"
                     "  ConnectTimeout 60\n")  # longer than REMOTE_TIMEOUT: the per-host timeout is what cuts
    clusters.ssh_config.write_text("".join(lines))


@pytest.fixture(scope="module")
def clusters(tmp_path_factory) -> Iterator[Clusters]:
    require_sshd()
    from fray.remote import bootstrap, connection, wheels as local_wheels

    made = Clusters(tmp_path_factory.mktemp("clusters"))
    ports, keys, known = {}, {}, []
    for alias in ("east", "west"):
        folder = made.root / f"sshd-{alias}"
        folder.mkdir()
        server, proc = start_sshd(folder)
        made.servers[alias] = proc
        ports[alias], keys[alias] = server.port, server.user_key
        known.append(server.known_hosts_line())
    # A host that takes the connection and never answers: the per-host timeout must cut it off.
    hang = socket.socket()
    hang.bind(("127.0.0.1", 0))
    hang.listen(8)
    ports["hang"], keys["hang"] = hang.getsockname()[1], keys["east"]
    (made.root / "known_hosts").write_text("".join(known))
    _ssh_config(made, ports, keys)
    (made.xdg / "fray").mkdir(parents=True)
    (made.xdg / "fray" / "config.toml").write_text(
        f'remotes = ["east", "west"]\nremote_timeout = {REMOTE_TIMEOUT}\n[remote_homes]\n'
        + "".join(f'{alias} = "{home}"\n' for alias, home in made.homes.items()))
    made.project.mkdir()
    (made.project / "hello.py").write_text(HELLO)
    (made.project / "sleeper.py").write_text(SLEEPER)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FRAY_SSH_CONFIG", str(made.ssh_config))
        patch.setenv("XDG_CONFIG_HOME", str(made.xdg))
        patch.setenv("FRAY_REMOTE_NO_MASTER", "1")
        patch.delenv("FRAY_REMOTE_HOME", raising=False)
        patch.delenv("FRAY_REMOTE", raising=False)
        patch.delenv("SSH_AUTH_SOCK", raising=False)
        real = bootstrap.local_version()
        patch.setattr(bootstrap, "local_version", lambda: real + ".1")
        try:
            local_wheels.prepare()  # the wheels both installs send, made (or found cached) once, before they start
            with ThreadPoolExecutor(len(made.homes)) as pool:  # each host's venv and pip install, side by side
                installed = dict(zip(made.homes, pool.map(
                    lambda alias: bootstrap.ensure(connection.connect(alias), str(made.homes[alias])), made.homes)))
            for alias, remote_home in made.homes.items():
                assert installed[alias].executable == str(remote_home / "venv" / "bin" / "fray")
        finally:
            connection.close_all()
    try:
        yield made
    finally:
        hang.close()
        for proc in made.servers.values():
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=10)
        for home in made.homes.values():
            _kill_everything_of(home)


@pytest.fixture
def many(clusters: Clusters, home, monkeypatch) -> Clusters:
    monkeypatch.setenv("FRAY_SSH_CONFIG", str(clusters.ssh_config))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(clusters.xdg))
    monkeypatch.setenv("FRAY_REMOTE_NO_MASTER", "1")
    monkeypatch.delenv("FRAY_REMOTE_HOME", raising=False)
    monkeypatch.delenv("FRAY_REMOTE", raising=False)
    monkeypatch.chdir(clusters.project)
    return clusters


def fray(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return run_fray(*args, check=check, timeout=timeout, env={"COLUMNS": "220"})


def meta_in(home: Path, run_id: str) -> dict:
    return json.loads((home / "runs" / run_id / "meta.json").read_text())


def walkthrough() -> tuple[list[str], list[str]]:
    """The docs' "Many clusters" commands (docs/clusters.md): those before west goes down, and those after."""
    lines = block_under("clusters.md", "A walkthrough").text.splitlines()
    cut = next(i for i, line in enumerate(lines) if line.startswith("# west goes down"))
    return ([line for line in lines[:cut] if line.startswith("fray ")],
            [line for line in lines[cut:] if line.startswith("fray ")])


def submitted(text: str) -> dict[str, str]:
    """The run `fray submit` printed: `submitted run <id> (<name>)`."""
    found = re.search(r"^submitted run (\S+) \((.+)\)$", text, re.M)
    assert found, text
    return {"run_id": found.group(1), "name": found.group(2)}


def as_written(line: str) -> str:
    return fray(*shlex.split(line, comments=True)[1:]).stdout


def test_the_many_clusters_walkthrough_routed_commands_and_a_host_going_down(many, home):
    before, after = walkthrough()
    said = {line.split("#")[0].strip(): as_written(line) for line in before}
    east = submitted(said["fray submit hello.py --name east-hello --wait --remote east"])
    west = submitted(said["fray submit sleeper.py --name west-sleeper --remote west"])
    here = submitted(said["fray submit hello.py --name here-hello --wait"])
    assert (many.homes["east"] / "runs" / east["run_id"]).is_dir()
    assert (many.homes["west"] / "runs" / west["run_id"]).is_dir()
    assert (home.root / "runs" / here["run_id"]).is_dir()
    text = said["fray list"]
    assert "CLUSTER" in text and "3 runs on 3 clusters" in text
    line = next(row for row in text.splitlines() if west["run_id"] in row)
    assert line.split()[0] == "west" and "west-sleeper" in line
    assert "CLUSTER" in said["fray usage"] and "east" in said["fray usage"], (
        said["fray usage"], meta_in(many.homes["east"], east["run_id"]))
    assert west["run_id"] in said["fray status west-sleeper"] and "west-sleeper" in said["fray status west-sleeper"]
    assert said["fray logs east-hello"] == f"hello from {many.homes['east']}\n"
    assert "requested stop for run " + west["run_id"] in said["fray control stop west-sleeper"]
    wait_until(lambda: meta_in(many.homes["west"], west["run_id"])["phase"] == "ended", timeout=60,
               what="west's run to stop")
    assert meta_in(many.homes["west"], west["run_id"])["end"]["status"] == "stopped_manual"
    explicit = json.loads(said["fray list --remote east,west --json"])
    schema_validate("cli-clusters-list", explicit)

    listed = json.loads(fray("list", "--json").stdout)
    schema_validate("cli-clusters-list", listed)
    assert [(c["cluster"], c["state"]) for c in listed["clusters"]] == [("local", "ok"), ("east", "ok"), ("west", "ok")]
    assert [c["home"] for c in listed["clusters"]] == [str(home.root), str(many.homes["east"]), str(many.homes["west"])]
    where = {row["run_id"]: row["cluster"] for row in listed["runs"]}
    assert where == {here["run_id"]: "local", east["run_id"]: "east", west["run_id"]: "west"}
    assert where == {row["run_id"]: row["cluster"] for row in explicit["runs"]}
    assert listed["counts"]["completed_success"] == 2 and listed["counts"]["stopped_manual"] == 1
    used = json.loads(fray("usage", "--json").stdout)
    schema_validate("cli-clusters-usage", used)
    assert {row["cluster"] for row in used["rows"]} == {"local", "east", "west"}
    assert used["total"]["runs"] == sum(row["runs"] for row in used["rows"])
    status = json.loads(fray("status", west["run_id"], "--json").stdout)
    schema_validate("cli-status", status)
    assert status["run"]["run_id"] == west["run_id"] and status["dir"].startswith(str(many.homes["west"]))
    assert fray("logs", "here-hello").stdout == f"hello from {home.root}\n"
    assert fray("logs", "--attempt", "1", "east-hello").stdout == f"hello from {many.homes['east']}\n"
    missing = fray("status", "no-such-run", check=False)
    assert missing.returncode == 2 and "no run matches 'no-such-run' on local, east, west" in missing.stderr

    # west stops: one row says so, the others are shown, nothing waits for it.
    many.servers["west"].terminate()
    many.servers["west"].wait(timeout=10)
    started = time.monotonic()
    listed = json.loads(fray("list", "--json").stdout)
    assert time.monotonic() - started < REMOTE_TIMEOUT + 5
    schema_validate("cli-clusters-list", listed)
    states = {c["cluster"]: c for c in listed["clusters"]}
    assert states["local"]["state"] == states["east"]["state"] == "ok"
    assert states["west"]["state"] == "unavailable" and "cannot reach west" in states["west"]["detail"]
    assert {row["cluster"] for row in listed["runs"]} == {"local", "east"}
    text = as_written(after[0])
    assert "warning: west: cannot reach west" in text and east["run_id"] in text
    assert fray("logs", "east-hello").stdout == f"hello from {many.homes['east']}\n"


def test_a_host_that_never_answers_is_cut_off_at_the_per_host_timeout(many):
    started = time.monotonic()
    listed = json.loads(fray("list", "--remote", "east,hang", "--json").stdout)
    took = time.monotonic() - started
    schema_validate("cli-clusters-list", listed)
    states = {c["cluster"]: c for c in listed["clusters"]}
    assert states["east"]["state"] == "ok"
    assert states["hang"]["state"] == "unavailable"
    assert f"no answer within {REMOTE_TIMEOUT}s" in states["hang"]["detail"]
    assert REMOTE_TIMEOUT <= took < REMOTE_TIMEOUT + 8, took


def test_hosts_not_in_the_ssh_config_and_bad_remotes_are_refused_writing_nothing(many, home, tmp_path, monkeypatch):
    proc = fray("list", "--remote", "east,nosuch", check=False)
    assert proc.returncode == 2 and "nosuch is not a Host in" in proc.stderr
    proc = fray("list", "--remote", "east,nosuch", "--json", check=False)
    assert proc.returncode == 2
    schema_validate("cli-error", json.loads(proc.stdout))
    config = tmp_path / "xdg" / "fray" / "config.toml"
    config.parent.mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    config.write_text('remotes = ["east", "typo-host"]\n')
    proc = fray("status", "anything", check=False)
    assert proc.returncode == 2 and "typo-host is not a Host in" in proc.stderr
    config.write_text('remotes = "east"\n')
    proc = fray("list", check=False)
    assert proc.returncode == 2 and "remotes must be a list of ssh host names" in proc.stderr
    config.write_text("")
    proc = fray("list", "--remote", "all", check=False)
    assert proc.returncode == 2 and "--remote all uses the hosts of `remotes`" in proc.stderr
    assert not home.root.exists()  # nothing was written, not even FRAY_HOME


@pytest.mark.parametrize("argv, expected", [
    (["status", "train"], (["status", "train"], None)),
    (["logs", "--attempt", "2", "-n", "5", "train", "-f"], (["logs", "train"], None)),
    (["control", "stop", "--group", "sw", "--json"], (["control", "stop"], "sw")),
    (["control", "blacklist-add", "train", "--node", "n3", "--ttl", "1h"], (["control", "blacklist-add", "train"], None)),
    (["--home", "/h", "control", "stop", "--group=sw"], (["control", "stop"], "sw")),
])
def test_a_routed_command_finds_its_run_among_its_options(argv, expected):
    from fray.cli.clusters_view import _arguments

    assert _arguments(argv) == expected
