"""One daemon across login hosts, one live attempt per run, liveness on the observer's clock: on the cluster in a box.

Each login host and each Slurm node is its own host here (mount namespace with its own sshfs client of the
shared folder, PID namespace, hostname; tests/box): what fray promises across hosts is tried where flock is
node-local, caches are real, processes of one host are invisible to the others and clocks can disagree.
Assertions read the file server's side of the home (`home.server`), where no cache is in the way.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from typing import Any, Iterator

import pytest

from tests.box import churn, procs
from tests.box.box import Box
from tests.box.fray_on_box import FAST_SLURM, FrayHome
from tests.box.host import Host
from tests.conftest import schema_validate, wait_until

pytestmark = pytest.mark.slow

LEASE_TIMEOUT = 4.0  # seconds a lease must stand unchanged (on the observer's clock) before another host takes it
TAKEOVER_BOUND = LEASE_TIMEOUT + 4.0  # + the standby's poll, the new daemon's first cycle, a loaded CI machine

CONFIG = {"slurm": FAST_SLURM, "daemon": {"lease_timeout_sec": LEASE_TIMEOUT, "file_latency_sec": 15}}


@pytest.fixture
def home(box: Box, request: pytest.FixtureRequest) -> Iterator[FrayHome]:
    found = FrayHome.create(box, request.node.name, CONFIG)
    yield found
    found.clean()


def lease(home: FrayHome) -> dict[str, Any] | None:
    try:
        return json.loads((home.server / "daemon.json").read_text())
    except (OSError, ValueError):
        return None


def daemon_pids(host: Host, home: FrayHome) -> list[int]:
    """The root-namespace pids of this home's daemon processes on `host`."""
    return [pid for pid, argv in host.processes().items()
            if "fray.daemon" in " ".join(argv) and str(home.path) in argv]


def job_processes(home: FrayHome, host: Host, run_id: str) -> list[int]:
    """The run's processes on `host` (root-namespace pids): its wrapper (and guardian), by their command line,
    and all its workload's, by their tag. Not Slurm's own (slurmstepd)."""
    tagged = {pid for pids in home.where(run_id).values() for pid in pids}
    return sorted(pid for pid, argv in host.processes().items() if pid in tagged or run_id in " ".join(argv))


def start_daemon(home: FrayHome, host: Host) -> None:
    home.fray(host, "daemon", "start", check=True)
    wait_until(lambda: daemon_pids(host, home), what=f"a daemon process on {host.name}")


def acting(home: FrayHome) -> str:
    """The host whose daemon holds the lease, once one does and has cycled. Not a stale write: a renewal a freeze
    caught between its check and its rename lands after the takeover, naming the host that lost it."""
    return wait_until(lambda: (l := lease(home)) and not l.get("stopping") and l.get("cycles", 0) >= 1
                      and not (home.server / "daemon" / f"generation-{l['generation'] + 1}.json").exists()
                      and l["host"], timeout=30, what="a daemon to hold the lease")


def takeovers(home: FrayHome) -> list[str]:
    """Each generation taken, by whom and why, in order: what a failure of one live attempt per run is read by."""
    found = sorted(home.server.joinpath("daemon").glob("generation-*.json"), key=lambda p: int(p.stem.split("-")[1]))
    return [f"{p.stem}: {(g := json.loads(p.read_text()))['host']}: {g['why']}" for p in found]


def test_two_login_hosts_one_daemon_acts_the_other_stands_by_and_both_say_so(box: Box, home: FrayHome) -> None:
    a, b = box.login("login-a"), box.login("login-b")
    start_daemon(home, a)
    assert acting(home) == "login-a"
    start_daemon(home, b)  # a second daemon for this home, on the other login host
    record = wait_until(lambda: (p := home.server / "daemon" / "hosts" / "login-b.json").exists()
                        and json.loads(p.read_text()), what="login-b's daemon to report")
    assert record["role"] == "standby" and record["holder"]["host"] == "login-a"
    time.sleep(LEASE_TIMEOUT + 1)  # long enough for a wrong takeover to have happened
    assert lease(home)["host"] == "login-a" and lease(home)["generation"] == 1
    for host in (a, b):
        shown = home.fray_json(host, "daemon", "status")
        assert shown["state"] == "running" and "on login-a" in shown["detail"], (host.name, shown)
        roles = {h["host"]: h["role"] for h in shown["hosts"]}
        assert roles == {"login-a": "active", "login-b": "standby"}, shown["hosts"]
    text = home.fray(b, "daemon", "status", check=True).stdout
    assert "login-b (this host): standing by" in text and "login-a:" in text and "acting" in text


