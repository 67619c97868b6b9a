"""The dashboard's other screens with the pilot: run detail, logs, nodes, queue, edit config.

Each key of each screen is pressed as a person would, and the test reads what
the screen shows and what was written to disk (control.json, blacklist.json).
"""

from __future__ import annotations

import json
import time

from rich.text import Text

from fray.state import runs, store
from fray.core.model import Control, Meta
from fray.tui.screens.settings import ConfigScreen
from fray.tui.screens.detail import DetailScreen
from fray.tui.screens.dialogs import BanScreen, ConfirmScreen
from fray.tui.screens.logs import LogsScreen
from fray.tui.screens.nodes import NodesScreen
from fray.tui.screens.queue import QueueScreen
from tests.conftest import start_daemon, stop_daemon, wait_until
from tests.tui_support import dashboard, make_runs, run, screen_text, until


def control_of(home, run_id):
    return json.loads(home.run(run_id).control.read_text())


# ---------------------------------------------------------------- run detail


def test_detail_shows_meta_attempts_failures_probes_events_and_the_script(home, tmp_path):
    ids = make_runs(home, tmp_path / "scripts")

    async def scenario():
        async with dashboard(home, size=(140, 80), run_id=ids["failed"]) as (app, pilot):
            await until(pilot, lambda: isinstance(app.screen, DetailScreen), what="the DetailScreen")
            text = screen_text(app)
            assert "failed" in text and "flaky-job" in text and "2 workload failures (max_retries 1)" in text
            assert "Attempts" in text and "workload_failure" in text and "gpu-node-3" in text
            assert "Failure records (2)" in text and "ValueError: loss is nan" in text
            assert "#SBATCH --time=4:00:00" in text and "#FRAY --gpus 1" in text
        async with dashboard(home, size=(140, 80), run_id=ids["healthy"]) as (app, pilot):
            text = screen_text(app)
            assert "Probe results" in text and "ECC clean" in text
            assert "step 12000, loss 1.234" in text
            assert "attempt 1 started on gpu-node-7" in text  # events
            assert "Runtime commands" in text
            # the script: #SBATCH lines green, #FRAY lines purple (the palette's colours)
            script = app.screen.query_one("#script").content
            spans = {str(script.renderables[1])[s.start:s.end].strip(): str(s.style)
                     for s in script.renderables[1].spans}
            palette = app.palette
            assert spans["#SBATCH --time=4:00:00"] == palette.sbatch
            assert spans["#FRAY --gpus 1"] == palette.fray
            assert isinstance(script.renderables[1], Text)

    run(scenario())


def test_detail_keys_r_s_p_t_b_e_and_backspace(home, tmp_path):
    ids = make_runs(home, tmp_path / "scripts")
    run_id = ids["healthy"]

    async def scenario():
        async with dashboard(home, run_id=run_id) as (app, pilot):
            await pilot.press("r")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the ConfirmScreen")
            await until(pilot, lambda: "Restart train-gpt" in screen_text(app), what="the screen")
            await pilot.press("y")
            await until(pilot, lambda: control_of(home, run_id)["restart_nonce"] == 1, what="control.json")
            await pilot.press("p")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
            await pilot.press("y")
            await until(pilot, lambda: control_of(home, run_id)["paused"] is True, what="control.json")
            await pilot.press("s")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
            await pilot.press("y")
            await until(pilot, lambda: control_of(home, run_id)["stop_requested"] is True, what="control.json")
            await pilot.press("t")
            await until(pilot, lambda: isinstance(app.screen, LogsScreen), what="the LogsScreen")
            await pilot.press("escape")
            await pilot.press("b")
            await until(pilot, lambda: isinstance(app.screen, BanScreen), what="the BanScreen")
            assert app.screen.query_one("#node").value == "gpu-node-7"
            await pilot.press("escape")
            await pilot.press("e")
            await until(pilot, lambda: isinstance(app.screen, ConfigScreen), what="the ConfigScreen")
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, DetailScreen), what="the DetailScreen")
            await pilot.press("backspace")
            assert not isinstance(app.screen, DetailScreen)
            assert len(app.ensure_daemon.calls) == 3

    run(scenario())


