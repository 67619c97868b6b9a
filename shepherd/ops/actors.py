"""The actor endpoints jobs registered, by namespace and name, with the status of the run serving each.

Read-only, from the endpoint files (namespaces/<ns>/actors/<name>/<id>.json).
It imports no cloudpickle: listing is reading JSON.
"""

from __future__ import annotations

import time
from typing import Any

from fray.actors import endpoints
from fray.ops import views
from fray.state.layout import Home


def actors_view(home: Home, namespace: str | None = None) -> dict[str, Any]:
    """Every registered endpoint (of one namespace, or all) with its run's status (schemas/cli-actors.json)."""
    now = time.time()
    statuses: dict[str, str] = {}
    found = []
    for endpoint in endpoints.scan(home):
        if namespace and endpoint.namespace != namespace:
            continue
        run_status = None
        if endpoint.run_id:
            if endpoint.run_id not in statuses:
                statuses[endpoint.run_id] = views.run_row(home, endpoint.run_id, now)["status"] \
                    if home.run(endpoint.run_id).dir.exists() else "error_unknown"
            run_status = statuses[endpoint.run_id]
        found.append({**endpoint.to_dict(), "address": endpoint.address, "run_status": run_status})
    return {"home": str(home.root), "generated_at": now, "namespace": namespace, "endpoints": found}
