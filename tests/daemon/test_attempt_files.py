"""The daemon's reading of an attempt's files: final.json and failure.json count only once exit.json is there."""

from __future__ import annotations

import json
from pathlib import Path

from fray.daemon.attempt_files import read_attempt_files
from fray.state import store
from fray.state.layout import Home

RUN = "20261202-000000-train-abcd"


def attempt_folder(tmp_path: Path) -> tuple[Home, Path]:
    home = Home(tmp_path / "home")
    store.ensure_home(home)
    folder = home.run(RUN).attempt(1).dir
    folder.mkdir(parents=True)
    return home, folder


def read(home: Home, events: list[str]):
    return read_attempt_files(store.CachedReader(), home.run(RUN), 1, gone=False,
                              event=lambda _paths, _kind, message, _number: events.append(message))


def test_a_final_json_before_exit_json_is_not_read_so_a_half_written_one_is_never_judged(tmp_path: Path) -> None:
    home, folder = attempt_folder(tmp_path)
    (folder / "final.json").write_bytes(b"")
    events: list[str] = []
    files = read(home, events)
    assert files.final is None and files.exit is None and not events
    assert (folder / "final.json").read_bytes() == b"" and not list(folder.glob("final.json.corrupt-*"))


def test_once_exit_json_is_there_a_corrupt_final_json_is_moved_aside_and_said_in_the_events(tmp_path: Path) -> None:
    home, folder = attempt_folder(tmp_path)
    (folder / "exit.json").write_text(json.dumps({"run_id": RUN, "attempt": 1, "exit_code": 0, "host": "n1",
                                                  "started_at": 1.0, "ended_at": 2.0}))
    (folder / "final.json").write_bytes(b"{not json")
    events: list[str] = []
    files = read(home, events)
    assert files.exit is not None and files.exit["exit_code"] == 0
    assert files.final is None
    moved = list(folder.glob("final.json.corrupt-*"))
    assert len(moved) == 1 and moved[0].read_bytes() == b"{not json"
    assert len(events) == 1 and "final.json" in events[0]