def test_a_run_screen_opened_after_another_shows_only_the_new_run(home, tmp_path):
    """The app keeps one run screen and reuses it: nothing of the run shown before may stay on it."""
    ids = make_runs(home, tmp_path / "scripts")

    async def scenario():
        async with dashboard(home, size=(140, 80), run_id=ids["failed"]) as (app, pilot):
            await until(pilot, lambda: "ValueError: loss is nan" in screen_text(app), what="the failed run's screen")
            first = app.screen
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, DetailScreen), what="the dashboard")
            for run_id, name in ((ids["done"], "hello"), (ids["corrupt"], "broken")):
                app.open_details(run_id)  # what Enter on its row does
                await until(pilot, lambda: isinstance(app.screen, DetailScreen) and run_id in screen_text(app),
                            what=f"{name}'s screen")
                text = screen_text(app)
                assert "flaky-job" not in text and "ValueError: loss is nan" not in text
                assert "Failure records: none" in text
                assert app.screen is first  # reused, not built again (what makes it quick)
                await pilot.press("escape")

    run(scenario())


def test_detail_follows_the_run_as_it_changes(home, tmp_path):
    ids = make_runs(home, tmp_path / "scripts")
    run_id = ids["healthy"]

    async def scenario():
        async with dashboard(home, run_id=run_id) as (app, pilot):
            paths = home.run(run_id)
            store.write_json(paths.attempt(1).progress, {"updated_at": time.time(), "step": 13500, "loss": 0.9},
                             "progress")
            await app.refresh_now(full=False)
            await until(pilot, lambda: "step 13500, loss 0.9" in screen_text(app), what="the screen")

    run(scenario())


def test_detail_of_a_failed_group_shows_the_failure_of_the_task_that_failed_it(home, tmp_path):
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 3, "gpus": 0}}))
    script = tmp_path / "group.sh"
    script.write_text("#!/bin/bash\n#FRAY --replicas 3 --max-retries 0\n"
                      'if [ "$FRAY_TASK_INDEX" = 1 ]; then echo "replica 1 lost its shard" >&2; exit 3; fi\n'
                      "exec sleep 300\n")
    run_id = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(tmp_path))).run_id
    daemon = start_daemon(home, wait=False)
    try:
        wait_until(lambda: runs.read_meta(home, run_id).phase == "ended", timeout=30, what="the run to fail")
    finally:
        stop_daemon(daemon)

    async def scenario():
        async with dashboard(home, size=(160, 80), run_id=run_id) as (app, pilot):
            await until(pilot, lambda: isinstance(app.screen, DetailScreen), what="the DetailScreen")
            # Task 1's record with its stderr, not task 0's "killed by SIGKILL".
            await until(pilot, lambda: "attempt 1, task 1: exit 50" in screen_text(app), what="task 1's failure")
            text = screen_text(app)
            assert "replica 1 lost its shard" in text and "task 1 of 3: exit 3" in text

    run(scenario())


# ---------------------------------------------------------------- logs


def test_logs_tail_follow_streams_search_and_position(home, tmp_path):
    ids = make_runs(home, tmp_path / "scripts")
    files = home.run(ids["healthy"]).attempt(1)

    async def scenario():
        async with dashboard(home, size=(120, 30)) as (app, pilot):
            app.push_screen(LogsScreen(ids["healthy"]))
            await until(pilot, lambda: "step 299 loss 1.701" in screen_text(app), what="the tail")
            await until(pilot, lambda: "above" in screen_text(app) and "bottom" in screen_text(app),
                        what="the position readout")
            text = screen_text(app)
            assert "attempt 1 of 1" in text and "stdout" in text and "FOLLOWING" in text and "300 lines" in text
            # following: new lines appear as they are written
            with open(files.stdout, "a") as handle:
                handle.write("step 300 loss 1.700\n")
            await until(pilot, lambda: "step 300 loss 1.700" in screen_text(app), what="a followed line")
            # space stops following: new lines wait, the view stays
            await pilot.press("space")
            await until(pilot, lambda: "paused (space follows)" in screen_text(app), what="the screen")
            with open(files.stdout, "a") as handle:
                handle.write("step 301 loss 1.699\n")
            await pilot.pause(0.6)
            assert "step 301" not in screen_text(app)
            await pilot.press("space")
            await until(pilot, lambda: "step 301 loss 1.699" in screen_text(app), what="lines after follow resumes")
            # o/e switch streams
            await pilot.press("e")
            await until(pilot, lambda: "dataloader is slow" in screen_text(app), what="stderr")
            assert "stderr" in screen_text(app).splitlines()[0]
            await pilot.press("o")
            await until(pilot, lambda: "step 301" in screen_text(app), what="stdout again")
            # / searches: the view goes to the match, the readout counts them
            await pilot.press("slash")
            await until(pilot, lambda: app.screen.query_one("#search").has_focus, what="the search box")
            await pilot.press(*"step 150 ", "enter")
            await until(pilot, lambda: "search 'step 150 ': 1/1" in screen_text(app), what="the search readout")
            text = screen_text(app)
            assert "step 150 loss 1.850" in text
            assert "↓" in text and "↑" in text  # somewhere in the middle: lines above and below
            await pilot.press("slash")
            await until(pilot, lambda: app.screen.query_one("#search").has_focus, what="the search box")
            app.screen.query_one("#search").value = "loss 1.9"
            await pilot.press("enter")
            await until(pilot, lambda: "search 'loss 1.9': 100/100" in screen_text(app), what="the screen")
            view = app.screen.log_view
            last = view.match_index
            await pilot.press("n")
            assert view.match_index == (last + 1) % len(view.matches)
            await pilot.press("N")
            assert view.match_index == last
            await pilot.press("g")
            await until(pilot, lambda: "top" in screen_text(app), what="the screen")

    run(scenario())