def test_a_submit_on_a_host_without_a_daemon_is_served_by_the_live_one_and_starts_none(box: Box,
                                                                                       home: FrayHome) -> None:
    a, b = box.login("login-a"), box.login("login-b")
    start_daemon(home, a)
    acting(home)
    script = home.project("proj", {"hi.py": "#FRAY --backend slurm\nprint('hello from', __import__('socket').gethostname())\n"})
    submitted = home.submit(b, script / "hi.py")
    assert "on login-a" in submitted["daemon"]["detail"], submitted["daemon"]
    ended = home.wait_ended(b, submitted["run_id"])
    assert ended["run"]["status"] == "completed_success"
    assert daemon_pids(b, home) == []  # served from login-a: no daemon was started on login-b
    assert lease(home)["host"] == "login-a"


def test_the_serving_daemon_killed_the_other_hosts_daemon_takes_over_within_the_bound(box: Box,
                                                                                      home: FrayHome) -> None:
    a, b = box.login("login-a"), box.login("login-b")
    start_daemon(home, a)
    acting(home)
    start_daemon(home, b)
    wait_until(lambda: (home.server / "daemon" / "hosts" / "login-b.json").exists(), what="login-b to stand by")
    procs.send(daemon_pids(a, home), signal.SIGKILL)
    killed = time.monotonic()
    wait_until(lambda: (l := lease(home)) and l["host"] == "login-b" and l.get("cycles", 0) >= 1,
               timeout=TAKEOVER_BOUND + 10, what="login-b to take over")
    took = time.monotonic() - killed
    assert LEASE_TIMEOUT - 0.5 <= took <= TAKEOVER_BOUND, took  # not before the timeout, not long after
    generation = json.loads((home.server / "daemon" / f"generation-{lease(home)['generation']}.json").read_text())
    assert generation["host"] == "login-b" and "unchanged for" in generation["why"]


def test_runs_retried_nonstop_across_takeovers_never_have_two_live_attempts(box: Box, home: FrayHome) -> None:
    """The issue's churn: runs that fail and are retried at once, daemons on both login hosts, the acting
    host frozen (a paused VM) and thawed again: no attempt number runs twice, no two workloads of a run live
    at once, and a thawed daemon stands by instead of acting."""
    a, b = box.login("login-a"), box.login("login-b")
    start_daemon(home, a)
    acting(home)
    start_daemon(home, b)
    script = home.project("proj", {"churn.py": churn.SCRIPT}) / "churn.py"
    run_ids = [home.submit(a, script, "--name", f"churn-{i}")["run_id"] for i in range(4)]
    freezes, began = 0, time.monotonic()
    while True:  # 45 s of churn at least, and on until enough of it ran to prove something (a loaded machine is slower)
        time.sleep(6)
        holder = box.login(acting(home))
        generation = lease(home)["generation"]
        holder.freeze()  # the acting host stops whole: its daemon mid-cycle, perhaps mid-commit
        wait_until(lambda: (l := lease(home)) and l["generation"] > generation, timeout=TAKEOVER_BOUND + 10,
                   what="the other host to take over")
        holder.thaw()
        freezes += 1
        churned = sum(len(v) for v in churn.workloads(home).values())
        if time.monotonic() - began >= 45 and freezes >= 3 and churned >= 20:
            break
        assert time.monotonic() - began < 150, f"too little churn in 150 s: {freezes} freezes, {churned} attempts"
    for run_id in run_ids:  # stop, so that nothing is in flight while the records are read
        home.fray(a, "control", "stop", run_id, check=True)
    for run_id in run_ids:
        home.wait_ended(a, run_id, timeout=60)
    seen = churn.workloads(home)
    assert churn.duplicates(seen) == {}, takeovers(home)  # no attempt number ran twice
    assert churn.overlaps(seen) == [], takeovers(home)  # no two workloads of a run lived at once
    # Each thawed daemon found its lease lapsed and stood by; exactly one acts.
    hosts = {h["host"]: h["role"] for h in home.fray_json(a, "daemon", "status")["hosts"]}
    assert sorted(hosts.values()) == ["active", "standby"], hosts
    # One takeover per freeze: none by a thawed daemon, none lost.
    generations = sorted(int(p.stem.split("-")[1]) for p in (home.server / "daemon").glob("generation-*.json"))
    assert generations[-1] == freezes + 1, takeovers(home)


