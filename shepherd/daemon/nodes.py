"""The daemon's side of nodes: striking a suspect node, which nodes to exclude, and nodes.json.

The blacklist itself (entries, strikes, expiry, the top-K rule) is
`fray.state.blacklist`; this module applies the daemon's configuration to it
and records each strike in the run's badnode_events.log. nodes.json is the
inventory `fray nodes` and the TUI read, so that neither ever calls a backend.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from fray.backends.base import Backend
from fray.core import policy
from fray.errors import BackendError, CorruptFileError
from fray.state import blacklist, store
from fray.state.layout import Home, RunPaths

log = logging.getLogger("fray.daemon")


class NodeKeeper:
    def __init__(self, home: Home, reader: store.CachedReader, config: Mapping[str, Any],
                 clock: Callable[[], float]) -> None:
        self.home = home
        self._reader = reader
        self._settings: Mapping[str, Any] = config.get("blacklist", {})
        self._clock = clock
        self._inventory_at = float("-inf")

    def excluded(self) -> tuple[str, ...]:
        """The top-K blacklisted nodes that resubmissions exclude now."""
        try:
            raw = self._reader.read(self.home.blacklist, "blacklist")
        except CorruptFileError as exc:
            log.error("%s", exc)
            raw = None
        top_k = int(self._settings.get("top_k", blacklist.DEFAULT_TOP_K))
        return blacklist.Blacklist.from_dict(raw).exclude(self._clock(), top_k)

    def all_banned(self, name: str, backend: Backend) -> str | None:
        """Why no run may start on `backend` when a person banned every node it has; else None.

        The daemon's own strikes never close a backend: where a node is the only
        one (local), retrying there is the only way to make progress.
        """
        try:
            raw = self._reader.read(self.home.blacklist, "blacklist")
        except CorruptFileError:
            return None
        now = self._clock()
        banned = {node: entry for node, entry in blacklist.Blacklist.from_dict(raw).nodes.items()
                  if entry.active(now) and entry.by_person}
        try:
            nodes = [node.name for node in backend.nodes()]
        except (BackendError, OSError):
            return None
        if not nodes or any(node not in banned for node in nodes):
            return None
        first = banned[nodes[0]]
        until = "" if first.expires_at is None else f" until {time.strftime('%H:%M:%S', time.localtime(first.expires_at))}"
        return (f"every node of the {name} backend is banned: {nodes[0]}{until} ({first.reason}); "
                f"`fray nodes unban {nodes[0]}` lets runs start")

    def suspect(self, paths: RunPaths, action: policy.SuspectNode, attempt: int | None,
                now: float) -> tuple[blacklist.Entry, float]:
        """Strike the node in the blacklist and the run's badnode_events.log; the entry and its TTL."""
        ttl = float(self._settings.get("ttl_sec", blacklist.DEFAULT_TTL_SEC))
        entry = blacklist.update(self.home, lambda b: b.strike(action.node, action.reason, now, ttl, paths.run_id), now)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
        line = f"{stamp} node={action.node} attempt={attempt} strikes={entry.strikes} reason={action.reason}\n"
        fd = os.open(paths.badnode_events, os.O_WRONLY | os.O_CREAT | os.O_APPEND, store.FILE_MODE)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
        return entry, ttl

    def write_inventory_every(self, every_sec: float, backends: Mapping[str, Backend]) -> None:
        """nodes.json: what each backend in use offers, at most once every `every_sec`."""
        if time.monotonic() - self._inventory_at <= every_sec:
            return
        inventory: dict[str, Any] = {"generated_at": self._clock(), "backends": {}}
        for name, backend in backends.items():
            try:
                inventory["backends"][name] = [
                    {"name": n.name, "state": n.state, "cpus": n.cpus, "mem_mb": n.mem_mb, "gpus": n.gpus,
                     "gpu_type": n.gpu_type, "partitions": list(n.partitions)} for n in backend.nodes()]
            except (BackendError, OSError) as exc:
                log.warning("listing the nodes of %s failed: %s", name, exc)
        store.write_json(self.home.nodes, inventory, "nodes")
        self._inventory_at = time.monotonic()