def test_logs_move_between_attempts_and_follow_a_new_one(home, tmp_path):
    ids = make_runs(home, tmp_path / "scripts")
    run_id = ids["failed"]
    for n in (1, 2):
        home.run(run_id).attempt(n).stdout.write_text(f"output of attempt {n}\n")

    async def scenario():
        async with dashboard(home) as (app, pilot):
            app.push_screen(LogsScreen(run_id))
            await until(pilot, lambda: "output of attempt 2" in screen_text(app), what="the latest attempt")
            await pilot.press("left_square_bracket")
            await until(pilot, lambda: "output of attempt 1" in screen_text(app), what="attempt 1")
            await until(pilot, lambda: "attempt 1 of 2" in screen_text(app), what="the screen")
            await pilot.press("right_square_bracket")
            await until(pilot, lambda: "attempt 2 of 2" in screen_text(app), what="attempt 2")

    run(scenario())


def test_following_logs_moves_on_to_the_next_attempt_as_fray_logs_f_does(home, tmp_path):
    ids = make_runs(home, tmp_path / "scripts")
    run_id = ids["healthy"]
    paths = home.run(run_id)

    async def scenario():
        async with dashboard(home, size=(120, 30)) as (app, pilot):
            app.push_screen(LogsScreen(run_id))
            await until(pilot, lambda: "step 299 loss 1.701" in screen_text(app), what="the tail")
            # the daemon ends attempt 1 (its last words still come) and attempt 2 starts on another node
            with open(paths.attempt(1).stdout, "a") as handle:
                handle.write("last words of attempt 1")
            meta = runs.read_meta(home, run_id).to_dict()
            now = time.time()
            meta["attempts"][0].update(state="ended", ended_at=now, exit_code=42, cause="node_fault")
            second = {**meta["attempts"][0], "number": 2, "state": "running", "node": "gpu-node-9",
                      "submitted_at": now, "started_at": now, "ended_at": None, "exit_code": None, "cause": None}
            meta["attempts"].append(second)
            store.make_dirs(paths.attempt(2).dir)
            paths.attempt(2).stdout.write_text("hello from attempt 2\n")
            store.write_json(paths.meta, meta, "meta")
            await until(pilot, lambda: "hello from attempt 2" in screen_text(app), what="attempt 2's output")
            text = screen_text(app)
            assert "last words of attempt 1" in text and "── attempt 2 on gpu-node-9 ──" in text
            assert "attempt 2 of 2" in text

    run(scenario())


def test_logs_of_a_run_without_attempts_say_so(home, tmp_path):
    ids = make_runs(home, tmp_path / "scripts")

    async def scenario():
        async with dashboard(home) as (app, pilot):
            app.push_screen(LogsScreen(ids["pending"]))
            await until(pilot, lambda: "no attempt yet" in screen_text(app), what="the note")

    run(scenario())


# ---------------------------------------------------------------- nodes


