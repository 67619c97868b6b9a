"""The actor endpoints jobs registered, by namespace and name, with the status of the run serving each.

Read-only, from the endpoint files (namespaces/<ns>/actors/<name>/<id>.json).
It imports no cloudpickle: listing is reading JSON.
"""

from __future__ import annotations

import os
import time
from typing import Any

from fray.actors import listing
from fray.ops import views
from fray.state.layout import Home


def actors_view(home: Home, namespace: str | None = None) -> dict[str, Any]:
    """Every registered endpoint (of one namespace, or all) with its run's status (schemas/cli-actors.json)."""
    now = time.time()
    statuses: dict[str, str] = {}
    found = []
    for record in listing.records(home):
        if namespace and record["namespace"] != namespace:
            continue
        run_id, run_status = record["run_id"], None
        if run_id:
            if run_id not in statuses:
                statuses[run_id] = views.run_row(home, run_id, now)["status"] \
                    if os.path.isdir(home.run_folder(run_id)) else "error_unknown"
            run_status = statuses[run_id]
        found.append({**record, "address": f"{record['host']}:{record['port']}", "run_status": run_status})
    return {"home": str(home.root), "generated_at": now, "namespace": namespace, "endpoints": found}
