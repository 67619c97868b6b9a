"""The node table (the daemon's inventory merged with the blacklist) and banning or unbanning a node.

`fray nodes list|ban|unban` and the dashboard's nodes screen read and write
through here. The inventory is nodes.json, which the daemon writes: no front
end asks a backend. Bans are changed under the blacklist's lock and audited;
the daemon's next submission excludes what is banned.
"""

from __future__ import annotations

import time
from typing import Any

from fray.core.values import parse_duration
from fray.errors import CorruptFileError, UsageError
from fray.daemon import lease
from fray.state import blacklist, store
from fray.state.layout import Home

DEFAULT_TTL = "1d"
NEVER = ("never", "none", "forever")


def parse_ttl(text: str) -> float | None:
    """How long a ban lasts, in seconds (like `6h`, `3d`); None for 'never'; empty is DEFAULT_TTL."""
    text = text or DEFAULT_TTL
    if text.strip().lower() in NEVER:
        return None
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise UsageError(f"--ttl {text}: {exc}; or 'never'") from None


def nodes_view(home: Home) -> dict[str, Any]:
    """Every known node with its resources and its active ban (schemas/cli-nodes.json)."""
    now = time.time()
    problem = None
    try:
        inventory = store.read_json(home.nodes, "nodes") or {"generated_at": None, "backends": {}}
    except CorruptFileError as exc:
        inventory = {"generated_at": None, "backends": {}}
        problem = f"{exc}; the daemon writes it again on its next cycle"
    banned = blacklist.load(home)
    offsets = {name: entry["offset_sec"] for name, entry in inventory.get("clock_offsets", {}).items()}
    rows: list[dict[str, Any]] = []
    for backend, listed in sorted(inventory["backends"].items()):
        for node in listed:
            rows.append({**node, "backend": backend, "blacklist": _ban_of(banned, node["name"], now),
                         "clock_offset_sec": offsets.get(node["name"])})
    known = {row["name"] for row in rows}
    for name in sorted(set(banned.nodes) - known):
        rows.append({"name": name, "backend": None, "state": "unknown", "cpus": None, "mem_mb": None, "gpus": None,
                     "gpu_type": None, "partitions": [], "blacklist": _ban_of(banned, name, now),
                     "clock_offset_sec": offsets.get(name)})
    return {"generated_at": now, "inventory_at": inventory["generated_at"], "daemon": lease.view(home),
            "nodes": rows, "inventory_problem": problem}


def _ban_of(banned: blacklist.Blacklist, name: str, now: float) -> dict[str, Any] | None:
    entry = banned.nodes.get(name)
    return vars(entry) if entry is not None and entry.active(now) else None


def node_name(text: str) -> str:
    """A node name as typed; an error when there is none."""
    node = text.strip()
    if not node:
        raise UsageError("name the node to ban")
    return node


def ban(home: Home, node: str, ttl_sec: float | None, reason: str) -> blacklist.Entry:
    """Keep runs off `node` until the ban expires (`ttl_sec` None: until unbanned)."""
    node = node_name(node)
    store.ensure_home(home)
    return blacklist.ban(home, node, reason.strip() or "banned by hand", ttl_sec)


def unban(home: Home, node: str) -> None:
    """Let runs use `node` again (an error naming the banned nodes when it is not one)."""
    blacklist.unban(home, node)