SKEWED = """#FRAY --backend slurm --heartbeat-interval 0.5 --heartbeat-timeout 8 --startup-grace 2 --max-retries 0
#SBATCH -w {node}
import time
from fray import report

for step in range(1, 10_000):
    report.progress(step=step)
    time.sleep(0.2)
"""


def test_node_clocks_five_minutes_off_cost_no_restart_and_a_hung_node_is_still_found(box: Box,
                                                                                   home: FrayHome) -> None:
    a = box.login("login-a")
    box.node("n2").set_clock_offset(-300)
    box.node("n3").set_clock_offset(+300)
    start_daemon(home, a)
    acting(home)
    runs = {}
    for node in ("n2", "n3"):
        script = home.project(f"proj-{node}", {"train.py": SKEWED.format(node=node)}) / "train.py"
        runs[node] = home.submit(a, script)["run_id"]
    for run_id in runs.values():
        wait_until(lambda: home.status(a, run_id)["run"]["status"] == "healthy_running", timeout=60,
                   what=f"run {run_id} to run")
    time.sleep(12)  # past the heartbeat timeout: a liveness judged by comparing clocks would have fired by now
    for node, run_id in runs.items():
        shown = home.status(a, run_id)
        assert [t["number"] for t in shown["attempts"]] == [1], (node, shown["attempts"])
        assert shown["run"]["status"] == "healthy_running", (node, shown["run"])
        offset = shown["attempts"][0]["clock_offset_sec"]
        assert abs(offset - {"n2": -300, "n3": 300}[node]) < 3, (node, offset)  # measured, and shown
    # n3's job hangs whole (its wrapper and workload stopped, the node up): found within the timeout.
    hung = job_processes(home, box.node("n3"), runs["n3"])
    procs.send(hung, signal.SIGSTOP)
    stopped = time.monotonic()
    shown = wait_until(lambda: (s := home.status(a, runs["n3"]))["attempts"][0]["cause"] and s, timeout=30,
                       what="the hung attempt to be closed")
    assert shown["attempts"][0]["cause"] == "heartbeat_stall"
    assert time.monotonic() - stopped < 8 + 6  # the timeout, plus a poll and a loaded machine
    procs.send(hung, signal.SIGCONT)


def test_with_flock_answering_enosys_on_every_host_runs_still_complete(box: Box, home: FrayHome) -> None:
    a, b = box.login("login-a"), box.login("login-b")
    for host in (a, b, *box.nodes):
        host.set_flock(False)
    probe = a.run(["python3", "-c", "import fcntl; fcntl.flock(open('/dev/null'), fcntl.LOCK_EX)"])
    assert "Function not implemented" in probe.stderr  # the shim is in force
    script = home.project("proj", {"ok.py": "#FRAY --backend slurm\nprint('done')\n"})
    run_id = home.submit(a, script / "ok.py", "--wait")["run_id"]
    assert home.status(b, run_id)["run"]["status"] == "completed_success"
    home.fray(b, "control", "start", run_id, check=True)  # control.json and the audit log, under their locks
    audit = home.fray_json(b, "audit", "show")
    assert any(entry["run_id"] == run_id for entry in audit["entries"]), audit


FROZEN = """#FRAY --backend slurm --heartbeat-interval 0.5 --heartbeat-timeout 6 --startup-grace 2 --max-retries 3
#SBATCH -w n1
import os, subprocess, time
from fray import report

child = subprocess.Popen(["sleep", "300"])  # a grandchild: the fence must take the whole tree
for step in range(1, 10_000):
    report.progress(step=step)
    time.sleep(0.2)
"""


def test_a_wrapper_thawed_after_its_attempt_was_replaced_kills_its_tree_and_writes_nothing(box: Box,
                                                                                            home: FrayHome) -> None:
    """The login side cannot see n1's processes: only the wrapper's own fence can stop them."""
    a, n1 = box.login("login-a"), box.node("n1")
    start_daemon(home, a)
    acting(home)
    script = home.project("proj", {"train.py": FROZEN}) / "train.py"
    run_id = home.submit(a, script)["run_id"]
    wait_until(lambda: home.status(a, run_id)["run"]["status"] == "healthy_running", timeout=60, what="it to run")
    old = job_processes(home, n1, run_id)
    assert old and all(pid in n1.pids() for pid in old)
    assert not any(pid in a.pids() for pid in old)  # invisible from the login host
    procs.send(old, signal.SIGSTOP)
    wait_until(lambda: len(home.status(a, run_id)["attempts"]) >= 2, timeout=40, what="a second attempt")
    attempt1 = home.server / "runs" / run_id / "attempts" / "1"
    beat = (attempt1 / "heartbeat").read_bytes()
    procs.send(old, signal.SIGCONT)
    wait_until(lambda: not any(procs.alive(pid) for pid in old), timeout=10, what="the thawed tree to die")
    assert (attempt1 / "heartbeat").read_bytes() == beat  # not one more beat
    assert not (attempt1 / "exit.json").exists() and not (attempt1 / "failure.json").exists()


