"""The cluster in a box as its users notice it: hosts that share a folder through their own clients, each
blind to the others' processes, with their own names, locks and clocks, on a real Slurm.

Every job here is submitted from a login host with the real `sbatch`, runs on a node host, and writes
through that node's client; assertions on files read the server's side (`box.on_server`), which no
host's cache stands in front of.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.box import procs
from tests.box.box import Box
from tests.conftest import REPO, wait_until
from tests.docs_pages import block_under

pytestmark = pytest.mark.slow

PAGE = "cluster-in-a-box.md"
HOLD_LOCK = ("import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
             "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('locked', flush=True)\nsys.stdin.read()\n")
TRY_LOCK = ("import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
            "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept OSError as e:\n"
            "    print(e.errno)\nelse:\n    print('locked')\n")
TRY_LOCKF = TRY_LOCK.replace("fcntl.flock(fd,", "fcntl.lockf(fd,")  # an fcntl (POSIX) lock


FIND = """import os, sys
for pid in os.listdir("/proc"):
    try:
        cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        continue
    if pid.isdigit() and sys.argv[1].encode() in cmdline and pid != str(os.getpid()):
        print(pid)
"""


def python(code: str, *args: object) -> list[str]:
    return [sys.executable, "-c", code, *map(str, args)]


@pytest.fixture
def folder(box: Box, request: pytest.FixtureRequest) -> Path:
    """A fresh folder in the shared folder for this test, as the hosts see it."""
    server = box.shared / re.sub(r"[^\w-]", "-", request.node.name)
    shutil.rmtree(server, ignore_errors=True)
    server.mkdir()
    return box.seen_by_hosts(server)


def submit(box: Box, node: str, folder: Path, script: str, name: str = "job.sh") -> str:
    """sbatch a script on `node`, from login-a, with its output and working folder in `folder`."""
    box.on_server(folder / name).write_text(script)
    proc = box.login("login-a").run(["sbatch", "--parsable", "-w", node, "-o", folder / "slurm-%j.out",
                                     "--chdir", folder, folder / name], check=True)
    return proc.stdout.strip().split(";")[0]


def test_a_file_written_on_a_node_reaches_a_login_host_late_through_its_cache(box: Box, folder: Path) -> None:
    a, b, n1 = box.login("login-a"), box.login("login-b"), box.node("n1")
    target = folder / "written-on-n1"
    assert a.run(["test", "-e", target]).returncode == 1  # login-a looks; its client remembers "not there"
    n1.run(["sh", "-c", 'echo hello > "$0"', target], check=True)
    written = time.monotonic()
    assert box.on_server(target).read_text() == "hello\n"  # the server has it at once
    assert b.run(["cat", target]).stdout == "hello\n"  # so does a host that had not looked
    assert a.run(["test", "-e", target]).returncode == 1, "login-a's client trusts its cache for a while"
    bound = box.config.cache.missing_names
    wait_until(lambda: a.run(["cat", target]).stdout == "hello\n", timeout=bound + 5, what="login-a to see the file")
    late = time.monotonic() - written
    print(f"login-a saw n1's file {late:.2f}s after it was written (its client caches {bound:g}s)")
    assert late <= bound + 2


def test_a_job_lives_in_its_nodes_namespaces_and_writes_through_its_client(box: Box, folder: Path) -> None:
    a, n1 = box.login("login-a"), box.node("n1")
    marker = f"box-job-{uuid.uuid4().hex[:8]}"
    job = submit(box, "n1", folder, f"""#!/bin/sh
