"""A new sweep's record becomes runs (fray.daemon.sweeps): seen at once, submitted once, whatever crashes.

`fray submit --sweep` writes one record; readers show its points from it until
the daemon has written their runs. On Slurm the daemon submits the points'
first attempts as one job array before it writes their runs; a daemon killed
right after that sbatch, or right before it, leaves a launch record the next
daemon goes on from: it adopts the array it finds, and submits again only an
array that never reached Slurm. An array's folder goes once none of its
tasks is in flight.
"""

from __future__ import annotations

import json
import time

import pytest

from conftest import run_fray, schema_validate, wait_until
from fray.backends.slurm import arrays
from fray.backends.slurm.backend import SlurmBackend
from fray.core import policy
from fray.daemon.loop import Daemon
from fray.ops import sweeps as sweeping
from fray.state import store
from fray.state.layout import Home
from tests.backends.slurm.test_sweep_slurm import FAST, POINT, Recording, metas, slurm_home  # noqa: F401 - slurm_home is a fixture

HELD = """#!/bin/bash
#FRAY --backend slurm
#SBATCH --hold
#SBATCH --time=5
echo "point $FRAY_SWEEP_INDEX"
"""


def test_a_new_sweeps_points_are_listed_at_once_and_status_waits_for_the_daemon_to_write_them(home, tmp_path):
    script = tmp_path / "seeds.sh"
    script.write_text("#!/bin/bash\ntrue\n")
    created = sweeping.submit_sweep(home, script, ["seed=0..2"], name="seeds")
    assert not any(home.run(m.run_id).dir.exists() for m in created)  # one record so far, no run folders
    listed = json.loads(run_fray("list", "--group", "seeds", "--json", home=home.root, check=True).stdout)
    schema_validate("cli-list", listed)
    assert [(r["run_id"], r["status"]) for r in listed["runs"]] == [(m.run_id, "pending") for m in created]
    # No daemon to write the point's run: said at once, with what to do.
    alone = run_fray("status", created[2].run_id, "--json", home=home.root)
    error = json.loads(alone.stdout)["error"]
    assert alone.returncode == 2 and "the daemon has not written yet" in error["message"]
    assert "fray daemon start" in error["message"]
    run_fray("daemon", "start", home=home.root, check=True)
    try:
        shown = run_fray("status", created[2].run_id, "--json", home=home.root, check=True)  # waits for it
        data = json.loads(shown.stdout)
        schema_validate("cli-status", data)
        assert data["run"]["run_id"] == created[2].run_id and data["run"]["name"] == "seeds-2"
        wait_until(lambda: not home.group(created[0].sweep["id"]).dir.exists(), what="the record to go once written")
    finally:
        run_fray("daemon", "stop", home=home.root)


class DiesAt(Recording):
    """The real commands, until the daemon 'dies' (SystemExit) just before or just after its first sbatch."""

    def __init__(self, after: bool) -> None:
        super().__init__()
        self.after = after

    def __call__(self, argv, timeout):
        if argv[0] != "sbatch":
            return super().__call__(argv, timeout)
        if self.after:
            super().__call__(argv, timeout)
        raise SystemExit("killed")


def launch_record(home: Home, group_id: str) -> dict:
    return store.read_json(home.group(group_id).launch, "launch")


