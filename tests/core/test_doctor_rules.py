"""What `fray doctor` concludes from its measurements (pure): each finding's status and its fix."""

from __future__ import annotations

from fray.core import doctor_rules as rules


def test_a_file_system_is_named_by_its_family_with_what_fray_can_rely_on_there() -> None:
    assert rules.kind_of("nfs4") == "nfs" and rules.kind_of("fuse.gcsfuse") == "gcsfuse"
    assert rules.kind_of("fuse.sshfs") == "fuse" and rules.kind_of("ext4") == "local"
    nocto = rules.file_system("nfs4", "filer:/home", ["rw", "nocto"], "slurm")
    assert nocto.status == "warn" and "nocto" in nocto.summary
    assert rules.file_system("ext4", "/dev/sda1", [], "slurm").status == "warn"  # no other machine sees it
    assert rules.file_system("ext4", "/dev/sda1", [], "local").status == "ok"


def test_no_hard_links_is_a_warning_with_the_setting_and_no_rename_a_failure() -> None:
    assert rules.atomic_operations({}).status == "ok"
    links = rules.atomic_operations({"link": "Operation not permitted"})
    assert links.status == "warn" and "FRAY_RECORDS=write-once" in (links.fix or "")
    assert rules.atomic_operations({"rename": "nope"}).status == "fail"


def test_locks_are_reported_as_found_and_never_fail_the_check() -> None:
    assert "node-local" in rules.locks("yes", "login-b", coherent=False).summary
    assert "coherent with login-b" in rules.locks("yes", "login-b", coherent=True).summary
    assert "ENOSYS" in rules.locks("ENOSYS: Function not implemented", None, None).summary
    assert {rules.locks("yes", None, None).status, rules.locks("ENOSYS: x", None, None).status} == {"info"}


def test_a_lease_timeout_shorter_than_twice_the_slowest_round_trip_is_a_warning_with_a_value_to_set() -> None:
    assert rules.daemon("running", "pid 7 on login-a", 15.0, 1.0).status == "ok"
    slow = rules.daemon("running", "pid 7 on login-a", 15.0, 9.0)
    assert slow.status == "warn" and "lease_timeout_sec" in (slow.fix or "") and "36" in (slow.fix or "")
    assert rules.daemon("stopped", "no daemon has run here", 15.0, None).fix == "fray daemon start (on each login host)"


def test_round_trips_slower_than_the_late_file_tolerance_ask_for_a_larger_one() -> None:
    assert rules.round_trip([0.2, 0.4], 60.0, "slurm").status == "ok"
    slow = rules.round_trip([0.2, 70.0], 60.0, "slurm")
    assert slow.status == "warn" and "file_latency_sec" in (slow.fix or "") and "210" in (slow.fix or "")
    assert rules.round_trip([], 60.0, "slurm").status == "fail"


def test_clocks_minutes_off_are_a_warning_that_names_the_nodes() -> None:
    found = rules.clocks({"n1": 0.2, "n2": -300.0})
    assert found.status == "warn" and "n2 5m00s behind" in found.summary and found.fix == "fix NTP on n2"
    assert rules.clocks({"n1": 0.2}).status == "ok"
    assert rules.describe_offset(3.04) == "3.0s ahead" and rules.describe_offset(0.1) == "in step"


def test_the_verdict_is_the_worst_finding() -> None:
    ok, warn, fail = (rules.Finding("x", s, "") for s in ("ok", "warn", "fail"))
    assert rules.verdict([ok, rules.Finding("x", "info", "")]) == "ok"
    assert rules.verdict([ok, warn]) == "warn" and rules.verdict([warn, fail]) == "fail"
