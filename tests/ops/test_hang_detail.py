"""What `fray status` says of hangs (fray.ops.detail): where the last hung attempt hung, what the running one
is stuck in."""

from __future__ import annotations

from fray.ops import detail


def test_status_says_where_the_last_hung_attempt_hung_and_what_the_running_one_is_stuck_in():
    stacks = {"by": "faulthandler", "hung_in": "worker, job.py:9", "notes": []}
    attempts = [{"number": 1, "state": "ended", "cause": "hang_idle", "watch": {"stacks": stacks, "stuck_io": []}},
                {"number": 2, "state": "running", "cause": None,
                 "watch": {"stacks": None, "stuck_io": [{"pid": 77, "wchan": "nfs_wait_bit_killable", "for_sec": 95}],
                           "could_not_see": None}}]
    facts = dict(detail.hang_summaries(attempts))
    assert facts["hung in"] == "worker, job.py:9 (attempt 1, hang_idle; all stacks: fray logs --stacks)"
    assert facts["stuck"].startswith("in I/O (D state) on nfs_wait_bit_killable: pid 77 for 1m35s")
    blind = {"by": None, "hung_in": None, "notes": ["py-spy is not on PATH"]}
    assert dict(detail.hang_summaries([{**attempts[0], "watch": {"stacks": blind}}]))["hung in"] == \
        "unknown (attempt 1, hang_idle): py-spy is not on PATH"
    assert detail.hang_summaries([]) == []