exec {sys.executable} -c '
import json, os, socket, time
json.dump({{"hostname": socket.gethostname(), "pid": os.getpid(), "dev": os.stat(".").st_dev}}, open("job.json", "w"))
time.sleep(300)
' {marker}
""")
    try:
        seen = wait_until(lambda: box.on_server(folder / "job.json").exists()
                          and json.loads(box.on_server(folder / "job.json").read_text() or "null"),
                          timeout=30, what="the job to start")
        assert seen["hostname"] == "n1"
        find = python(FIND, marker)  # the job's processes, by what this host's /proc shows
        assert n1.run(find).stdout.split() == [str(seen["pid"])]  # n1's /proc, n1's own pids
        assert a.run(find).stdout == ""  # login-a's /proc shows none of n1's processes
        assert any(marker in cmd for cmd in n1.processes().values())  # the box sees them, as n1's
        assert not any(marker in cmd for cmd in a.processes().values())
        devices = {h.name: int(h.run(["stat", "-c", "%d", folder], check=True).stdout) for h in (a, n1)}
        assert seen["dev"] == devices["n1"] != devices["login-a"]  # each host its own client; the job used n1's
        assert a.run(["hostname"]).stdout == "login-a\n"
    finally:
        box.slurm.run("scancel", job, check=False)
    wait_until(lambda: not any(marker in cmd for cmd in n1.processes().values()), timeout=30,
               what="the job's processes to end with it")


def test_a_flock_on_one_login_host_does_not_exclude_the_other(box: Box, folder: Path) -> None:
    a, b = box.login("login-a"), box.login("login-b")
    lock = folder / "the.lock"
    holder = a.popen(python(HOLD_LOCK, lock), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        assert a.run(python(TRY_LOCK, lock)).stdout == f"{errno.EWOULDBLOCK}\n"  # on its host, it excludes
        assert b.run(python(TRY_LOCK, lock)).stdout == "locked\n"  # on the other, nothing: node-local locks
    finally:
        holder.communicate(input="", timeout=10)


def test_a_host_without_flock_answers_enosys_to_every_lock_and_the_others_keep_theirs(box: Box, folder: Path) -> None:
    a, b = box.login("login-a"), box.login("login-b")
    b.set_flock(False)
    assert b.run(python(TRY_LOCK, folder / "l")).stdout == f"{errno.ENOSYS}\n"
    assert b.run(python(TRY_LOCKF, folder / "l")).stdout == f"{errno.ENOSYS}\n"  # fcntl locks too
    assert a.run(python(TRY_LOCK, folder / "l")).stdout == "locked\n"
    box.node("n3").set_flock(False)  # a node's jobs get it through the TaskProlog
    job = submit(box, "n3", folder, f"#!/bin/sh\nexec {sys.executable} -c '{TRY_LOCK}' lockfile > tried\n")
    assert box.slurm.wait_job(job, timeout=30)["JobState"] == "COMPLETED"
    assert box.on_server(folder / "tried").read_text() == f"{errno.ENOSYS}\n"
    b.set_flock(True)
    assert b.run(python(TRY_LOCK, folder / "l")).stdout == "locked\n"


def test_a_nodes_clock_offset_is_seen_by_its_jobs_and_not_by_slurmd_or_other_hosts(box: Box, folder: Path) -> None:
    box.node("n2").set_clock_offset(-180)
    script = (f"#!/bin/sh\nexec {sys.executable} -c 'import json, time; "
              "json.dump({\"wall\": time.time()}, open(\"clock.json\", \"w\"))'\n")
    jobs = {}
    for node in ("n1", "n2"):
        (box.on_server(folder) / node).mkdir()
        jobs[node] = submit(box, node, folder / node, script)
    offsets = {}
    for node, job in jobs.items():
        assert box.slurm.wait_job(job, timeout=30)["JobState"] == "COMPLETED"
        written = box.on_server(folder) / node / "clock.json"
        # The file's time is the file server's: the true time at which the job wrote it.
        offsets[node] = json.loads(written.read_text())["wall"] - written.stat().st_mtime
    print(f"clock offsets seen by jobs: {offsets}")
    assert abs(offsets["n2"] + 180) < 2 and abs(offsets["n1"]) < 2
    slurmd = box.slurm.slurmd_pid("n2")
    assert slurmd is not None and b"FRAY_BOX_CLOCK_OFFSET" not in Path(f"/proc/{slurmd}/environ").read_bytes()
    now = float(box.node("n2").run(python("import time; print(time.time())")).stdout)
    assert abs(now - time.time() + 180) < 2  # what a test runs on n2 is skewed too
    assert abs(float(box.login("login-a").run(python("import time; print(time.time())")).stdout) - time.time()) < 2
    box.node("n2").set_clock_offset(0)
    assert abs(float(box.node("n2").run(python("import time; print(time.time())")).stdout) - time.time()) < 2


TICKER = """import subprocess, sys, time
subprocess.Popen(["sleep", "300"])  # a second process: the host stops whole, not one process
while True:
    with open(sys.argv[1], "a") as f:
        f.write("tick\\n")
    time.sleep(0.05)
