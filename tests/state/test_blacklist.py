"""The node blacklist: strikes, expiry, the bounded exclude list, and the shared file under its lock."""

from __future__ import annotations

import json
import threading

from conftest import schema_validate
from fray.state import blacklist, store
from fray.state.blacklist import Blacklist

NOW = 1_800_000_000.0


def test_repeated_faults_add_strikes_and_renew_the_ttl():
    bl = Blacklist()
    bl.strike("n1", "node_fault", NOW, 100, "run-a")
    entry = bl.strike("n1", "heartbeat_stall", NOW + 50, 100, "run-b")
    assert entry.strikes == 2 and entry.expires_at == NOW + 150 and entry.source_run == "run-b"


def test_expired_entries_drop_out_and_restart_their_count():
    bl = Blacklist()
    bl.strike("n1", "x", NOW, 10, None)
    assert bl.exclude(NOW + 5, 8) == ("n1",)
    assert bl.exclude(NOW + 11, 8) == ()
    assert bl.strike("n1", "x", NOW + 20, 10, None).strikes == 1
    assert bl.expire(NOW + 100) == ["n1"] and bl.nodes == {}


def test_the_exclude_list_is_bounded_to_the_worst_k_nodes():
    bl = Blacklist()
    for i in range(20):
        bl.strike(f"n{i:02d}", "x", NOW + i, 1000, None)
    bl.strike("n05", "again", NOW + 30, 1000, None)
    bl.strike("n05", "again", NOW + 31, 1000, None)
    bl.strike("n07", "again", NOW + 32, 1000, None)
    assert bl.exclude(NOW + 40, 3) == ("n05", "n07", "n19")
    assert len(bl.exclude(NOW + 40, 8)) == 8


def test_a_ban_without_expiry_stays_without_expiry():
    bl = Blacklist()
    bl.strike("n1", "manual", NOW, None, None)
    assert bl.strike("n1", "fault", NOW + 1, 60, None).expires_at is None
    assert bl.exclude(NOW + 10**9, 1) == ("n1",)


def test_concurrent_updates_lose_nothing(home):
    store.ensure_home(home)
    workers = [threading.Thread(target=lambda i=i: blacklist.update(
        home, lambda b: b.strike(f"node-{i}", "x", NOW, 3600, None), now=NOW)) for i in range(12)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    on_disk = json.loads(home.blacklist.read_text())
    schema_validate("blacklist", on_disk)
    assert len(on_disk["nodes"]) == 12
