"""The dashboard live: file watching and the timer, corrupt files, narrow and wide terminals, themes,
the real `fray tui` in tmux, and `fray web` in headless Chromium.

The browser test reads the page's terminal from the DOM: textual-serve draws
with xterm.js, whose default WebGL renderer paints a canvas with no text in it;
with 3D APIs disabled (--disable-3d-apis) xterm.js falls back to its DOM
renderer, one element per terminal row, and `.xterm-rows` then holds exactly
the characters on the screen. A screenshot is saved beside the test's files
for a person to look at.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import pytest

from fray.state import runs, store
from fray.tui import theme as themes
from fray.ops.live import Hint, RunsModel, hint_of
from tests.conftest import REPO, wait_until
from tests.tui_support import dashboard, go_to, make_runs, run, screen_text, until


# ---------------------------------------------------------------- the model (no Textual)


def test_scans_read_only_what_changed_and_report_it(home, tmp_path):
    ids = make_runs(home, tmp_path / "scripts")
    model = RunsModel(home)
    first = model.scan()
    assert set(first.rows) == set(ids.values()) and first.changed == set(ids.values())
    assert first.rows[ids["corrupt"]]["status"] == "pending"  # read from meta.json's last good copy
    assert first.rows[ids["healthy"]]["where"] == "local"
    again = model.scan(hint=Hint())  # nothing read: only time-dependent columns may change
    assert again.changed <= {ids["healthy"]}
    beat = time.time() + 5  # a compute node's heartbeat, over NFS: no file event, the tick reads it
    home.run(ids["healthy"]).attempt(1).heartbeat.write_text(f"{beat}\n")
    ticked = model.scan(now=beat, hint=Hint(beats=True))
    assert ids["healthy"] in ticked.changed and ticked.rows[ids["healthy"]]["heartbeat_age_sec"] == 0.0
    files = home.run(ids["healthy"]).attempt(1)
    store.write_json(files.progress, {"updated_at": time.time(), "step": 12345, "loss": 0.5}, "progress")
    moved = model.scan(hint=Hint(runs={ids["healthy"]}))
    assert moved.changed == {ids["healthy"]} and moved.rows[ids["healthy"]]["step"] == 12345
    shutil.rmtree(home.run(ids["done"]).dir)
    gone = model.scan()
    assert gone.removed == {ids["done"]} and ids["done"] not in gone.rows
    # the events pane: newest first, read incrementally
    assert [e["kind"] for e in gone.events] == ["started", "submitted"]
    store.append_jsonl(home.run(ids["healthy"]).events, {"at": time.time(), "run_id": ids["healthy"],
                                                         "kind": "cancel", "attempt": 1, "reason": "asked"}, "event")
    newer = model.scan(hint=Hint(runs={ids["healthy"]}))
    assert [e["kind"] for e in newer.events] == ["cancel", "started", "submitted"]
    assert newer.events[0]["name"] == "train-gpt"


def test_changed_paths_name_runs_and_shared_files(home):
    hint = hint_of(home, [str(home.run("r1").attempt(1).heartbeat), str(home.run("r2").meta),
                          str(home.blacklist), str(home.daemon_lease)])
    assert hint.runs == {"r1", "r2"} and hint.blacklist and hint.daemon and not hint.nodes


# ---------------------------------------------------------------- live in the app


def test_the_watcher_brings_changes_without_a_key(home, tmp_path):
    ids = make_runs(home, tmp_path / "scripts")
    script = tmp_path / "w.py"
    script.write_text("print(1)\n")

    async def scenario():
        async with dashboard(home, watch=True) as (app, pilot):
            await until(pilot, lambda: app.watcher is not None and app.watcher.alive, what="the watcher")
            probe = home.run(ids["healthy"]).meta  # touched until the watcher reports it: its watches are in place
            await until(pilot, lambda: (os.utime(probe), ids["healthy"] in app.snapshot.hint.runs)[1],
                        what="the watcher to report a touched file")
            runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, name="watched-arrival"))
            await until(pilot, lambda: "watched-arrival" in screen_text(app), what="a new run, from a file event")
            runs.request(home, ids["pending"], "pause")
            await until(pilot, lambda: "pending (paused)" in screen_text(app), what="a control change")
            blacklist_ban(home)
            await until(pilot, lambda: app.snapshot.hint.blacklist, what="the blacklist event")

    run(scenario())


def blacklist_ban(home):
    from fray.state import blacklist

    blacklist.ban(home, "gpu-node-9", "test", 60.0)


def test_the_timer_alone_keeps_the_screen_current(home, tmp_path):
    make_runs(home, tmp_path / "scripts")
    script = tmp_path / "t.py"
    script.write_text("print(1)\n")

    async def scenario():
        async with dashboard(home, watch=False, tick=0.2) as (app, pilot):
            runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, name="timer-arrival"))
            await until(pilot, lambda: "timer-arrival" in screen_text(app), timeout=15, what="a full scan by timer")

    run(scenario())


def test_a_file_corrupted_while_watching_shows_in_its_row_and_nothing_crashes(home, tmp_path):
    ids = make_runs(home, tmp_path / "scripts")

    async def scenario():
        async with dashboard(home) as (app, pilot):
            table = app.screen.query_one("#runs")
            await pilot.press("j", "j")
            selected = table.cursor_id
            home.run(ids["healthy"]).meta.write_bytes(b"\x00\xff garbage")
            home.run(ids["pending"]).control.write_text('{"paused": "yes"}')
            await app.refresh_now()
            rows = table.rows
            # Each run stays what it is: meta.json from its last good copy, a damaged control.json moved
            # aside (a request lost, not the run); the detail screen lists the files moved aside.
            assert rows[ids["healthy"]]["status"] == "healthy_running"
            assert rows[ids["pending"]]["status"] == "pending"
            assert table.cursor_id == selected  # the cursor stays on its run
            await go_to(app, pilot, "train-gpt")
            await pilot.press("enter")  # the detail of a damaged run says so, and does not crash
            await until(pilot, lambda: "corrupt" in screen_text(app), what="the damaged files in the detail")
            await pilot.press("escape", "R")
            assert app.is_running

    run(scenario())


def test_rows_update_in_place_and_the_cursor_follows_its_run(home, tmp_path):
    ids = make_runs(home, tmp_path / "scripts")
    script = tmp_path / "n.py"
    script.write_text("print(1)\n")

    async def scenario():
        async with dashboard(home) as (app, pilot):
            table = app.screen.query_one("#runs")
            await go_to(app, pilot, "train-gpt")
            position = table.cursor
            repaints = []
            original = table.refresh
            table.refresh = lambda *a, **k: (repaints.append(a), original(*a, **k))[1]
            files = home.run(ids["healthy"]).attempt(1)
            store.write_json(files.progress, {"updated_at": time.time(), "step": 12001, "loss": 1.2}, "progress")
            snapshot = await app.refresh_now(full=False, runs={ids["healthy"]})  # as the watcher reports it
            assert snapshot.changed == {ids["healthy"]}
            assert repaints and all(args for args in repaints)  # only regions (lines) repainted, never the whole
            assert "12001" in "\n".join(table.visible_lines())
            runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, name="newest"))
            await app.refresh_now()
            assert table.order[0] != ids["healthy"] and table.rows[table.order[0]]["name"] == "newest"
            assert table.selected["name"] == "train-gpt" and table.cursor == position + 1

    run(scenario())


def test_80_by_24_keeps_what_matters_and_200_columns_show_everything(home, tmp_path):
    make_runs(home, tmp_path / "scripts")

    async def scenario():
        async with dashboard(home, size=(80, 24)) as (app, pilot):
            table = app.screen.query_one("#runs")
            header = table.visible_lines()[0]
            for title in ("NAME", "STATUS", "NODE", "BEAT", "REASON"):
                assert title in header
            assert all(len(line) <= 80 for line in screen_text(app).splitlines())
            assert "DAEMON STOPPED" in screen_text(app)
        async with dashboard(home, size=(220, 50)) as (app, pilot):
            header = app.screen.query_one("#runs").visible_lines()[0]
            for title in ("NAME", "MODE", "STATUS", "NODE", "#", "UPTIME", "BEAT", "STEP", "LOSS", "WHERE", "REASON"):
                assert title in header
            assert "2 workload failures (max_retries 1)" in screen_text(app)  # the whole reason fits

    run(scenario())


def test_themes_256_colour_and_the_8_colour_fallback(home, tmp_path, monkeypatch):
    monkeypatch.delenv("FRAY_TUI_THEME", raising=False)
    assert themes.choose(None, "standard") == "ansi"
    assert themes.choose(None, "256") == "dark" and themes.choose(None, "truecolor") == "dark"
    assert themes.choose("light", "standard") == "light"
    monkeypatch.setenv("FRAY_TUI_THEME", "light")
    assert themes.choose(None, "256") == "light"
    make_runs(home, tmp_path / "scripts")

    async def scenario(name, textual_name):
        async with dashboard(home, theme_name=name) as (app, pilot):
            assert app.theme == textual_name and app.palette is themes.PALETTES[name]
            assert "train-gpt" in screen_text(app)

    run(scenario("light", "fray-light"))
    run(scenario("ansi", "ansi-dark"))


# ---------------------------------------------------------------- the real program in a terminal


def _tmux(*args: str, socket_name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tmux", "-L", socket_name, *args], capture_output=True, text=True, timeout=20)


def shows(text: str, *parts: str) -> bool:
    return all(part in text for part in parts)


@pytest.mark.skipif(shutil.which("tmux") is None and not os.environ.get("CI"), reason="tmux is not installed")
def test_fray_tui_in_tmux(home, tmp_path):
    """The real `fray tui`: started in tmux, driven with send-keys, read back with capture-pane."""
    ids = make_runs(home, tmp_path / "scripts")
    name = f"fray-test-{os.getpid()}"
    env = f"FRAY_HOME={_sh(str(home.root))} TERM=xterm-256color PYTHONPATH={_sh(str(REPO))}"

    def screen() -> str:
        return _tmux("capture-pane", "-p", "-t", name, socket_name=name).stdout

    # COLUMNS/LINES would override the pane's size (shutil.get_terminal_size reads them first)
    command = f"env -u COLUMNS -u LINES {env} {_sh(sys.executable)} -m fray.cli.main tui"
    started = _tmux("new-session", "-d", "-s", name, "-x", "120", "-y", "50", command, socket_name=name)
    assert started.returncode == 0, started.stderr
    try:
        # every part at once: a capture can catch a frame drawn only in part
        wait_until(lambda: shows(screen(), "train-gpt", "5 runs", "DAEMON STOPPED", "healthy_running"),
                   timeout=30, what="the dashboard in tmux")
        _tmux("send-keys", "-t", name, "j", "j", socket_name=name)  # newest first: broken, eval-sweep, train-gpt
        _tmux("send-keys", "-t", name, "Enter", socket_name=name)
        wait_until(lambda: "Attempts" in screen() and "Probe results" in screen(), what="the detail screen")
        _tmux("send-keys", "-t", name, "t", socket_name=name)
        wait_until(lambda: "step 299 loss 1.701" in screen(), what="the logs screen")
        _tmux("send-keys", "-t", name, "Escape", socket_name=name)
        wait_until(lambda: "Probe results" in screen(), what="back on the detail screen")
        _tmux("send-keys", "-t", name, "Escape", socket_name=name)
        wait_until(lambda: "Recent actions" in screen(), what="back on the dashboard")
        _tmux("send-keys", "-t", name, "/", socket_name=name)
        wait_until(lambda: "words that must all appear" in screen(), what="the filter prompt")
        _tmux("send-keys", "-t", name, "-l", "flaky", socket_name=name)
        wait_until(lambda: "(1 shown)" in screen(), what="the filter")
        _tmux("send-keys", "-t", name, "Escape", socket_name=name)  # clears the filter
        wait_until(lambda: "(1 shown)" not in screen(), what="the filter cleared")  # else Esc+q reads as Alt+q
        _tmux("send-keys", "-t", name, "q", socket_name=name)
        wait_until(lambda: _tmux("has-session", "-t", name, socket_name=name).returncode != 0, what="fray tui to quit")

        # `fray nodes` on a terminal opens the nodes screen; piped, it prints text
        nodes = f"env -u COLUMNS -u LINES {env} {_sh(sys.executable)} -m fray.cli.main nodes"
        assert _tmux("new-session", "-d", "-s", name, "-x", "120", "-y", "30", nodes, socket_name=name).returncode == 0
        wait_until(lambda: "8 x H100" in screen() and "Unban" in screen(), what="the nodes screen")
        _tmux("send-keys", "-t", name, "q", socket_name=name)
        piped = subprocess.run([sys.executable, "-m", "fray.cli.main", "nodes"], capture_output=True, text=True,
                               env={**os.environ, "FRAY_HOME": str(home.root)}, timeout=60)
        assert piped.returncode == 0 and piped.stdout.startswith("NODE") and "8 x H100" in piped.stdout
        assert "\x1b[" not in piped.stdout
    finally:
        _tmux("kill-server", socket_name=name)
    assert ids


def _sh(text: str) -> str:
    import shlex

    return shlex.quote(text)


def test_tui_and_nodes_list_import_textual_only_when_they_show_it(home, tmp_path):
    from tests.cli.test_cli import _modules_after

    make_runs(home, tmp_path / "scripts")
    for args in (("nodes", "list"), ("tui", "--help"), ("web", "--help"), ("--help",)):
        modules = _modules_after(*args)
        assert not {m for m in modules if m.split(".")[0] in ("textual", "textual_serve", "aiohttp")}, args
        # `fray tui` and `fray web` are the dashboard's own commands (fray.tui.entry): their
        # help loads that small module and nothing else of the dashboard; other commands none of it.
        dashboard = {m for m in modules if m == "fray.tui" or m.startswith("fray.tui.")}
        assert dashboard <= ({"fray.tui", "fray.tui.entry"} if args[0] in ("tui", "web") else set()), args


# ---------------------------------------------------------------- the browser


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class WebDriver:
    """The W3C WebDriver protocol over HTTP to chromedriver: enough to open a page and run a script."""

    def __init__(self, browser: str, driver: str, profile: str) -> None:
        self.port = _free_port()
        self.proc = subprocess.Popen([driver, f"--port={self.port}"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        wait_until(lambda: self._ready(), timeout=30, what="chromedriver")
        options = {"binary": browser, "args": [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
            "--window-size=1280,800", "--disable-3d-apis"]}
        session = self.call("POST", "/session", {"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": options}}})
        self.session = session["sessionId"]

    def _ready(self) -> bool:
        try:
            return bool(self.call("GET", "/status"))
        except OSError:
            return False

    def call(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)["value"]

    def open(self, url: str) -> None:
        self.call("POST", f"/session/{self.session}/url", {"url": url})

    def run(self, script: str):
        return self.call("POST", f"/session/{self.session}/execute/sync", {"script": script, "args": []})

    def screenshot(self, path) -> None:
        path.write_bytes(base64.b64decode(self.call("GET", f"/session/{self.session}/screenshot")))

    def close(self) -> None:
        try:
            self.call("DELETE", f"/session/{self.session}")
        finally:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)


def _browser() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@pytest.mark.skipif(_browser() is None and not os.environ.get("CI"),
                    reason="chromium and chromium-driver are not installed (CI installs them)")
def test_fray_web_serves_the_dashboard_to_a_browser_behind_a_token(home, tmp_path):
    make_runs(home, tmp_path / "scripts")
    browser = _browser()
    assert browser is not None, "CI must install chromium and chromium-driver (.ci/run)"
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "fray.cli.main", "web", "--port", str(port)],
                              cwd=REPO, env={**os.environ, "FRAY_HOME": str(home.root)}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    driver = None
    try:
        banner = [server.stdout.readline() for _ in range(2)]
        url = re.search(r"(http://127\.0\.0\.1:\d+/\?token=\S+)", "".join(banner)).group(1)
        assert "ssh -N -L" in server.stdout.readline()

        def status(target: str) -> int:
            try:
                with urllib.request.urlopen(target, timeout=5) as response:
                    return response.status
            except urllib.error.HTTPError as exc:
                return exc.code
            except OSError:
                return 0

        wait_until(lambda: status(url) == 200, timeout=30, what="fray web to answer")
        assert status(f"http://127.0.0.1:{port}/") == 403
        assert status(f"http://127.0.0.1:{port}/?token=wrong") == 403
        assert status(f"http://127.0.0.1:{port}/ws/wrong") == 403
        with tempfile.TemporaryDirectory() as profile:
            driver = WebDriver(*browser, profile)
            driver.open(url)
            rows = "const r = document.querySelector('.xterm-rows'); return r ? r.innerText : '';"
            # every part at once: xterm.js may have drawn the screen only in part
            # The dashboard's own content after first paint, not textual-serve's splash page: the runs
            # table with its rows, among them the run whose meta.json is corrupt (read from its copy).
            wait_until(lambda: re.search(r"NAME\s+.*STATUS", page := driver.run(rows))
                       and shows(page, "train-gpt", "healthy_running", "flaky-job", "5 runs", "broken"),
                       timeout=60, what="the runs table in the page")
            driver.screenshot(tmp_path / "fray-web.png")
            driver.close()
            driver = None
    finally:
        if driver is not None:
            driver.close()
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=15)


def test_the_readme_and_the_docs_show_the_committed_screenshots():
    assert "(tests/screenshots/dashboard.svg)" in (REPO / "README.md").read_text()
    watching = (REPO / "docs" / "watching.md").read_text()  # docs/screenshots is a link to tests/screenshots
    for name in ("dashboard", "detail", "logs"):
        svg = REPO / "tests" / "screenshots" / f"{name}.svg"
        assert svg.read_text().lstrip().startswith("<svg") and "train" in svg.read_text()
        assert f"(screenshots/{name}.svg)" in watching
