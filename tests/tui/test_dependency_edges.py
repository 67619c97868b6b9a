"""How a run's --after edges read in `fray list`'s words (fray.ops.human) and the dashboard's name cell."""

from __future__ import annotations

from fray.ops import human
from fray.tui.widgets.columns import cells_of


def test_the_dashboard_and_the_tree_name_each_edge():
    after = [{"run_id": "r-a", "name": "train", "on": "ok"}, {"group": "sw-abc", "name": "sw", "on": "any"}]
    assert human.edges(after) == "⇠ train, sw:any"
    assert human.edges(None) == ""
    row = {"icon": "○", "name": "eval", "status": "pending", "reason": "waiting for train", "after": after}
    assert cells_of(row)["name"] == "eval ⇠ train, sw:any"
    assert cells_of({**row, "after": None})["name"] == "eval"
