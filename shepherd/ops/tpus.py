"""The TPU accelerator types and zones configured for the tpu backend, with hosts and chips per slice.

Configuration (config.json `tpu.accelerator_types`, `tpu.zones`), not cloud
state: nothing here calls gcloud. Shapes come from fray.core.tpu_topology,
the table the backend launches by.
"""

from __future__ import annotations

from typing import Any

from fray.core.tpu_topology import GENERATIONS, shape
from fray.state.config import load_config
from fray.state.layout import Home


def tpus_view(home: Home) -> dict[str, Any]:
    """schemas/cli-tpus.json: each configured type with chips, hosts and chips per host; the zones."""
    settings = load_config(home).get("tpu", {})
    types = []
    for name in settings.get("accelerator_types", []):
        try:
            found = shape(name)
        except ValueError as exc:
            types.append({"accelerator_type": name, "chips": None, "hosts": None, "chips_per_host": None,
                          "problem": str(exc)})
            continue
        types.append({"accelerator_type": name, "chips": found.chips, "hosts": found.hosts,
                      "chips_per_host": found.chips_per_host, "problem": None})
    return {"zones": list(settings.get("zones", [])), "accelerator_types": types,
            "generations": [g.prefix for g in GENERATIONS]}
