"""The dashboard over several clusters, with the pilot: two real sshd on 127.0.0.1 ("east", "west"), each
with its own remote FRAY_HOME running this branch's fray (tests/remote/test_clusters.py's fixture, its own pair
here), and this machine. Every cluster's runs in one table with a CLUSTER column; the run screen, logs and
stop of a host's run go to that host; west stopped midway is one row, and east and this machine still show.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from fray.cli import route
from fray.cli.arguments import normalize
from fray.state.layout import Home
from fray.tui import web
from fray.tui.screens.dialogs import BanScreen, ConfirmScreen
from tests.remote.test_clusters import (  # noqa: F401  (clusters: the fixture)
    REMOTE_TIMEOUT, clusters, fray, many, meta_in, submitted)
from tests.tui_support import dashboard, go_to, run, screen_text, until

pytestmark = pytest.mark.slow
NAMES = ["local", "east", "west"]
WEST_DOWN = ("cannot reach west", "the connection to west failed")  # how a host gone down is told


def row_of(text: str, name: str) -> list[str]:
    """The words of the table's line for the run called `name` (CLUSTER, icon, NAME, ...)."""
    return next(words for words in map(str.split, text.splitlines()) if words[:1] in ([n] for n in NAMES)
                and name in words[1:3])


def down(server: subprocess.Popen[bytes]) -> None:
    """The host goes down: its sshd and every session it serves (the dashboard's open connection too)."""
    found = [server.pid]
    for pid in found:
        children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
        found += [int(child) for child in children.split()]
    for pid in reversed(found):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    server.wait(timeout=10)


