"""The node blacklist: which nodes not to use, why, and until when.

`Blacklist` is the pure record (add a strike, remove, expire, choose the top-K
to exclude); `update` and `load` are the IO around blacklist.json, which every
daemon and CLI shares and so writes only under locks/blacklist.lock.

Resubmissions exclude at most the K worst nodes (struck by the most runs,
then most strikes, then most recent), so an exclude list never grows until
nothing can run.

A node is judged across the runs of the home, as lemon-node detection does
it across jobs: each entry keeps what struck it (`cause`, the `probe`) and
which runs did (`runs`), so a node many runs failed on is a lemon, and a
node only one run failed on may be that run's fault: when the same probe
fails the same way for that run on another node too, the run is ended and
its strikes are lifted (`clear_run`). One run may ban at most a share of a
partition's nodes (`share_of`, the daemon's `max_share_per_run`): the rest
stay in service for every other run of the home.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from fray.state import store
from fray.errors import CorruptFileError
from fray.state.layout import Home

DEFAULT_TTL_SEC = 3600.0
DEFAULT_TOP_K = 8
DEFAULT_MAX_SHARE_PER_RUN = 0.5  # of a partition's nodes, the most that one run's strikes may ban
RUNS_KEPT = 10  # distinct runs remembered per entry


@dataclass
class Entry:
    reason: str
    added_at: float
    expires_at: float | None
    source_run: str | None = None
    strikes: int = 1
    by_person: bool = False  # a person's ban: honoured even on a backend's only node
    cause: str | None = None  # what struck it last: node_fault, heartbeat_stall
    probe: str | None = None  # the preflight probe that failed, when one did
    runs: list[str] = field(default_factory=list)  # the distinct runs that struck it while it was banned

    def active(self, now: float) -> bool:
        return self.expires_at is None or self.expires_at > now

    def only_by(self, run_id: str) -> bool:
        """Struck by the daemon for `run_id` alone (not by a person, nor for another run)."""
        return not self.by_person and self.runs == [run_id]


@dataclass
class Blacklist:
    nodes: dict[str, Entry] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "Blacklist":
        return cls({name: Entry(**entry) for name, entry in (data or {}).get("nodes", {}).items()})

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": 1, "nodes": {name: {**vars(entry), "runs": list(entry.runs)}
                                               for name, entry in sorted(self.nodes.items())}}

    def strike(self, node: str, reason: str, now: float, ttl_sec: float | None, source_run: str | None,
               by_person: bool = False, cause: str | None = None, probe: str | None = None) -> Entry:
        """A fault seen on `node` (or a person's ban): add it, or renew it with one more strike."""
        expires = None if ttl_sec is None else now + ttl_sec
        old = self.nodes.get(node)
        live = old is not None and old.active(now)
        strikes = old.strikes + 1 if live else 1
        if old is not None and old.expires_at is None:
            expires = None  # a ban without expiry stays so
        by_person = by_person or (live and old.by_person)  # type: ignore[union-attr]
        runs = list(old.runs) if live else []  # type: ignore[union-attr]
        if source_run is not None and not by_person and source_run not in runs:
            runs = (runs + [source_run])[-RUNS_KEPT:]
        entry = Entry(reason=reason, added_at=now, expires_at=expires, source_run=source_run, strikes=strikes,
                      by_person=by_person, cause=cause, probe=probe, runs=runs)
        self.nodes[node] = entry
        return entry

    def share_of(self, run_id: str, nodes: list[str], now: float) -> int:
        """How many of `nodes` (a partition's) are banned now by `run_id`'s strikes alone."""
        return sum(1 for name in nodes if (entry := self.nodes.get(name)) is not None and entry.active(now)
                   and entry.only_by(run_id))

    def clear_run(self, run_id: str, probe: str | None) -> list[str]:
        """Lift the bans `run_id` alone laid (for `probe`'s failure, when given): the nodes unbanned."""
        gone = [name for name, entry in self.nodes.items()
                if entry.only_by(run_id) and (probe is None or entry.probe == probe)]
        for name in gone:
            del self.nodes[name]
        return gone

    def remove(self, node: str) -> bool:
        return self.nodes.pop(node, None) is not None

    def expire(self, now: float) -> list[str]:
        gone = [name for name, entry in self.nodes.items() if not entry.active(now)]
        for name in gone:
            del self.nodes[name]
        return gone

    def exclude(self, now: float, k: int) -> tuple[str, ...]:
        """The at most `k` worst active nodes: most strikes first, then most recent."""
        active = [(name, entry) for name, entry in self.nodes.items() if entry.active(now)]
        active.sort(key=lambda item: (-len(item[1].runs), -item[1].strikes, -item[1].added_at, item[0]))
        return tuple(name for name, _ in active[:k])


def load(home: Home) -> Blacklist:
    try:
        return Blacklist.from_dict(store.read_json(home.blacklist, "blacklist"))
    except CorruptFileError:
        return Blacklist()  # moved aside and reported by the reader; start afresh


def update(home: Home, change: Callable[[Blacklist], Any], now: float | None = None) -> Any:
    """Apply `change` to the blacklist under its lock, dropping expired entries; returns what it returned."""
    with store.lock(home, "blacklist"):
        current = load(home)
        current.expire(time.time() if now is None else now)
        result = change(current)
        store.write_json(home.blacklist, current.to_dict(), "blacklist")
    return result


def ban(home: Home, node: str, reason: str, ttl_sec: float | None, source_run: str | None = None) -> Entry:
    """A person bans `node` (audited); `ttl_sec` None bans it until unbanned."""
    from fray.state import audit

    now = time.time()
    entry = update(home, lambda b: b.strike(node, reason, now, ttl_sec, source_run, by_person=True), now)
    audit.record(home, "nodes.ban", source_run, {"node": node, "reason": reason, "ttl_sec": ttl_sec})
    return entry


def unban(home: Home, node: str, source_run: str | None = None) -> None:
    """Lift a ban (audited); an error naming the banned nodes when `node` is not one of them."""
    from fray.state import audit
    from fray.errors import UsageError

    banned: list[str] = []

    def remove(current: Blacklist) -> bool:
        banned.extend(sorted(current.nodes))
        return current.remove(node)

    if not update(home, remove):
        listed = ", ".join(banned) or "none"
        raise UsageError(f"node {node!r} is not blacklisted (blacklisted now: {listed})")
    audit.record(home, "nodes.unban", source_run, {"node": node})