def test_nodes_show_gpus_and_ban_and_unban_with_ttl_and_reason(home, tmp_path):
    make_runs(home, tmp_path / "scripts")

    async def scenario():
        async with dashboard(home, start="nodes") as (app, pilot):
            await until(pilot, lambda: isinstance(app.screen, NodesScreen), what="the NodesScreen")
            text = screen_text(app)
            assert "gpu-node-7" in text and "8 x H100" in text and "8 x A100" in text and "512G" in text
            assert "2 nodes, 0 blacklisted" in text
            await pilot.press("b")
            await until(pilot, lambda: isinstance(app.screen, BanScreen), what="the BanScreen")
            assert app.screen.query_one("#node").value == "gpu-node-7"  # the selected node
            app.screen.query_one("#node").value = "gpu-node-3"
            app.screen.query_one("#ttl").value = "6h"
            app.screen.query_one("#reason").value = "flaky NVLink"
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the ConfirmScreen")
            await until(pilot, lambda: "Ban gpu-node-3 (6h)" in screen_text(app), what="the screen")
            await pilot.press("y")
            await until(pilot, home.blacklist.exists, what="blacklist.json")
            entry = json.loads(home.blacklist.read_text())["nodes"]["gpu-node-3"]
            assert entry["reason"] == "flaky NVLink" and 21500 < entry["expires_at"] - entry["added_at"] <= 21600
            await until(pilot, lambda: "banned 5h59m left, 1x: flaky NVLink" in screen_text(app)
                        or "banned 6h00m left, 1x: flaky NVLink" in screen_text(app), what="the ban shown")
            assert app.ensure_daemon.calls == []  # as `fray nodes ban`: no daemon needed
            await pilot.press("j")  # gpu-node-3 is the second row
            await pilot.press("u")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
            await until(pilot, lambda: "Unban gpu-node-3" in screen_text(app), what="the screen")
            await pilot.press("y")
            await until(pilot, lambda: json.loads(home.blacklist.read_text())["nodes"] == {}, what="the unban")
            await until(pilot, lambda: "0 blacklisted" in screen_text(app), what="the unban shown")
            await pilot.press("slash")
            await until(pilot, lambda: app.screen.query_one("#filter").has_focus, what="the filter box")
            await pilot.press(*"H100")
            table = app.screen.query_one("#nodes")
            assert [key.value for key in table.rows] == ["gpu-node-7"]

    run(scenario())


def test_a_never_ending_ban_from_the_nodes_screen(home, tmp_path):
    make_runs(home, tmp_path / "scripts")

    async def scenario():
        async with dashboard(home, start="nodes") as (app, pilot):
            await pilot.press("b")
            app.screen.query_one("#ttl").value = "never"
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
            await pilot.press("y")
            await until(pilot, home.blacklist.exists, what="blacklist.json")
            assert json.loads(home.blacklist.read_text())["nodes"]["gpu-node-7"]["expires_at"] is None
            await until(pilot, lambda: "banned until unbanned" in screen_text(app), what="the ban")

    run(scenario())


# ---------------------------------------------------------------- queue


def test_queue_lists_waiting_runs_in_the_order_they_will_be_tried(home, tmp_path):
    script = tmp_path / "q.py"
    script.write_text("print(1)\n")
    now = time.time()

    def new(name, at):
        return runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, name=name), now=at).run_id

    old = new("old-ready", now - 300)
    paused = new("paused-one", now - 400)
    control = Control(paused=True, updated_at=now)
    store.write_json(home.run(paused).control, control.to_dict(), "control")
    backing = new("backing-off", now - 500)
    meta = runs.read_meta(home, backing)
    store.write_json(home.run(backing).meta, Meta.from_dict({**meta.to_dict(), "next_attempt_at": now + 600}).to_dict(),
                     "meta")
    young = new("young-ready", now - 10)

    async def scenario():
        async with dashboard(home) as (app, pilot):
            await pilot.press("2")
            await until(pilot, lambda: isinstance(app.screen, QueueScreen), what="the QueueScreen")
            table = app.screen.query_one("#queue")
            assert [key.value for key in table.rows] == [old, young, backing, paused]
            text = screen_text(app)
            assert "4 runs waiting" in text and "backing off after failures: next attempt in" in text
            assert "paused: no attempt starts until unpause" in text and "waiting for the daemon" in text
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, DetailScreen), what="the DetailScreen")
            assert app.screen.run_id == old
            await pilot.press("escape")
            await pilot.press("j", "j", "j", "p")  # the paused one: p unpauses it at once
            await until(pilot, lambda: control_of(home, paused)["paused"] is False, what="control.json")

    run(scenario())


SERVE = "#!/bin/bash\n#FRAY --heartbeat-interval 0.5 --stop-grace 2\ntrap 'exit 0' TERM\nwhile true; do sleep 0.1; done\n"


