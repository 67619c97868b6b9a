"""The cluster in a box: this machine as a cluster of separate hosts sharing one folder, for fray's tests.

A file server (a folder served by a real sshd on 127.0.0.1), two login hosts and four Slurm nodes. Each
host is its own mount, PID and UTS namespace, with its own sshfs client of the shared folder mounted at
the same path on every host (its own caches; node-local locks), its own /proc, its own hostname, and
optionally its own clock offset or no working flock. Each node's slurmd runs inside its host, so jobs live
there. docs/cluster-in-a-box.md is the guide; in short:

    def test_something(box):                        # tests/box/plugin.py: `cluster_box` (session), `box`
        a, b, n2 = box.login("login-a"), box.login("login-b"), box.node("n2")
        a.run(["fray", "daemon", "status", "--json"], env={"FRAY_HOME": str(box.mount / "home")})
        p = a.popen(["sleep", "60"]); a.pid_of(p)  # a Popen inside login-a; the command's own pid
        a.pids(), a.processes()                     # login-a's processes, by root-namespace pid
        n2.set_clock_offset(-300)                   # n2's new processes (and jobs) run 5 minutes behind
        b.set_flock(False)                          # flock/fcntl locks answer ENOSYS on login-b
        a.freeze(); a.thaw(); a.kill()              # a paused host, resumed; a crashed one (left empty)
        a.partition(); a.heal()                     # login-a's client stops answering, then answers
        box.remount(a, Cache(missing_names=30))     # login-a learns of new files up to 30 s late
        job = box.slurm.sbatch("-w", "n2", "--wrap", "hostname")   # tests.slurm.fixture.SlurmCluster
        box.slurm.wait_job(job); box.slurm.kill_slurmd("n2"); box.slurm.restart_slurmd("n2")
        box.shared, box.mount                       # the folder on the server; where the hosts see it

By hand: `python -m tests.box start|status|env|shell HOST|run HOST -- CMD|stop`.

Modules, one job each:
    box.py      a whole box: start, find (box.json), stop       plugin.py    the pytest fixtures
    host.py     one host: run in it, look at it, act on it      share.py     the file server and the clients
    slurm.py    the box's Slurm (slurmd inside node hosts)      clock.py     a clock shim for offsets
    procs.py    what /proc says about the box's processes       tools.py     the C helpers (c/), built by gcc
    polling.py  waiting until a deadline, without pytest        fray_on_box.py  fray on the box, for scenarios
    __main__.py the command line
"""

from __future__ import annotations

from typing import Any

__all__ = ["Box", "BoxConfig", "Cache", "FrayHome", "Host", "attach", "start_box"]


def __getattr__(name: str) -> Any:
    # Lazily: pytest imports this package as `box` when it collects tests/box/test_*.py; importing the
    # box's modules then would load a second copy of them beside `tests.box.*`.
    if name in ("Box", "BoxConfig", "attach", "start_box"):
        from tests.box import box

        return getattr(box, name)
    if name == "Cache":
        from tests.box.share import Cache

        return Cache
    if name == "Host":
        from tests.box.host import Host

        return Host
    if name == "FrayHome":
        from tests.box.fray_on_box import FrayHome

        return FrayHome
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
