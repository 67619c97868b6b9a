"""The doorbell (fray.state.doorbell): a command on the daemon's host wakes it at once, with the runs it changed,
and a ring nobody hears is dropped without a word (tests/daemon/test_doorbell_daemon.py: the daemon's end).
"""

from __future__ import annotations

import threading

import pytest

from conftest import wait_until
from fray.state import doorbell
from fray.state.layout import Home


@pytest.fixture
def bell(home):
    bell = doorbell.Bell(home)
    assert bell.open()
    yield bell
    bell.close()


def _heard(bell: doorbell.Bell) -> list[set[str]]:
    heard: list[set[str]] = []
    done = threading.Event()
    threading.Thread(target=bell.listen, args=(heard.append, done.is_set), daemon=True).start()
    return heard


def test_a_ring_carries_the_run_ids(home, bell):
    heard = _heard(bell)
    assert doorbell.ring(home, ["r-1", "r-2"])
    wait_until(lambda: heard, what="the ring")
    assert heard == [{"r-1", "r-2"}]


def test_more_runs_than_a_datagram_holds_ring_as_a_plain_wake(home, bell):
    heard = _heard(bell)
    many = [f"20261202-000000-point-{i:05d}-abcd" for i in range(1000)]
    assert doorbell.ring(home, many)
    wait_until(lambda: heard, what="the ring")
    assert heard == [set()]


def test_a_ring_names_no_path_outside_runs(home, bell):
    heard = _heard(bell)
    doorbell.ring(home, ["../../etc", ".staging-x", "", "r-ok"])
    wait_until(lambda: heard, what="the ring")
    assert heard == [{"r-ok"}]


def test_nobody_listening_drops_the_ring(home):
    assert doorbell.ring(home, ["r-1"]) is False


def test_two_homes_never_share_a_bell(home, tmp_path, bell):
    other = Home(tmp_path / "other-home")
    assert doorbell.abstract_name(other, "doorbell") != doorbell.abstract_name(home, "doorbell")
    assert doorbell.ring(other, ["r-1"]) is False
    assert doorbell.Bell(home).open() is False  # taken: one daemon per home and host hears it