def test_an_exit_record_that_reaches_the_daemons_host_late_costs_no_retry(box: Box, home: FrayHome) -> None:
    from tests.box.share import Cache

    a = box.login("login-a")
    box.remount(a, Cache(missing_names=10))  # login-a learns of a new file up to 10 s after it appears
    start_daemon(home, a)
    acting(home)
    script = home.project("proj", {"quick.py": "#FRAY --backend slurm --max-retries-preemption 1\nprint('ok')\n"})
    run_id = home.submit(a, script / "quick.py")["run_id"]
    ended = home.wait_ended(a, run_id, timeout=60)
    assert [(t["number"], t["cause"]) for t in ended["attempts"]] == [(1, "success")]



def test_doctor_on_two_login_hosts_at_once_finds_node_local_locks_and_a_node_clock_off(box: Box,
                                                                                      home: FrayHome) -> None:
    a, b = box.login("login-a"), box.login("login-b")
    for node in box.nodes:
        node.set_clock_offset(-120)
    start_daemon(home, a)
    acting(home)
    doctors = {host.name: host.popen(["fray", "doctor", "--json", "--backend", "slurm", "--timeout", "60"],
                                     env=home.env(), cwd=home.path.parent, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
               for host in (a, b)}
    reports = {}
    for name, proc in doctors.items():
        out, err = proc.communicate(timeout=150)
        assert proc.returncode == 0, (name, out, err)
        reports[name] = json.loads(out)
    for name, report in reports.items():
        schema_validate("cli-doctor", report)
        checks = {f["check"]: f for f in report["findings"]}
        other = "login-b" if name == "login-a" else "login-a"
        assert "flock is node-local" in checks["locks"]["summary"] and other in checks["locks"]["summary"], checks
        assert checks["file system"]["summary"].startswith("fuse.sshfs")
        assert checks["round trip"]["status"] == "ok" and len(report["measured"]["round_trips_sec"]) == 5
        node = report["measured"]["node"]["host"]
        assert node in {n.name for n in box.nodes}
        assert abs(report["measured"]["clock_offsets_sec"][node] + 120) < 3, report["measured"]
        assert checks["clocks"]["status"] == "warn" and "behind" in checks["clocks"]["summary"]


LOCAL = """#FRAY --heartbeat-interval 0.5
import time
from fray import report

for step in range(1, 100_000):
    report.progress(step=step)
    time.sleep(0.2)
"""


def test_a_local_run_of_one_login_host_lives_on_when_another_hosts_daemon_takes_over_and_stops_by_its_word(
        box: Box, home: FrayHome) -> None:
    """The local backend runs on the login host that started it: a daemon on another host cannot see or signal
    its processes, so it judges it by its heartbeat (not `lost`), and a stop reaches it through meta.json."""
    a, b = box.login("login-a"), box.login("login-b")
    start_daemon(home, a)
    acting(home)
    start_daemon(home, b)
    script = home.project("proj", {"serve.py": LOCAL}) / "serve.py"
    run_id = home.submit(a, script)["run_id"]
    wait_until(lambda: home.status(a, run_id)["run"]["status"] == "healthy_running", timeout=60, what="it to run")
    workload = job_processes(home, a, run_id)
    home.fray(a, "daemon", "stop", check=True)  # login-a's daemon hands over at once; its run lives on
    wait_until(lambda: (l := lease(home)) and l["host"] == "login-b" and l.get("cycles", 0) >= 1, what="login-b")
    time.sleep(3)  # several of login-b's cycles: one that could not see the run's processes would have closed it
    shown = home.status(b, run_id)
    assert shown["run"]["status"] == "healthy_running" and len(shown["attempts"]) == 1, shown["run"]
    home.fray(b, "control", "stop", run_id, check=True)
    ended = home.wait_ended(b, run_id, timeout=30)
    assert ended["run"]["status"] == "stopped_manual", ended["run"]
    assert not any(procs.alive(pid) for pid in workload)
    assert "no signal came: stopping it" in (home.server / "runs" / run_id / "attempts" / "1" / "wrapper.log").read_text()
