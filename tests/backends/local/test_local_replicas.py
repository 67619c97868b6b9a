"""A local run's replicas (fray.backends.local.replicas): they stop together, each with its share of the GPUs."""

from __future__ import annotations

from fray.backends.local.replicas import gpu_share, task_index, to_stop


def test_local_replicas_stop_together() -> None:
    assert to_stop(3, {0: 10, 1: 11, 2: 12}, {}) == []  # all running
    assert to_stop(3, {0: 10, 2: 12}, {1: 0}) == []  # task 1 finished well
    assert to_stop(3, {0: 10, 2: 12}, {1: 50}) == [0, 2]  # task 1 failed: the rest go
    assert to_stop(3, {2: 12}, {0: 0, 1: 0}) == []  # task 0 succeeded: task 2 may finish (the daemon waits)
    assert to_stop(3, {2: 12}, {0: 50, 1: 0}) == [2]  # task 0 (the attempt) failed
    assert to_stop(3, {1: 11, 2: 12}, {0: None}) == [1, 2]  # task 0 vanished without an exit record
    assert to_stop(3, {0: 10, 2: 12}, {1: None}) == [0, 2]  # task 1 vanished without an exit record
    assert gpu_share((4, 5, 6, 7), 1, 2) == (6, 7)
    assert task_index("/h/runs/r/attempts/3/tasks/2", 3) == 2 and task_index("/h/runs/r/attempts/3", 3) == 0