"""


def test_a_frozen_host_stops_whole_then_thaws_and_a_killed_host_is_left_empty(box: Box, folder: Path) -> None:
    a = box.login("login-a")
    ticks = box.on_server(folder / "ticks")
    ticker = a.popen(python(TICKER, folder / "ticks"))
    wait_until(lambda: len(a.pids()) == 2 and ticks.exists(), what="the ticker and its child")
    frozen = a.freeze()
    assert len(frozen) == 2 and all(procs.state(pid) == "T" for pid in frozen)
    size = ticks.stat().st_size
    a.thaw()
    wait_until(lambda: ticks.stat().st_size > size, what="the thawed ticker to write again")
    a.kill()
    assert a.pids() == []
    assert ticker.wait(timeout=10) == -9  # `enter` dies the death of its command
    assert a.run(["hostname"]).stdout == "login-a\n"  # the host serves new commands


def test_a_host_cut_off_from_the_file_server_blocks_on_the_shared_folder_until_healed(box: Box, folder: Path) -> None:
    a, b = box.login("login-a"), box.login("login-b")
    box.on_server(folder / "f").write_text("x")
    a.partition()
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            a.run(["cat", folder / "f"], timeout=1)
        assert b.run(["cat", folder / "f"]).stdout == "x"
        assert a.run(["hostname"]).stdout == "login-a\n"  # off the shared folder, login-a works
    finally:
        a.heal()
    assert a.run(["cat", folder / "f"], timeout=10).stdout == "x"


def test_a_nodes_slurmd_lives_in_its_host_and_comes_back_after_a_kill(box: Box) -> None:
    n3 = box.node("n3")
    first = box.slurm.slurmd_pid("n3")
    assert first in n3.pids() and first not in box.node("n4").pids()
    assert "NodeHostName=n3 " in box.slurm.run("scontrol", "show", "node", "n3").stdout
    box.slurm.kill_slurmd("n3")
    assert box.slurm.slurmd_pid("n3") is None
    box.slurm.restart_slurmd("n3")
    second = box.slurm.slurmd_pid("n3")
    assert second is not None and second != first and second in n3.pids()
    box.slurm.wait_node(lambda s: s.usable, "n3", timeout=30)


def test_the_pages_start_by_hand_block_starts_a_second_box_and_stops_it(box: Box, tmp_path: Path) -> None:
    block = block_under(PAGE, "Start it by hand")
    env = {**os.environ, "FRAY_BOX_DIR": str(tmp_path / "by-hand"),
           "FRAY_BOX_SLURM_PORT": str(box.config.slurm_port + 10),  # a second box beside the session's
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", block.text], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "login-a\n" in proc.stdout and "n[1-4]" in proc.stdout
    assert not (tmp_path / "by-hand" / "box.json").exists()


def test_the_pages_test_example_runs_on_the_box(box: Box) -> None:
    block = block_under(PAGE, "Use it in a test", lang="python")
    namespace: dict[str, object] = {}
    exec(compile(block.text, f"docs/{PAGE}:{block.line}", "exec"), namespace)
    tests = [f for name, f in namespace.items() if name.startswith("test_") and callable(f)]
    assert tests, "the page's example defines no test"
    for test in tests:
        test(box)  # type: ignore[operator]
