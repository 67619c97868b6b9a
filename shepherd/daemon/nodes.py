"""The daemon's side of nodes: striking a suspect node, which nodes to exclude, and nodes.json.

The blacklist itself (entries, strikes, expiry, the top-K rule) is
`fray.state.blacklist`; this module applies the daemon's configuration to it
and records each strike in the run's badnode_events.log. nodes.json is the
inventory `fray nodes` and the TUI read, so that neither ever calls a backend.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from fray.backends.protocol import Backend, Node
from fray.core import policy
from fray.errors import BackendError, CorruptFileError
from fray.state import blacklist, store, this_host
from fray.state.layout import Home, RunPaths
from fray.state.row_cache import StatKey, stat_key

log = logging.getLogger("fray.daemon")


class NodeKeeper:
    def __init__(self, home: Home, reader: store.CachedReader, config: Mapping[str, Any],
                 clock: Callable[[], float]) -> None:
        self.home = home
        self._reader = reader
        self._settings: Mapping[str, Any] = config.get("blacklist", {})
        self._clock = clock
        self._written: StatKey | None = None  # nodes.json as this daemon last wrote it
        self._listed_at: dict[str, float] = {}  # backend -> when its nodes were last listed (monotonic)
        self._listed: dict[str, list[dict[str, Any]]] = {}  # backend -> its nodes as last listed

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
            # A TPU host belongs to one attempt's slice; the next attempt makes a new one: banning closes nothing.
            nodes = [node.name for node in backend.nodes() if node.tpu is None]
        except (BackendError, OSError):
            return None
        if not nodes or any(node not in banned for node in nodes):
            return None
        first = banned[nodes[0]]
        until = "" if first.expires_at is None else f" until {time.strftime('%H:%M:%S', time.localtime(first.expires_at))}"
        return (f"every node of the {name} backend is banned: {nodes[0]}{until} ({first.reason}); "
                f"`fray nodes unban {nodes[0]}` lets runs start")

    def suspect(self, paths: RunPaths, action: policy.SuspectNode, attempt: int | None,
                now: float) -> tuple[blacklist.Entry | None, float, str]:
        """Strike the node in the blacklist and the run's badnode_events.log: the entry and its TTL; (None, 0,
        why) when the run has already banned its share of a partition the node is in, which stays in service."""
        ttl = float(self._settings.get("ttl_sec", blacklist.DEFAULT_TTL_SEC))
        share = float(self._settings.get("max_share_per_run", blacklist.DEFAULT_MAX_SHARE_PER_RUN))
        partitions = self._partitions_of(action.node)

        def strike(current: blacklist.Blacklist) -> tuple[blacklist.Entry | None, str]:
            old = current.nodes.get(action.node)
            if old is None or not old.active(now) or old.only_by(paths.run_id):
                for name, members in partitions.items():
                    allowed = max(1, int(share * len(members)))
                    if current.share_of(paths.run_id, [m for m in members if m != action.node], now) + 1 > allowed:
                        return None, (f"not banned: this run has banned {allowed} of partition {name}'s "
                                      f"{len(members)} nodes already, the most one run may (blacklist.max_share_per_run "
                                      f"{share:g}); the rest stay in service for every run")
            return current.strike(action.node, action.reason, now, ttl, paths.run_id, cause=action.cause,
                                  probe=action.probe), ""

        entry, refused = blacklist.update(self.home, strike, now)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
        strikes = entry.strikes if entry is not None else 0
        line = (f"{stamp} node={action.node} attempt={attempt} strikes={strikes} reason={action.reason}"
                + (f" ({refused})" if refused else "") + "\n")
        fd = os.open(paths.badnode_events, os.O_WRONLY | os.O_CREAT | os.O_APPEND, store.FILE_MODE)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
        return entry, ttl, refused

    def clear(self, paths: RunPaths, action: policy.ClearSuspicion, now: float) -> list[str]:
        """Lift the bans this run alone laid for the probe that fails for it everywhere: the nodes unbanned."""
        lifted: list[str] = blacklist.update(self.home, lambda b: b.clear_run(paths.run_id, action.probe), now)
        return lifted

    def _partitions_of(self, node: str) -> dict[str, list[str]]:
        """The partitions `node` is in, each with its nodes, as the backends last listed them (nodes.json)."""
        found: dict[str, list[str]] = {}
        for rows in self._listed.values():
            for row in rows:
                for partition in row.get("partitions") or []:
                    found.setdefault(partition, []).append(row["name"])
        return {name: members for name, members in found.items() if node in members}

    def write_inventory_every(self, every_sec: float, backends: Mapping[str, Backend],
                              clock_offsets: Mapping[str, float] | None = None) -> None:
        """nodes.json: what each backend in use offers, listed at most once every `every_sec`, and each node's clock
        against the daemon's as last measured (fray.daemon.sightings).

        A backend whose listing costs nothing (the TPU backend's hosts come from its
        last snapshot) says so with a shorter `nodes_every_sec` of its own.
        """
        now = time.monotonic()
        due = [name for name, backend in backends.items()
               if now - self._listed_at.get(name, float("-inf")) > (backend.nodes_every_sec or every_sec)]
        if not due and not self._damaged():
            return
        for name in due:
            self._listed_at[name] = now
            try:
                self._listed[name] = [_node_row(n) for n in backends[name].nodes()]
            except (BackendError, OSError) as exc:
                log.warning("listing the nodes of %s failed: %s", name, exc)
                self._listed.pop(name, None)
        inventory: dict[str, Any] = {"generated_at": self._clock(),
                                     "backends": {name: self._listed[name] for name in backends if name in self._listed}}
        if clock_offsets:
            inventory["clock_offsets"] = {node: {"offset_sec": offset, "measured_by": this_host.hostname()}
                                          for node, offset in clock_offsets.items()}
        store.write_json(self.home.nodes, inventory, "nodes")
        self._written = stat_key(self.home.nodes)

    def _damaged(self) -> bool:
        """Whether nodes.json is not what this daemon last wrote (corrupted, replaced, removed): then it is
        rewritten from the last listing at once, a corrupt one moved aside first (by the read)."""
        if self._written is None or stat_key(self.home.nodes) == self._written:
            return False
        try:
            store.read_json(self.home.nodes, "nodes")
        except CorruptFileError as exc:
            log.error("%s; writing it again", exc)
        return True


def _node_row(node: Node) -> dict[str, Any]:
    row = {"name": node.name, "state": node.state, "cpus": node.cpus, "mem_mb": node.mem_mb, "gpus": node.gpus,
           "gpu_type": node.gpu_type, "partitions": list(node.partitions)}
    if node.tpu is not None:
        row["tpu"] = dataclasses.asdict(node.tpu)
    return row
