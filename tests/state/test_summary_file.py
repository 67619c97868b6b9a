"""The list summary's file (fray.state.list_summary): rows back as written, and what makes a reader read runs live.

The daemon's side and `fray list` against a real daemon are tests/daemon/test_list_summary.py.
"""

from __future__ import annotations

import orjson

from conftest import schema_validate
from fray.state import list_summary, run_changes, store


def _row(run_id: str, index: int | None, status: str = "pending") -> dict:
    group = None if index is None else {"id": "sw-1", "kind": "sweep", "name": "sw", "index": index, "size": 3}
    return {"run_id": run_id, "name": f"n-{run_id}", "status": status, "icon": "○", "reason": "waiting",
            "phase": "queued", "created_at": 12.5, "paused": False, "group": group}


def _written(home, rows: dict) -> list_summary.Summary:
    journal = run_changes.Journal(home)
    journal.start()
    document = list_summary.encode(rows, journal.position(), 0, 1, 100.0)
    schema_validate("list-summary", orjson.loads(document))
    store.make_dirs(home.cache_dir)
    list_summary.path(home).write_bytes(document)
    summary = list_summary.load(home)
    assert summary is not None
    return summary


def test_rows_come_back_as_written_and_members_alike_share_one_when_folded(home) -> None:
    rows = {"r1": _row("r1", 0), "r2": _row("r2", 1), "r3": _row("r3", None, "completed_success")}
    summary = _written(home, rows)
    assert summary.rows_of(["r3", "r2", "r1", "gone"], frozenset()) == [rows["r3"], rows["r2"], rows["r1"], None]
    folded = summary.rows_of(["r1", "r2", "r3"], frozenset(), shared=True)
    assert folded[0] is folded[1] and folded[0]["status"] == "pending" and folded[2] == rows["r3"]
    assert summary.rows_of(["r1", "r2"], frozenset({"r2"})) == [rows["r1"], None]  # changed since: read live
    summary.entries["r1"] = ["damaged"]
    assert summary.rows_of(["r1"], frozenset()) == [None]


def test_a_request_after_the_summary_names_its_run_and_an_unreadable_one_voids_it(home) -> None:
    summary = _written(home, {"r1": _row("r1", 0)})
    assert list_summary.changed_since(home, summary) == frozenset()
    store.append_jsonl(home.audit, {"at": 1.0, "user": "u", "host": "h", "action": "control.pause", "run_id": "r1",
                                    "details": {}, "prev_hash": "0" * 64, "entry_hash": "1" * 64}, "audit")
    assert list_summary.changed_since(home, summary) == frozenset({"r1"})
    with open(home.audit, "ab") as handle:
        handle.write(b"{cut off\n")
    assert list_summary.changed_since(home, summary) is None  # which run it asked for is unknown: read them all


def test_a_summary_of_another_journal_is_not_used(home) -> None:
    summary = _written(home, {"r1": _row("r1", 0)})
    run_changes.Journal(home).start()  # a new daemon's journal
    assert list_summary.changed_since(home, summary) is None
    list_summary.path(home).write_bytes(b"{not json")
    assert list_summary.load(home) is None
