"""A whole box: the file server, the hosts and their clients, the Slurm cluster; started, found, stopped.

`start_box(BoxConfig())` starts one and returns its `Box`; `Box.stop()` leaves nothing behind (no
namespace, mount, slurmd, slurmctld or sshd). A running box writes ROOT/box.json, so that another process
(`python -m tests.box stop`, or a test session reusing a box started by hand) can find it: `attach(root)`.

Layout of ROOT (default /tmp/fray-box, or $FRAY_BOX_DIR):

    server/     the shared folder, server side (`Box.shared`): what the file server stores
    shared/     where every host mounts it (`Box.mount`); an empty folder outside the hosts
    sshd/       the file server's sshd: config, keys, log
    hosts/NAME/ per host: env (its environment overlay), init.log, sshfs.log
    slurm/      the box's Slurm cluster (FRAY_SLURM_DIR of its daemons): etc/, log/, spool/, ...
    box.json    what runs, by pid
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from tests.box import procs, share, slurm
from tests.box.host import Host, launch
from tests.box.polling import wait_until
from tests.box.share import Cache, FileServer
from tests.box.slurm import BoxSlurm
from tests.box.tools import BoxUnavailable, Tools, build, missing
from tests.slurm.fixture import NODES

LOGINS = ("login-a", "login-b")


def default_root() -> Path:
    if os.environ.get("FRAY_BOX_DIR"):
        return Path(os.environ["FRAY_BOX_DIR"])
    return Path(f"{os.environ['FRAY_SLURM_DIR']}-box") if os.environ.get("FRAY_SLURM_DIR") else Path("/tmp/fray-box")


@dataclass(frozen=True)
class BoxConfig:
    root: Path = field(default_factory=default_root)
    slurm_port: int = field(default_factory=slurm.default_port)  # slurmctld; node K's slurmd on port + K
    logins: tuple[str, ...] = LOGINS
    nodes: tuple[str, ...] = NODES
    cache: Cache = Cache()


@dataclass
class Box:
    """A running box: its hosts by name, its file server, its Slurm (`slurm`), how long it took to start."""

    config: BoxConfig
    tools: Tools
    server: FileServer
    hosts: dict[str, Host]
    slurm: BoxSlurm
    started_here: bool  # False: attached to a box another process started (and will stop)
    timings: dict[str, float] = field(default_factory=dict)  # seconds each start phase took
    _sshd: subprocess.Popen[bytes] | None = None
    _slurmctld: subprocess.Popen[bytes] | None = None
    _pids: dict[str, int] = field(default_factory=dict)  # sshd, slurmctld, keeper: of a box we did not start

    @property
    def root(self) -> Path:
        return self.config.root

    @property
    def shared(self) -> Path:
        """The shared folder as the file server stores it (for assertions: no host's cache in the way)."""
        return self.server.export

    @property
    def mount(self) -> Path:
        """Where every host sees the shared folder."""
        return self.config.root / "shared"

    def seen_by_hosts(self, server_path: Path) -> Path:
        """Where the hosts see a path of the shared folder given as the server stores it."""
        return self.mount / Path(server_path).relative_to(self.shared)

    def on_server(self, host_path: Path) -> Path:
        """Where the server stores a path of the shared folder given as the hosts see it."""
        return self.shared / Path(host_path).relative_to(self.mount)

    def host(self, name: str) -> Host:
        try:
            return self.hosts[name]
        except KeyError:
            raise KeyError(f"no host {name!r} in the box (hosts: {', '.join(self.hosts)})") from None

    def login(self, name: str = LOGINS[0]) -> Host:
        host = self.host(name)
        if host.role != "login":
            raise KeyError(f"{name} is a {host.role}, not a login host")
        return host

    def node(self, name: str) -> Host:
        host = self.host(name)
        if host.role != "node":
            raise KeyError(f"{name} is a {host.role}, not a Slurm node")
        return host

    @property
    def logins(self) -> list[Host]:
        return [h for h in self.hosts.values() if h.role == "login"]

    @property
    def nodes(self) -> list[Host]:
        return [h for h in self.hosts.values() if h.role == "node"]

    def remount(self, host: Host | str, cache: Cache) -> None:
        """Give one host a client with other cache times (a login node whose NFS caches a minute, say)."""
        share.remount(host if isinstance(host, Host) else self.host(host), self.server, cache)
        self.save()  # its client's pid changed

    def reset(self) -> None:
        """Undo what a test changed on the hosts: clocks right, locks working, clients answering with the
        box's cache times, processes running (a frozen host thawed). Jobs and files stay."""
        for host in self.hosts.values():
            host.heal()
            host.thaw()
            host.set_clock_offset(0)
            host.set_flock(True)
            if host.cache != self.config.cache:
                self.remount(host, self.config.cache)
        for node in self.nodes:  # a test that killed a slurmd and did not bring it back
            if self.slurm.slurmd_pid(node.name) is None:
                self.slurm.restart_slurmd(node.name)
                self.slurm.wait_node(lambda s: s.usable, node.name, timeout=30)

    def alive(self) -> bool:
        """Whether everything it started still runs, its keeper too (a test session that was killed leaves a
        box nobody will stop: the next one stops it and starts its own)."""
        return (all(h.alive() and procs.alive(h.sshfs_pid, "sshfs") for h in self.hosts.values())
                and procs.alive(self._pid("sshd"), "sshd") and procs.alive(self._pid("slurmctld"), "slurmctld")
                and procs.alive(self._pids.get("keeper", os.getpid())))

    def _pid(self, name: str) -> int:
        handle = {"sshd": self._sshd, "slurmctld": self._slurmctld}[name]
        return handle.pid if handle is not None else self._pids.get(name, 0)

    # -- stopping -----------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop everything the box runs and wait until it is gone. Safe to call twice."""
        if procs.alive(self._pid("slurmctld"), "slurmctld"):
            slurm.stop(self.slurm, self._slurmctld, self._pid("slurmctld"))
        for host in self.hosts.values():  # its init's death takes every process of its PID namespace
            if host.alive():
                procs.send([host.init_pid], signal.SIGKILL)
        for host in self.hosts.values():
            if procs.alive(host.sshfs_pid, "sshfs"):
                share.unmount(host)
        if procs.alive(self._pid("sshd"), "sshd"):
            procs.send([self._pid("sshd")], signal.SIGTERM)
        for handle in self._handles():
            try:
                handle.wait(timeout=10)
            except subprocess.TimeoutExpired:
                handle.kill()
                handle.wait(timeout=5)
        try:  # what is not our child (a box another process started) we can only watch go
            wait_until(lambda: not _leftovers(self), timeout=15, what="the box's processes to exit")
        except AssertionError:
            raise RuntimeError(f"the box left processes running: {_leftovers(self)}") from None
        finally:
            (self.root / "box.json").unlink(missing_ok=True)

    def _handles(self) -> Iterable[subprocess.Popen[bytes]]:
        for host in self.hosts.values():
            yield from host.handles
        yield from (h for h in (self._sshd, self._slurmctld) if h is not None)

    # -- its state file -----------------------------------------------------------------------------------

    def save(self) -> None:
        state = {
            "root": str(self.root), "slurm_port": self.config.slurm_port, "cache": vars(self.config.cache),
            "sshd": {"pid": self._pid("sshd"), "port": self.server.port},
            "slurmctld": self._pid("slurmctld"), "keeper": self._pids.get("keeper", os.getpid()),
            "hosts": [{"name": h.name, "role": h.role, "init_pid": h.init_pid, "sshfs_pid": h.sshfs_pid,
                       "cache": vars(h.cache or self.config.cache)} for h in self.hosts.values()],
        }
        scratch = self.root / "box.json.new"
        scratch.write_text(json.dumps(state, indent=1) + "\n")
        os.replace(scratch, self.root / "box.json")


def _leftovers(box: Box) -> list[str]:
    left = [f"{h.name}: {pid} {procs.comm(pid)}" for h in box.hosts.values() if h.alive()
            for pid in procs.in_namespace(h.namespace)]
    left += [f"{h.name}'s sshfs {h.sshfs_pid}" for h in box.hosts.values() if procs.alive(h.sshfs_pid, "sshfs")]
    left += [f"{name} {box._pid(name)}" for name in ("sshd", "slurmctld") if procs.alive(box._pid(name), name)]
    return left


def start_box(config: BoxConfig | None = None) -> Box:
    """Start a box in `config.root` (wiped first, but for nothing of a box still running there)."""
    config = config or BoxConfig()
    lacking = missing()
    if lacking:
        raise BoxUnavailable("this machine cannot run the cluster in a box; missing: " + "; ".join(lacking))
    previous = load(config.root)
    if previous is not None and previous.alive():
        raise BoxUnavailable(f"a box already runs in {config.root}: `python -m tests.box stop` first")
    if previous is not None:  # what is left of one that died: its processes, its mounts
        previous.stop()
    timings: dict[str, float] = {}
    clock = time.monotonic()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.monotonic()
        timings[name] = round(now - clock, 3)
        clock = now

    tools = build()
    lap("tools")
    for sub in ("server", "shared", "sshd", "hosts", "slurm"):
        shutil.rmtree(config.root / sub, ignore_errors=True)
    server, sshd = share.start_server(config.root / "server", config.root / "sshd")
    slurm.ensure_munge()
    conf = slurm.write_config(config.root / "slurm", config.slurm_port, config.root, config.nodes)
    slurm_root = config.root / "slurm"
    ctld = slurm.start_slurmctld(BoxSlurm(root=slurm_root, conf=conf, env={}))
    lap("sshd, munge, slurmctld")
    hosts: dict[str, Host] = {}
    for name, role in [*((n, "login") for n in config.logins), *((n, "node") for n in config.nodes)]:
        hosts[name] = launch(name, role, config.root / "hosts" / name, tools, config.root / "shared",
                             system_env={"SLURM_CONF": str(conf)})
    cluster = BoxSlurm(root=slurm_root, conf=conf, env={"SLURM_CONF": str(conf)}, started_here=True,
                       nodes=config.nodes, hosts={n: hosts[n] for n in config.nodes})
    box = Box(config=config, tools=tools, server=server, hosts=hosts, slurm=cluster, started_here=True,
              timings=timings, _sshd=sshd, _slurmctld=ctld)
    lap("hosts")
    try:
        # Each client's ssh handshake costs CPU: on two cores, four at a time is as fast as six.
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(lambda h: share.mount(h, server, config.cache), hosts.values()))
        lap("mounts")
        for node in box.nodes:
            slurm.start_slurmd(cluster, node)
        slurm.wait_ready(cluster, ctld)
        lap("slurm nodes")
        box.save()
    except BaseException:
        box.stop()
        raise
    timings["total"] = round(sum(timings.values()), 3)
    return box


