"""A daemon starting over many runs: its first cycle reads the runs going, not the ones that ended
(fray.daemon.settled), and decides about them as if it had read every run."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from conftest import wait_until
from fray.core.model import Attempt, Control, End
from fray.daemon.loop import Daemon
from fray.state import runs, store
from fray.state.layout import Home

ENDED_RUNS = 12


def _write_meta(home: Home, run_id: str, change) -> None:
    """Rewrite meta.json (and its copy) as a daemon would have left it."""
    meta = runs.read_meta(home, run_id)
    change(meta)
    paths = home.run(run_id)
    for path in (paths.meta, paths.meta_copy):
        store.write_json(path, meta.to_dict(), "meta")


def _ended(meta) -> None:
    now = time.time()
    meta.phase = "ended"
    meta.attempts = [Attempt(number=1, state="ended", backend="local", submitted_at=now - 9, started_at=now - 8,
                             ended_at=now - 5, exit_code=0, cause="success", node="vm")]
    meta.end = End(status="completed_success", reason="attempt 1 succeeded", at=now - 5)


def _run(home: Home, tmp_path: Path, name: str, *, ended: bool = False, paused: bool = False, **overrides) -> str:
    script = tmp_path / f"{name}.py"
    script.write_text("print('hi')\n")
    run_id = runs.create_run(home, runs.SubmitOptions(script=script, overrides=overrides, name=name,
                                                      workdir=str(tmp_path))).run_id
    if ended:
        _write_meta(home, run_id, _ended)
    if paused:
        store.write_json(home.run(run_id).control, Control(updated_at=time.time(), paused=True).to_dict(), "control")
    return run_id


def _served_once(home: Home) -> None:
    """A daemon that served the home and stopped, leaving its index of settled runs behind."""
    daemon = Daemon(home)
    serving = threading.Thread(target=daemon.serve)
    serving.start()
    wait_until(lambda: daemon.cycles >= 1, what="a first cycle")
    daemon.request_stop()
    serving.join(30)
    assert not serving.is_alive()


def _home_with_ended_runs(home: Home, tmp_path: Path) -> list[str]:
    store.ensure_home(home)
    return [_run(home, tmp_path, f"done-{i}", ended=True) for i in range(ENDED_RUNS)]


def test_a_restarted_daemon_reads_the_runs_going_first_and_the_ended_ones_over_later_cycles(home, tmp_path):
    done = _home_with_ended_runs(home, tmp_path)
    waiting = _run(home, tmp_path, "waiting", paused=True)
    _served_once(home)
    assert home.settled_index.exists()

    daemon = Daemon(home)
    stats = daemon.cycle(full=True)
    assert stats.active == 1
    assert set(daemon._index.runs) == {waiting}  # the ended runs are deferred, not read
    # What serve does between two cycles, until none is left.
    wait_until(lambda: daemon._index.read_deferred_share() or not daemon._index.deferral.pending, what="every run read")
    assert set(daemon._index.runs) == {waiting, *done}
    assert all(daemon._index.runs[run_id].meta.phase == "ended" for run_id in done)


def test_an_ended_run_asked_to_start_while_no_daemon_ran_is_started_by_the_first_cycle(home, tmp_path):
    done = _home_with_ended_runs(home, tmp_path)
    _served_once(home)
    runs.request(home, done[3], "start")  # control.json replaced: the index no longer vouches for the run

    daemon = Daemon(home)
    daemon.cycle(full=True)
    assert done[3] in daemon._index.runs
    assert runs.read_meta(home, done[3]).phase != "ended"


def test_the_first_cycle_reads_the_ended_runs_that_the_runs_going_depend_on(home, tmp_path):
    """A child of an ended parent is stopped because its parent ended, and a run waiting for an ended
    upstream is not failed as if the upstream were gone: the deferred runs they name are read at once."""
    done = _home_with_ended_runs(home, tmp_path)
    child = _run(home, tmp_path, "child", paused=True)
    _write_meta(home, child, lambda meta: (setattr(meta, "parent_run_id", done[5]), setattr(meta, "parent_attempt", 1)))
    downstream = _run(home, tmp_path, "downstream", paused=True, after={done[7]: done[7]})
    assert runs.read_meta(home, downstream).spec.after[0]["run_id"] == done[7]
    _served_once(home)  # it stops the child already; start over from a fresh child
    child = _run(home, tmp_path, "child-2", paused=True)
    _write_meta(home, child, lambda meta: (setattr(meta, "parent_run_id", done[5]), setattr(meta, "parent_attempt", 1)))

    daemon = Daemon(home)
    daemon.cycle(full=True)
    assert daemon._index.deferral.pending  # the others are still deferred
    stopped = runs.read_meta(home, child)
    assert stopped.phase == "ended" and f"its parent run {done[5]} ended" in stopped.end.reason, stopped.end
    assert runs.read_meta(home, downstream).phase != "ended"  # paused, waiting: not failed_dependency


def test_an_unreadable_index_only_means_every_run_is_read(home, tmp_path):
    done = _home_with_ended_runs(home, tmp_path)
    _served_once(home)
    home.settled_index.write_text("{not json")
    daemon = Daemon(home)
    daemon.cycle(full=True)
    assert set(daemon._index.runs) == set(done)
    assert not daemon._index.deferral.pending


def test_a_stopping_daemon_leaves_an_index_of_exactly_its_settled_runs(home, tmp_path):
    done = _home_with_ended_runs(home, tmp_path)
    waiting = _run(home, tmp_path, "waiting", paused=True)
    _served_once(home)
    listed = json.loads(home.settled_index.read_bytes())["runs"]
    assert set(listed) == set(done) and waiting not in listed
