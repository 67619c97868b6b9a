"""gcloud's TPU JSON -> slice records, and the documented node states -> what fray makes of them.

Pure: input is the text `gcloud compute tpus tpu-vm list --format=json` and
`gcloud compute tpus queued-resources list --format=json` print (the TPU API's
Node and QueuedResource resources, REST v2), output is records and a reading.
A slice missing from a list is gone; the caller decides that, not this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# Node.state (TPU API v2): what each means for a fray attempt.
PENDING_STATES = frozenset({"CREATING", "STARTING", "RESTARTING", "REIMAGING", "REPAIRING", "UNHIDING"})
READY_STATES = frozenset({"READY"})
# The slice is lost for this attempt: the run comes back on a fresh slice.
# UNKNOWN: "unknown state after a failed repair" - it does not come back by itself.
LOST_STATES = frozenset({"PREEMPTED", "TERMINATED", "STOPPED", "STOPPING", "DELETING", "HIDING", "HIDDEN",
                         "UNKNOWN"})
NODE_STATES = PENDING_STATES | READY_STATES | LOST_STATES

# QueuedResource state.state.
QUEUED_WAITING = frozenset({"CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING"})
QUEUED_ACTIVE = frozenset({"ACTIVE"})
QUEUED_LOST = frozenset({"FAILED", "SUSPENDING", "SUSPENDED", "DELETING"})

# Text of a create that failed for lack of quota or capacity: back off, try the next zone.
CAPACITY_MARKERS = ("resource_exhausted", "quota", "insufficient", "stockout", "no more capacity")
# gcloud's codes for a create refused for what it asks (a bad type, version or zone, no permission to it):
# the same request is refused again, so the run ends failed_config instead of retrying.
CONFIG_MARKERS = ("invalid_argument", "not_found", "permission_denied", "failed_precondition",
                  "unrecognized arguments", "argument --")


@dataclass(frozen=True)
class Slice:
    name: str  # the short node id (last part of projects/P/locations/Z/nodes/N)
    zone: str
    accelerator_type: str
    state: str
    health: str | None
    ips: tuple[str, ...]
    labels: dict[str, str] = field(default_factory=dict)
    spot: bool = False
    queued_resource: str | None = None  # the short name of the queued resource that made it, if one did

    @property
    def run_id(self) -> str | None:
        return self.labels.get("fray-run")

    @property
    def attempt(self) -> int | None:
        value = self.labels.get("fray-attempt", "")
        return int(value) if value.isdigit() else None


@dataclass(frozen=True)
class QueuedResource:
    name: str
    zone: str
    state: str
    node_ids: tuple[str, ...]


@dataclass(frozen=True)
class Reading:
    """fray's view of one slice: pending / ready / lost, with why."""

    phase: str  # "pending" | "ready" | "lost"
    detail: str


def _short(path: str) -> tuple[str, str]:
    """`projects/P/locations/Z/nodes/N` -> (N, Z); a bare name -> (name, "")."""
    parts = path.split("/")
    zone = parts[parts.index("locations") + 1] if "locations" in parts[:-1] else ""
    return parts[-1], zone


def parse_nodes(text: str) -> list[Slice]:
    """The slices in one `tpu-vm list --format=json`; ValueError when it is not that JSON."""
    data = json.loads(text or "[]")
    if not isinstance(data, list):
        raise ValueError("tpu-vm list: expected a JSON list")
    return [_node(item) for item in data if isinstance(item, dict) and item.get("name")]


def _node(item: dict[str, Any]) -> Slice:
    name, zone = _short(str(item["name"]))
    endpoints = item.get("networkEndpoints") or []
    scheduling = item.get("schedulingConfig") or {}
    return Slice(
        name=name, zone=zone,
        accelerator_type=str(item.get("acceleratorType", "")).split("/")[-1],
        state=str(item.get("state", "STATE_UNSPECIFIED")),
        health=item.get("health"),
        ips=tuple(str(e.get("ipAddress")) for e in endpoints if isinstance(e, dict) and e.get("ipAddress")),
        labels={str(k): str(v) for k, v in (item.get("labels") or {}).items()},
        spot=bool(scheduling.get("spot") or scheduling.get("preemptible")),
        queued_resource=_short(str(item["queuedResource"]))[0] if item.get("queuedResource") else None,
    )


def parse_queued(text: str) -> list[QueuedResource]:
    """The queued resources in one `queued-resources list --format=json`."""
    data = json.loads(text or "[]")
    if not isinstance(data, list):
        raise ValueError("queued-resources list: expected a JSON list")
    out = []
    for item in data:
        if not isinstance(item, dict) or not item.get("name"):
            continue
        name, zone = _short(str(item["name"]))
        state = (item.get("state") or {}).get("state", "STATE_UNSPECIFIED")
        specs = ((item.get("tpu") or {}).get("nodeSpec")) or []
        node_ids = tuple(str(s.get("nodeId")) for s in specs if isinstance(s, dict) and s.get("nodeId"))
        out.append(QueuedResource(name, zone, str(state), node_ids))
    return out


def read_slice(node: Slice) -> Reading:
    """What one node's state and health mean for the attempt on it."""
    if node.state in LOST_STATES:
        return Reading("lost", f"slice {node.state}")
    if node.state in READY_STATES:
        if node.health not in (None, "", "HEALTHY", "HEALTH_UNSPECIFIED"):
            # TIMEOUT / UNHEALTHY_*: the hosts cannot be trusted with a run.
            return Reading("lost", f"slice READY but {node.health}")
        return Reading("ready", "READY")
    return Reading("pending", node.state)


def read_queued(resource: QueuedResource) -> Reading:
    if resource.state in QUEUED_LOST:
        return Reading("lost", f"queued resource {resource.state}")
    if resource.state in QUEUED_ACTIVE:
        return Reading("ready", "ACTIVE")
    return Reading("pending", resource.state)


def is_capacity_error(stderr: str) -> bool:
    """A create refused for quota or capacity (move to the next zone), not a usage error."""
    low = stderr.lower()
    return any(marker in low for marker in CAPACITY_MARKERS)


def is_config_error(stderr: str) -> bool:
    """A create refused for what it asks, not for capacity: retrying the same request cannot help."""
    low = stderr.lower()
    return not is_capacity_error(stderr) and any(marker in low for marker in CONFIG_MARKERS)
