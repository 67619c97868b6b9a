"""How fray.map packs calls into runs without `chunk=` (fray.core.batching): values in, run sizes out."""

from __future__ import annotations

from fray.core import batching


def test_as_many_items_as_slots_or_fewer_get_a_run_each():
    assert batching.sizes(2, 2, None) == [1, 1]
    assert batching.sizes(3, 8, 0.0001) == [1, 1, 1]
    assert batching.sizes(0, 4, None) == []


def test_calls_never_measured_go_into_two_runs_per_slot_in_order():
    assert batching.sizes(1000, 2, None) == [250] * 4
    assert batching.sizes(7, 2, None) == [2, 2, 2, 1]  # sizes differ by one call at most, the larger first
    assert batching.sizes(5, 4, None) == [1] * 5  # never more runs than calls


def test_short_calls_measured_go_into_one_run_per_slot_or_runs_of_about_a_target_each():
    assert batching.sizes(1000, 2, 0.0004) == [500, 500]  # 0.4 s of calls: one run per slot keeps both busy
    per_run = int(batching.RUN_TARGET_SEC / 0.1)
    assert batching.sizes(100, 2, 0.1) == [per_run] * (100 // per_run)  # 10 s of calls: runs of a target each


def test_calls_measured_long_keep_a_run_each():
    assert batching.sizes(50, 2, batching.LONG_CALL_SEC) == [1] * 50
    assert len(batching.sizes(50, 2, 0.3)) == 15  # shorter: 15 s of calls, in runs of about a target


def test_a_slot_count_below_one_counts_as_one():
    assert batching.sizes(10, 0, 0.001) == [10]
