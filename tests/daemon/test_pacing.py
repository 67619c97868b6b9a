"""The daemon's pace (fray.daemon.pacing): it rests between cycles only while a backend's own queue feeds the CPUs."""

from __future__ import annotations

from fray.daemon import pacing


class Backend:  # local: a queue of function attempts of its own (fray.backends.protocol.QueuesFunctions)
    def __init__(self, held: bool) -> None:
        self.held = held

    def queue_cpus(self) -> int:
        return 4

    def queue_held(self) -> bool:
        return self.held


class NoQueue:  # Slurm, TPU: no queue of their own on this machine
    pass


def test_with_nothing_queued_a_wake_starts_the_next_cycle_at_once():
    assert pacing.rest([Backend(False), NoQueue()], busy_sec=0.1, idle_sec=0.0) == 0.0
    assert pacing.rest([], busy_sec=0.1, idle_sec=0.0) == 0.0


def test_while_a_queue_is_held_the_loop_rests_as_long_as_its_last_cycle_took():
    backends = [NoQueue(), Backend(True)]
    assert pacing.rest(backends, busy_sec=0.05, idle_sec=0.0) == 0.05
    assert abs(pacing.rest(backends, busy_sec=0.05, idle_sec=0.02) - 0.03) < 1e-9  # the wait for the wake counts
    assert pacing.rest(backends, busy_sec=0.05, idle_sec=0.2) == 0.0


def test_a_slow_cycle_rests_no_longer_than_the_cap():
    assert pacing.rest([Backend(True)], busy_sec=5.0, idle_sec=0.0) == pacing.MAX_REST_SEC
