"""The daemon's sightings of attempts: liveness on its own clock, whatever the node's clock says.

The node's epochs here are a node 3 minutes behind (or ahead of) the daemon; `now` is the daemon's clock.
"""

from __future__ import annotations

from fray.backends.protocol import AttemptKey
from fray.core.policy import AttemptFiles
from fray.daemon.sightings import Sightings, offset_of

KEY = AttemptKey("run-1", 1)
BEHIND = -180.0


def beat(now: float, offset: float = BEHIND, **more: object) -> AttemptFiles:
    """A heartbeat the node wrote an instant before the daemon looked at `now` (daemon clock)."""
    return AttemptFiles(started={"started_at": now + offset - 5, "host": "n2"}, heartbeat_at=now + offset - 0.2,
                        **more)  # type: ignore[arg-type]


def test_a_heartbeat_is_dated_when_the_daemon_saw_it_change_so_a_skewed_node_looks_alive() -> None:
    seen = Sightings()
    files = seen.on_daemon_clock(KEY, "n2", beat(1000.0), 1000.0)
    assert files.heartbeat_at == 1000.0  # not 820: the node's epoch is never compared with the daemon's now
    same = seen.on_daemon_clock(KEY, "n2", AttemptFiles(started=files.started, heartbeat_at=1000.0 + BEHIND - 0.2),
                                1010.0)
    assert same.heartbeat_at == 1000.0  # unchanged for 10 s of the daemon's clock: that is what counts


def test_the_offset_is_measured_and_turns_the_start_and_end_into_the_daemons_clock_never_later_than_seen() -> None:
    seen = Sightings()
    for now in (1000.0, 1002.0, 1004.0):
        files = seen.on_daemon_clock(KEY, "n2", beat(now), now)
    assert files.clock_offset is not None and abs(files.clock_offset - BEHIND) < 0.5
    assert files.started is not None and 998.0 < files.started["started_at"] <= 1004.0
    ended = seen.on_daemon_clock(KEY, "n2", AttemptFiles(exit={"exit_code": 0, "ended_at": 1005.5 + BEHIND},
                                                         heartbeat_at=1005.8 + BEHIND), 1006.0)
    assert ended.exit is not None and 1005.0 < ended.exit["ended_at"] <= 1006.0
    assert abs(seen.node_offsets()["n2"] - BEHIND) < 0.5


def test_one_damaged_heartbeat_that_still_parses_as_a_time_does_not_move_the_offset() -> None:
    assert offset_of([-180.2, -180.1, 99999.0, -180.3]) == -180.1
    assert offset_of([-180.2, 99999.0]) == -180.2  # of two, the higher alone cannot lead
    assert offset_of([]) is None


def test_an_unreadable_heartbeat_is_no_news_and_is_said_when_it_lasts() -> None:
    seen = Sightings()
    seen.on_daemon_clock(KEY, "n2", beat(1000.0), 1000.0)
    damaged = seen.on_daemon_clock(KEY, "n2", AttemptFiles(started={"started_at": 815.0}, heartbeat_problem="unreadable"),
                                   1030.0)
    assert damaged.heartbeat_at == 1000.0  # the last good reading stands: not "dead since it started"
    assert damaged.heartbeat_problem == "its heartbeat file has been unreadable for 0s (damaged)"
    later = seen.on_daemon_clock(KEY, "n2", AttemptFiles(started={"started_at": 815.0}, heartbeat_problem="unreadable"),
                                 1050.0)
    assert later.heartbeat_problem == "its heartbeat file has been unreadable for 20s (damaged)"


def test_a_new_daemon_gives_each_attempt_a_whole_timeout_from_its_first_sight() -> None:
    old_beat = AttemptFiles(started={"started_at": 100.0}, heartbeat_at=500.0)  # hours old by the daemon's clock
    files = Sightings().on_daemon_clock(KEY, "n2", old_beat, 9000.0)
    assert files.heartbeat_at == 9000.0


def test_a_step_that_advances_is_dated_by_the_daemon_and_a_damaged_progress_keeps_the_last_good_one() -> None:
    seen = Sightings()
    progress = {"step": 5, "updated_at": 800.0, "step_changed_at": 800.0}
    first = seen.on_daemon_clock(KEY, "n2", beat(1000.0, progress=progress), 1000.0)
    assert first.progress is not None and first.progress["step_changed_at"] == 1000.0
    same_step = {"step": 5, "updated_at": 830.0, "step_changed_at": 800.0}
    still = seen.on_daemon_clock(KEY, "n2", beat(1030.0, progress=same_step), 1030.0)
    assert still.progress is not None and still.progress["step_changed_at"] == 1000.0  # no advance for 30 s
    gone = seen.on_daemon_clock(KEY, "n2", beat(1040.0), 1040.0)  # progress.json unreadable this cycle
    assert gone.progress == still.progress


def test_when_the_backend_lost_it_is_remembered_until_it_is_back() -> None:
    seen = Sightings()
    assert seen.on_daemon_clock(KEY, "n2", beat(1000.0), 1000.0, gone=True).gone_since == 1000.0
    assert seen.on_daemon_clock(KEY, "n2", beat(1003.0), 1003.0, gone=True).gone_since == 1000.0
    assert seen.on_daemon_clock(KEY, "n2", beat(1004.0), 1004.0, gone=False).gone_since is None


def test_an_attempt_first_seen_after_it_ended_keeps_its_length_on_the_daemons_clock() -> None:
    # A 30 s run on a node 3 minutes behind, its one heartbeat at its start, first seen 5 s after it ended
    # (a busy daemon, a fast script): its end record proves the node's offset, so it lasted 30 s, not 0 s.
    node_start = 965.0 + BEHIND
    files = AttemptFiles(started={"started_at": node_start, "host": "n2"}, heartbeat_at=node_start + 0.01,
                         exit={"exit_code": 0, "started_at": node_start, "ended_at": node_start + 30.0})
    seen = Sightings().on_daemon_clock(KEY, "n2", files, 1000.0)
    assert seen.exit is not None and seen.started is not None
    assert 995.0 <= seen.exit["ended_at"] <= 1000.0  # never later than seen, never earlier than true
    assert 965.0 <= seen.started["started_at"] <= 970.0
    assert abs((seen.exit["ended_at"] - seen.started["started_at"]) - 30.0) < 1e-6
    assert seen.clock_offset is not None and BEHIND - 5.0 <= seen.clock_offset <= BEHIND
