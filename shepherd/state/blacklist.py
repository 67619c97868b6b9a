"""The node blacklist: which nodes not to use, why, and until when.

`Blacklist` is the pure record (add a strike, remove, expire, choose the top-K
to exclude); `update` and `load` are the IO around blacklist.json, which every
daemon and CLI shares and so writes only under locks/blacklist.lock.

Resubmissions exclude at most the K worst nodes (most strikes, then most
recent), so an exclude list never grows until nothing can run.
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


@dataclass
class Entry:
    reason: str
    added_at: float
    expires_at: float | None
    source_run: str | None = None
    strikes: int = 1
    by_person: bool = False  # a person's ban: honoured even on a backend's only node

    def active(self, now: float) -> bool:
        return self.expires_at is None or self.expires_at > now


@dataclass
class Blacklist:
    nodes: dict[str, Entry] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "Blacklist":
        return cls({name: Entry(**entry) for name, entry in (data or {}).get("nodes", {}).items()})

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": 1, "nodes": {name: vars(entry) for name, entry in sorted(self.nodes.items())}}

    def strike(self, node: str, reason: str, now: float, ttl_sec: float | None, source_run: str | None,
               by_person: bool = False) -> Entry:
        """A fault seen on `node` (or a person's ban): add it, or renew it with one more strike."""
        expires = None if ttl_sec is None else now + ttl_sec
        old = self.nodes.get(node)
        strikes = old.strikes + 1 if old is not None and old.active(now) else 1
        if old is not None and old.expires_at is None:
            expires = None  # a ban without expiry stays so
        by_person = by_person or (old is not None and old.active(now) and old.by_person)
        entry = Entry(reason=reason, added_at=now, expires_at=expires, source_run=source_run, strikes=strikes,
                      by_person=by_person)
        self.nodes[node] = entry
        return entry

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
        active.sort(key=lambda item: (-item[1].strikes, -item[1].added_at, item[0]))
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