def test_queue_shows_each_waiting_runs_band_and_why_no_worker_takes_it(home, tmp_path):
    # A real daemon on a 1-CPU machine without GPUs: one run holds the CPU, the others wait.
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 1, "gpus": 0}}))
    serve = tmp_path / "serve.sh"
    serve.write_text(SERVE)

    def new(**overrides):
        return runs.create_run(home, runs.SubmitOptions(script=serve, overrides=overrides,
                                                        workdir=str(tmp_path))).run_id

    daemon = start_daemon(home, wait=False)
    started = []
    try:
        blocker = new()
        started.append(blocker)
        wait_until(home.run(blocker).attempt(1).started.exists, what="the first run to take the CPU")
        batch, h100, prod = new(priority="batch"), new(constraints={"gpu-type=h100": "gpu-type=h100"}), \
            new(priority="production")
        started += [batch, h100, prod]
        wait_until(lambda: runs.read_meta(home, h100).wait_reason == "no worker with gpu-type=h100",
                   what="the daemon to say why the h100 run waits")

        async def scenario():
            async with dashboard(home, size=(160, 30)) as (app, pilot):
                await pilot.press("2")
                await until(pilot, lambda: isinstance(app.screen, QueueScreen), what="the QueueScreen")
                table = app.screen.query_one("#queue")
                assert [key.value for key in table.rows] == [prod, h100, batch]  # by band, then age
                assert [str(table.get_cell(run_id, "priority")) for run_id in (prod, h100, batch)] == \
                    ["production", "interactive", "batch"]
                assert str(table.get_cell(h100, "reason")) == "no worker with gpu-type=h100"
                text = screen_text(app)
                assert "BAND" in text and "production" in text and "no worker with gpu-type=h100" in text

        run(scenario())
    finally:
        for run_id in started:
            runs.request(home, run_id, "stop")
        for run_id in started:
            wait_until(lambda: runs.read_meta(home, run_id).phase == "ended", what="the stops")
        stop_daemon(daemon)


# ---------------------------------------------------------------- edit config


def test_edit_config_validates_then_writes_the_safe_settings(home, tmp_path):
    ids = make_runs(home, tmp_path / "scripts")
    run_id = ids["healthy"]

    async def scenario():
        async with dashboard(home, size=(120, 50), run_id=run_id) as (app, pilot):
            await pilot.press("e")
            await until(pilot, lambda: isinstance(app.screen, ConfigScreen) and app.screen.fields, what="the form")
            form = app.screen
            assert {s.field for s in form.fields} >= {"max_retries", "heartbeat_timeout_sec", "keep_alive_sec"}
            assert "cpus" not in {s.field for s in form.fields}  # resources cannot change on a live run
            assert form.query_one("#field-heartbeat_timeout_sec").value == "10m"
            form.query_one("#field-max_retries").value = "lots"
            await pilot.press("ctrl+s")
            await until(pilot, lambda: "--max-retries" in screen_text(app) and "nothing was saved" in screen_text(app), what="the screen")
            await until(pilot, lambda: control_of(home, run_id)["overrides"] == {}, what="control.json")
            form.query_one("#field-max_retries").value = "7"
            form.query_one("#field-heartbeat_timeout_sec").value = "5s"  # not longer than the 10s interval
            await pilot.press("ctrl+s")
            await until(pilot, lambda: "--heartbeat-timeout" in screen_text(app), what="the screen")
            await until(pilot, lambda: control_of(home, run_id)["overrides"] == {}, what="control.json")
            form.query_one("#field-heartbeat_timeout_sec").value = "15m"
            await pilot.press("ctrl+s")
            assert not isinstance(app.screen, ConfigScreen)
            await until(pilot, lambda: control_of(home, run_id)["overrides"] == {"max_retries": 7, "heartbeat_timeout_sec": 900.0}, what="control.json")
            assert app.ensure_daemon.calls == [home]

    run(scenario())


def test_edit_config_on_an_ended_run_is_kept_for_its_next_start(home, tmp_path):
    ids = make_runs(home, tmp_path / "scripts")
    run_id = ids["done"]

    async def scenario():
        async with dashboard(home, size=(120, 50), run_id=run_id) as (app, pilot):
            await pilot.press("e")
            await until(pilot, lambda: isinstance(app.screen, ConfigScreen) and app.screen.fields, what="the form")
            app.screen.query_one("#field-max_retries").value = "9"
            await pilot.press("ctrl+s")
            await until(pilot, lambda: control_of(home, run_id)["overrides"] == {"max_retries": 9}, what="control.json")

    run(scenario())
