"""The queue read model orders waiting runs by priority band, then age, and shows each run's band."""

from __future__ import annotations

from pathlib import Path

from fray.ops.queue import queue_view
from fray.state import runs, store
from fray.state.layout import Home


def test_the_queue_lists_production_first_then_interactive_then_batch(home: Home, tmp_path: Path) -> None:
    store.ensure_home(home)
    script = tmp_path / "job.py"
    script.write_text("print(1)\n")
    for at, band in enumerate(["batch", "interactive", "production", "batch"]):
        runs.create_run(home, runs.SubmitOptions(script=script, overrides={"priority": band}, name=f"{band}-{at}"),
                        now=1000.0 + at)
    queue = queue_view(home)["queue"]
    assert [item["name"] for item in queue] == ["production-2", "interactive-1", "batch-0", "batch-3"]
    assert [item["priority"] for item in queue] == ["production", "interactive", "batch", "batch"]