def attach(root: Path) -> Box | None:
    """The box running in `root`, as another process started it; None if none runs there whole."""
    box = load(root)
    return box if box is not None and box.alive() else None


def load(root: Path) -> Box | None:
    """The box that `root`'s box.json describes, whether or not it still runs; None without one."""
    try:
        state = json.loads((root / "box.json").read_text())
    except (OSError, ValueError):
        return None
    config = BoxConfig(root=root, slurm_port=state["slurm_port"], cache=Cache(**state["cache"]),
                       logins=tuple(h["name"] for h in state["hosts"] if h["role"] == "login"),
                       nodes=tuple(h["name"] for h in state["hosts"] if h["role"] == "node"))
    tools = build()
    conf = root / "slurm" / "etc" / "slurm.conf"
    hosts = {h["name"]: Host(name=h["name"], role=h["role"], init_pid=h["init_pid"], folder=root / "hosts" / h["name"],
                             tools=tools, mount=root / "shared", sshfs_pid=h["sshfs_pid"], cache=Cache(**h["cache"]),
                             system_env={"SLURM_CONF": str(conf)}) for h in state["hosts"]}
    server = FileServer(export=root / "server", folder=root / "sshd", port=state["sshd"]["port"])
    cluster = BoxSlurm(root=root / "slurm", conf=conf, env={"SLURM_CONF": str(conf)}, nodes=config.nodes,
                       hosts={n: hosts[n] for n in config.nodes})
    box = Box(config=config, tools=tools, server=server, hosts=hosts, slurm=cluster, started_here=False,
              _pids={"sshd": state["sshd"]["pid"], "slurmctld": state["slurmctld"], "keeper": state["keeper"]})
    return box