@pytest.mark.slow
def test_a_daemon_killed_right_after_sbatch_leaves_an_array_the_next_one_adopts_without_submitting_again(
        slurm_home, tmp_path):
    home = slurm_home
    script = tmp_path / "held.sh"
    script.write_text(HELD)
    created = sweeping.submit_sweep(home, script, ["i=0..4"], name="held", max_parallel=2)
    group_id = created[0].sweep["id"]
    dying = DiesAt(after=True)
    with pytest.raises(SystemExit):
        Daemon(home, backends={"slurm": SlurmBackend(home, config=FAST, runner=dying)}).cycle()
    assert len(dying.argvs("sbatch")) == 1
    assert launch_record(home, group_id)["state"] == "submitting"  # sbatch ran; nothing recorded its answer
    assert not any(home.run(m.run_id).dir.exists() for m in created)

    runner = Recording()
    Daemon(home, backends={"slurm": SlurmBackend(home, config=FAST, runner=runner)}).cycle()
    assert runner.argvs("sbatch") == []  # found in the queue by its name: adopted, not submitted again
    written = metas(home, [m.run_id for m in created])
    array_ids = {m["attempts"][0]["backend_ref"]["array_job_id"] for m in written}
    assert len(array_ids) == 1 and [m["attempts"][0]["backend_ref"]["array_index"] for m in written] == [0, 1, 2, 3, 4]
    assert {m["attempts"][0]["state"] for m in written} == {"submitted"}
    assert not home.group(group_id).dir.exists()


@pytest.mark.slow
def test_a_daemon_killed_right_before_sbatch_leaves_a_launch_the_next_one_submits_once_it_cannot_be_found(
        slurm_home, tmp_path):
    home = slurm_home
    script = tmp_path / "held.sh"
    script.write_text(HELD)
    created = sweeping.submit_sweep(home, script, ["i=0..2"], name="held")
    group_id = created[0].sweep["id"]
    with pytest.raises(SystemExit):
        Daemon(home, backends={"slurm": SlurmBackend(home, config=FAST, runner=DiesAt(after=False))}).cycle()
    assert launch_record(home, group_id)["state"] == "submitting"

    runner = Recording()
    soon = Daemon(home, backends={"slurm": SlurmBackend(home, config=FAST, runner=runner)})
    soon.cycle()
    assert runner.argvs("sbatch") == [] and launch_record(home, group_id)["state"] == "submitting"  # still looking

    later = Daemon(home, backends={"slurm": SlurmBackend(home, config=FAST, runner=runner)},
                   clock=lambda: time.time() + policy.SUBMIT_RESOLVE_SEC + 1)
    wait_until(lambda: (later.cycle(), all(home.run(m.run_id).meta.exists() for m in created))[1],
               what="the sweep launched again and its runs written")
    (sbatch,) = runner.argvs("sbatch")
    assert any(arg.startswith("--array=0-2") for arg in sbatch)
    assert {m["attempts"][0]["state"] for m in metas(home, [m.run_id for m in created])} == {"submitted"}


@pytest.mark.slow
def test_an_arrays_folder_goes_once_every_task_of_it_has_ended_and_not_while_one_is_in_flight(slurm_home, tmp_path):
    home = slurm_home
    quick, held = tmp_path / "quick.sh", tmp_path / "held.sh"
    quick.write_text(POINT)
    held.write_text(HELD)
    done = [m.run_id for m in sweeping.submit_sweep(home, quick, ["i=0..2"], name="quick")]
    waiting = [m.run_id for m in sweeping.submit_sweep(home, held, ["i=0..2"], name="held")]
    runner = Recording()
    daemon = Daemon(home, backends={"slurm": SlurmBackend(home, config=FAST, runner=runner)})
    wait_until(lambda: (daemon.cycle(), all(m["phase"] == "ended" for m in metas(home, done)))[1], timeout=90,
               what="the quick sweep to end")
    names = {metas(home, ids)[0]["attempts"][0]["backend_ref"]["job_name"] for ids in (done, waiting)}
    assert set(home.array_names()) == names  # kept for KEEP_SEC after they last changed, ended or not
    later = Daemon(home, backends={"slurm": SlurmBackend(home, config=FAST, runner=runner)},
                   clock=lambda: time.time() + arrays.KEEP_SEC + 1)
    later.cycle()
    (left,) = home.array_names()
    assert left == metas(home, waiting)[0]["attempts"][0]["backend_ref"]["job_name"]  # its tasks are pending
    assert {m["attempts"][0]["state"] for m in metas(home, waiting)} == {"submitted"}
