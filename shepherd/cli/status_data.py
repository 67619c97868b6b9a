"""What `fray status RUN` shows: the one dict its JSON and its text are both made from (schemas/cli-status.json).

Apart from fray.cli.status_cmd (click and the text rendering), so that
`fray status RUN --json` is answered without loading click (fray.cli.entry), as
`fray list --json` is. RUN is a run id, a unique id prefix, or a name; a run
whose meta.json cannot be read is an error (exit 2, with the reason): there is
nothing to show but the reason, and `fray list` already shows that.
"""

from __future__ import annotations

from typing import Any

from fray.cli.arguments import fray_prefix
from fray.core import recovery
from fray.errors import CorruptFileError
from fray.ops import lookup, views
from fray.state.layout import Home


def status_data(home: Home, run: str) -> dict[str, Any]:
    run_id = lookup.resolve(home, run)
    data = views.status_view(home, run_id)
    if data["spec"] is None:
        # Neither meta.json nor its last good copy: the state is damaged, not the command line.
        raise CorruptFileError(home.run(run_id).meta, f"run {run_id} cannot be shown: {data['run']['reason']}", None)
    prefix = fray_prefix(home)
    data["next"] = [f"{prefix} logs {run_id}"]
    row = data["run"]
    attempts = data.get("attempts") or []
    started = any(a.get("started_at") is not None for a in attempts)
    data["next_steps"] = recovery.next_steps(row["status"], row["reason"], run_id, data["spec"],
                                             data["daemon"]["state"], prefix, started=started, end=data["end"],
                                             last_cause=attempts[-1].get("cause") if attempts else None)
    data["family"] = views.family_view(home, lookup.read_meta(home, run_id))
    return data
