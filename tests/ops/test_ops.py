"""The operations layer (fray.ops): what `fray ...` and the dashboard both do, done once.

The CLI's and the dashboard's words come from the same functions here, so
these tests act through one front end and read the result through the other.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from conftest import run_fray, schema_validate
from fray.backends.external import CommandResult
from fray.errors import StateError, UsageError
from fray.ops import control, human, logs, nodes, partitions
from fray.state import blacklist, runs
from fray.tui import actions

SINFO = """\
n1|a100|up|idle|4|2000|gpu:a100:2
n1|cpu*|up|idle|4|2000|gpu:a100:2
n3|h100|up|idle|4|2000|gpu:h100:4
n3|cpu*|up|idle|4|2000|gpu:h100:4
"""


def _run(tmp_path: Path, home, name: str = "job") -> str:
    script = tmp_path / f"{name}.py"
    script.write_text("print('hi')\n")
    return runs.create_run(home, runs.SubmitOptions(script=script, overrides={})).run_id


def _sinfo(stdout: str, code: int = 0, stderr: str = ""):
    seen: list[tuple[str, ...]] = []

    def runner(argv, timeout):
        seen.append(tuple(argv))
        return CommandResult(tuple(argv), code, stdout, stderr, False, 0.01)

    return runner, seen


def test_partitions_come_from_one_sinfo_through_the_slurm_backend():
    runner, seen = _sinfo(SINFO)
    data = partitions.partitions_view(partitions.need_of("2", "60", None, None, None), runner)
    schema_validate("cli-partitions", data)
    assert [p["name"] for p in data["partitions"]] == ["a100", "cpu", "h100"]
    assert data["order"]["chain"] == ["h100", "cpu"]  # only the 80 GB H100s have at least 60 GB
    assert len(seen) == 1 and seen[0][0] == "sinfo"


def test_a_failed_sinfo_says_where_to_run_it():
    runner, _ = _sinfo("", code=1, stderr="slurm_load_partitions: Unable to contact slurm controller")
    with pytest.raises(StateError, match="cannot list the Slurm partitions: .*Unable to contact.*where `sinfo` works"):
        partitions.partitions_view(None, runner)


def test_fray_partitions_without_sinfo_is_an_error_that_names_it(home):
    proc = run_fray("partitions", env={"PATH": os.path.dirname(sys.executable) + os.pathsep + "/nonexistent"})
    assert proc.returncode == 2
    assert proc.stderr.startswith("fray: error: cannot list the Slurm partitions: sinfo")


def test_the_dashboard_says_what_fray_control_says(home, tmp_path):
    run_id = _run(tmp_path, home)
    outcome = actions.control(home, run_id, "pause")
    meta = runs.read_meta(home, run_id)
    assert meta.spec and runs.read_control(home, run_id).paused
    assert outcome.message == f"requested pause for {meta.name}: {control.effect('pause', meta)}"
    assert outcome.message.endswith("no attempt starts until `fray control unpause`")


def test_banning_a_run_node_is_one_action_for_both_front_ends(home, tmp_path):
    run_id = _run(tmp_path, home)
    with pytest.raises(UsageError, match="name the node to ban"):
        actions.ban_run_node(home, run_id, "  ", "1d", "")
    outcome = actions.ban_run_node(home, run_id, " gpu-7 ", "6h", "")
    entry = blacklist.load(home).nodes["gpu-7"]
    assert entry.reason == f"bad for run {run_id}" and entry.expires_at - entry.added_at == 6 * 3600
    assert outcome.message.endswith("gpu-7 is blacklisted; the local backend has only this machine, so runs stay here")
    assert nodes.nodes_view(home)["nodes"][0]["blacklist"]["source_run"] == run_id


def test_a_ban_lasts_the_default_when_no_ttl_is_typed_and_forever_when_never():
    assert nodes.parse_ttl("") == nodes.parse_ttl(nodes.DEFAULT_TTL) == 86400
    assert nodes.parse_ttl("Never") is None
    with pytest.raises(UsageError, match="--ttl soon: .*or 'never'"):
        nodes.parse_ttl("soon")


def test_a_tail_goes_on_exactly_after_the_lines_it_showed(tmp_path):
    path = tmp_path / "stdout.log"
    path.write_text("one\ntwo\nthree\n")
    lines, tail = logs.tail_now(path, 2)
    with open(path, "a") as handle:
        handle.write("four\nfi")
    assert lines == ["two", "three"]
    assert list(tail.read(final=False)) == ["four"]
    assert list(tail.read(final=True)) == ["fi"]
    missing, later = logs.tail_now(tmp_path / "none.log", 5)
    assert missing == [] and list(later.read(final=True)) == []


def test_both_front_ends_print_the_same_separator_between_attempts():
    assert human.separator(2, "gpu-7") == "── attempt 2 on gpu-7 ──"
    assert human.separator(1, None) == "── attempt 1 ──"