@pytest.fixture
def patient(many, tmp_path, monkeypatch):
    """The same clusters with remote_timeout 30s: on a loaded 2-core machine an SSH login and `fray list`
    can take longer than the walkthrough's (the cut-off itself is tests/remote/test_clusters.py's)."""
    config = tmp_path / "xdg" / "fray" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text((many.xdg / "fray" / "config.toml").read_text().replace(
        f"remote_timeout = {REMOTE_TIMEOUT}", "remote_timeout = 30"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return many


def test_the_dashboard_shows_every_cluster_acts_on_each_runs_own_and_a_host_going_down(patient, home):
    many = patient
    west = submitted(fray("submit", "hello.py", "--name", "west-hello", "--wait", "--remote", "west").stdout)
    east = submitted(fray("submit", "sleeper.py", "--name", "east-sleeper", "--remote", "east").stdout)
    here = submitted(fray("submit", "hello.py", "--name", "here-hello", "--wait").stdout)

    async def scenario():
        async with dashboard(home, size=(200, 40), clusters=NAMES) as (app, pilot):
            said: list[str] = []  # the notifications (the pilot shows no toasts)
            shown = app.notify
            app.notify = lambda message, **options: (said.append(message), shown(message, **options))[1]
            await until(pilot, lambda: app.remote is not None, timeout=40, what="the app's first asking")
            assert [(c["cluster"], c["state"]) for c in app.remote.clusters] == [("east", "ok"), ("west", "ok")]
            await until(pilot, lambda: "east-sleeper" in screen_text(app) and "west-hello" in screen_text(app),
                        what="every cluster's runs")
            text = screen_text(app)
            assert "CLUSTER" in text and "on local; east 1 run, west 1 run" in text
            assert row_of(text, "here-hello")[:3] == ["local", "✓", "here-hello"]
            assert row_of(text, "west-hello")[:3] == ["west", "✓", "west-hello"]
            assert row_of(text, "east-sleeper")[0] == "east"

            await go_to(app, pilot, "west-hello")  # its logs, read on west
            await pilot.press("t")
            await until(pilot, lambda: f"hello from {many.homes['west']}" in screen_text(app), what="west's log")
            assert f"{west['run_id']} on west, attempt 1, stdout" in screen_text(app)
            await pilot.press("escape")

            await go_to(app, pilot, "east-sleeper")  # its screen, as east tells it
            await pilot.press("enter")
            await until(pilot, lambda: "east (the run dir is on that host)" in screen_text(app), what="east's status")
            text = screen_text(app)
            assert east["run_id"] in text and str(many.homes["east"]) in text
            assert f"fray plot {east['run_id']} --remote east" in text
            await pilot.press("s", "y")  # stop it, on east
            await until(pilot, lambda: any(m.startswith("east: requested stop for east-sleeper") for m in said),
                        timeout=30, what="the stop's answer from east")
            await until(pilot, lambda: meta_in(many.homes["east"], east["run_id"])["phase"] == "ended", timeout=60,
                        what="east's run to stop")
            assert meta_in(many.homes["east"], east["run_id"])["end"]["status"] == "stopped_manual"
            await pilot.press("escape")

            await go_to(app, pilot, "east-sleeper")  # ban its node: on east, not here
            await pilot.press("b")
            await until(pilot, lambda: isinstance(app.screen, BanScreen), what="the BanScreen")
            assert app.screen.query_one("#node").value == "vm"
            app.screen.query_one("#reason").value = "bad disk"
            await pilot.press("enter")
            await until(pilot, lambda: any(m.startswith("east: east-sleeper: ") for m in said), timeout=30,
                        what="the ban's answer from east")
            banned = json.loads((many.homes["east"] / "blacklist.json").read_text())["nodes"]
            assert banned["vm"]["reason"] == "bad disk" and banned["vm"]["source_run"] == east["run_id"]
            assert not home.blacklist.exists()

            # Nothing asked of west is under way: killed midway, a login shell would leave pyenv's lock behind
            # on this machine, slowing every later login (east's too) by a minute.
            await until(pilot, lambda: not app.asking, timeout=40, what="the hosts' last asking to end")
            down(many.servers["west"])  # west goes down: one row says so, the others stay
            started = time.monotonic()
            await app.refresh_remotes()
            assert time.monotonic() - started < 10  # refused at once: no waiting for the 30s timeout
            await until(pilot, lambda: "west is unavailable" in screen_text(app), what="west's row")
            text = screen_text(app)
            # Refused at connect, or a connection held since reset by the host going down: either says why.
            why = " ".join(row_of(text, "west"))
            assert any(w in why for w in WEST_DOWN) and "west unavailable" in text, why
            assert "west-hello" not in text and "here-hello" in text
            assert row_of(text, "east-sleeper")[0] == "east" and "stopped_manual" in row_of(text, "east-sleeper")
            await go_to(app, pilot, "west")
            await pilot.press("s")  # nothing to act on: it says why, and asks nothing
            await until(pilot, lambda: said[-1:] == [row_of(text, "west") and app.screen.table.selected["reason"]],
                        what="the warning")
            assert any(said[-1].startswith("west is unavailable: " + w) for w in WEST_DOWN), said[-1]
            assert not isinstance(app.screen, ConfirmScreen)
            assert here["run_id"]

    run(scenario())


def test_tui_and_web_span_the_clusters_of_remote_or_the_config(many):
    def resolved(*argv: str):  # what the fray group runs: these args here, or "there" (on the one host)
        read = normalize(list(argv))
        elsewhere, args = route.resolve(read.home, read.remote, read.command)
        return "there" if elsewhere is not None else args

    assert resolved("tui", "--remote", "east,west") == ["tui", "--clusters", "local,east,west"]
    assert resolved("web", "--port", "9") == ["web", "--port", "9", "--clusters", "local,east,west"]  # `remotes`
    assert resolved("tui", "--clusters", "local,east") == ["tui", "--clusters", "local,east"]  # fray web's own app
    assert resolved("tui", "--remote", "east") == "there"  # one host: the dashboard runs there
    assert web.app_command(Home(many.root), clusters=["local", "east"]).endswith("tui --clusters local,east")
    refused = fray("tui", "--remote", "east,nosuch", "--json", check=False)
    assert refused.returncode == 2 and "nosuch is not a Host" in json.loads(refused.stdout)["error"]["message"]
