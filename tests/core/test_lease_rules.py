"""The lease's rules, as values: when a holder may act, when an observer may take over, what a reader is told.

Every time here is one party's own clock; the point of the rules is that no two are ever compared.
"""

from __future__ import annotations

from fray.core import lease_rules
from fray.core.lease_rules import Sight, Watch, judge

T = 15.0


def test_a_holder_acts_only_while_its_last_renewal_began_less_than_the_timeout_less_the_margin_ago() -> None:
    assert lease_rules.holder_valid(100.0, 100.0 + T - lease_rules.margin(T) - 0.01, T)
    assert not lease_rules.holder_valid(100.0, 100.0 + T - lease_rules.margin(T), T)
    assert not lease_rules.holder_valid(None, 100.0, T)  # never renewed: holds nothing


def test_the_holder_stops_acting_before_the_earliest_takeover_by_the_margin() -> None:
    """A renewal that began at r is seen by an observer at r or later, who takes over T after that at the
    earliest; the holder's last valid instant is r + T - margin."""
    renewal_began = 50.0
    earliest_takeover = renewal_began + T
    last_valid = renewal_began + T - lease_rules.margin(T)
    assert earliest_takeover - last_valid >= 0.5


def test_an_observer_judges_expiry_from_when_it_first_saw_the_version_not_from_any_written_time() -> None:
    watch = Watch()
    assert watch.observe((1, 10), now=1000.0) is False  # the first reading is no change
    assert not watch.expired(1000.0 + T - 0.1, T)
    assert watch.observe((1, 11), now=1005.0) is True  # renewed: the clock starts again
    assert not watch.expired(1005.0 + T - 0.1, T)
    assert watch.expired(1005.0 + T, T)
    assert watch.changes == 1


def test_a_reader_on_the_holders_host_judges_by_its_process_and_its_own_clock() -> None:
    lease = {"pid": 7, "host": "login-a", "last_cycle_at": 100.0, "poll_interval_sec": 1.0}
    assert judge(lease, Sight(same_host=True, holder_alive=True), 101.0).state == "running"
    assert judge(lease, Sight(same_host=True, holder_alive=True), 200.0).state == "stale"
    gone = judge(lease, Sight(same_host=True, holder_alive=False), 101.0)
    assert gone.state == "stopped" and gone.judged_by == "process"


def test_a_reader_on_another_host_trusts_its_standby_or_its_own_watch_never_the_holders_clock() -> None:
    lease = {"pid": 7, "host": "login-a", "generation": 3, "last_cycle_at": 0.0, "renewed_at": 0.0,
             "poll_interval_sec": 1.0, "lease_timeout_sec": T}
    standby = {"written_at": 1000.0, "holder": {"pid": 7, "generation": 3, "unchanged_for_sec": 0.4}}
    seen = judge(lease, Sight(standby=standby), 1000.5)  # the lease says 1970: only the standby's view counts
    assert (seen.state, seen.judged_by) == ("running", "standby")
    assert judge(lease, Sight(standby={**standby, "holder": {**standby["holder"], "unchanged_for_sec": T}}),
                 1000.5).state == "stale"
    assert judge(lease, Sight(watched_for=1.3, changed=True), 1000.0).state == "running"
    unchanged = judge(lease, Sight(watched_for=1.3), 1000.0)
    assert unchanged.state == "stale" and "did not change in the 1.3s" in unchanged.detail
    hint = judge({**lease, "renewed_at": 999.0}, Sight(), 1000.0)  # nothing better at hand: a hint, said so
    assert (hint.state, hint.judged_by) == ("running", "clock")


def test_a_stopped_or_absent_lease_reads_stopped() -> None:
    assert judge(None, Sight(), 0.0).state == "stopped"
    lease = {"pid": 7, "host": "login-a", "last_cycle_at": 0.0, "poll_interval_sec": 1.0, "stopping": True}
    assert judge(lease, Sight(watched_for=1.0, changed=True), 5.0).state == "stopped"
