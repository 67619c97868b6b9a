"""One host of the box: its namespaces, the commands run in it, and what a test does to it.

A host is a mount, PID and UTS namespace made by `unshare`, whose PID 1 is the box's `init` (named after
the host, reaping its orphans). Everything run in it goes through the box's `enter` helper, so its
processes see the host's hostname, the host's own client of the shared folder, and a /proc that shows
the host's processes only. The network namespace is the machine's (daemons meet on 127.0.0.1).

What a test can change about a host, each kept in the host's *environment overlay* (HOST_FOLDER/env,
`export NAME=VALUE` lines), which `run`/`popen` add to every command and the box's Slurm TaskProlog
adds to every job task on a node:

- `set_clock_offset(seconds)`: a clock shim on the host's new processes, wall clock only (the monotonic
  clock and file times stay true, as on a machine whose clock is off);
- `set_flock(False)`: the ENOSYS shim, as on a file system mounted without locks.

Both apply to processes started afterwards: the environment is read when a process starts.
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from tests.box import clock, procs
from tests.box.polling import wait_until
from tests.box.tools import Tools

if TYPE_CHECKING:
    from tests.box.share import Cache

Env = Mapping[str, str]
Arg = str | os.PathLike[str]  # a command's argument: a path is passed as its text


@dataclass
class Host:
    """A running host. `init_pid` is its PID 1, by its root-namespace pid."""

    name: str
    role: str  # "login" or "node"
    init_pid: int
    folder: Path  # the box's own files about this host (overlay, logs); on the machine's disk
    tools: Tools
    mount: Path  # where the shared folder is mounted inside it
    sshfs_pid: int | None = None  # its file-system client: in its mount namespace, not its PID namespace
    cache: "Cache | None" = None  # how long its client trusts what it saw (share.py)
    system_env: dict[str, str] = field(default_factory=dict)  # as a login node's /etc would set it: SLURM_CONF
    handles: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)  # ours to reap

    # -- running things in it ---------------------------------------------------------------------------

    def command(self, argv: Sequence[Arg], cwd: str | os.PathLike[str] | None = None) -> list[str]:
        """The argv that runs `argv` inside this host (for a caller with its own subprocess call)."""
        return [str(self.tools.enter), str(self.init_pid), str(cwd or os.getcwd()), *(os.fspath(a) for a in argv)]

    def environ(self, env: Env | None = None, with_overlay: bool = True) -> dict[str, str]:
        """What a command in this host gets: this process's environment, the host's `system_env`, its overlay
        (unless `with_overlay` is False: a system daemon's clock is the machine's), then `env`."""
        added = self.overlay() if with_overlay else {}
        full = {**os.environ, **self.system_env, **added, **(env or {}), "HOSTNAME": self.name}
        preload = [p for p in (added.get("LD_PRELOAD"), (env or {}).get("LD_PRELOAD")) if p]
        if preload:
            full["LD_PRELOAD"] = ":".join(preload)
        return full

    def run(self, argv: Sequence[Arg], env: Env | None = None, cwd: str | os.PathLike[str] | None = None,
            timeout: float = 60, check: bool = False, input: str | None = None,
            with_overlay: bool = True) -> subprocess.CompletedProcess[str]:
        """Run `argv` in this host and wait; text output captured. At the timeout the command is killed."""
        proc = subprocess.run(self.command(argv, cwd), env=self.environ(env, with_overlay), capture_output=True,
                              text=True, timeout=timeout, input=input,
                              stdin=None if input is not None else subprocess.DEVNULL)
        if check and proc.returncode != 0:
            raise AssertionError(f"on {self.name}: {' '.join(os.fspath(a) for a in argv)} exited {proc.returncode}\n"
                                 f"stdout: {proc.stdout}\nstderr: {proc.stderr}")
        return proc

    def popen(self, argv: Sequence[Arg], env: Env | None = None, cwd: str | os.PathLike[str] | None = None,
              **kwargs: Any) -> subprocess.Popen[Any]:
        """Start `argv` in this host. Signals sent to the Popen reach the command; it dies with the Popen's
        process. `pid_of(popen)` is the command's own pid."""
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.Popen(self.command(argv, cwd), env=self.environ(env), **kwargs)

    @staticmethod
    def pid_of(popen: subprocess.Popen[Any], timeout: float = 10) -> int:
        """The root-namespace pid of the command a `popen` started (the Popen's own pid is `enter`'s)."""
        return wait_until(lambda: procs.first_child(popen.pid), timeout=timeout,
                          what=f"the command of enter pid {popen.pid}")

    # -- looking at it ------------------------------------------------------------------------------------

    @property
    def namespace(self) -> str:
        ns = procs.namespace(self.init_pid)
        if ns is None:
            raise RuntimeError(f"host {self.name} is down (its init, pid {self.init_pid}, is gone)")
        return ns

    def alive(self) -> bool:
        return procs.alive(self.init_pid, "init")

    def pids(self) -> list[int]:
        """Its live processes but its init, by their root-namespace pids."""
        return [pid for pid in procs.in_namespace(self.namespace) if pid != self.init_pid]

    def processes(self) -> dict[int, list[str]]:
        """pid -> command line of each of `pids()`."""
        return {pid: procs.cmdline(pid) for pid in self.pids()}

    # -- what a test does to it ---------------------------------------------------------------------------

    def freeze(self, timeout: float = 10) -> list[int]:
        """SIGSTOP every process of the host but its init (a paused VM); returns them.

        Repeated until no process of the host is left running: one may fork while the others stop."""
        stopped: set[int] = set()

        def all_stopped() -> bool:
            running = [pid for pid in self.pids() if procs.state(pid) not in ("T", "t")]
            procs.send(running, signal.SIGSTOP)
            stopped.update(running)
            return not running and all(procs.state(pid) in ("T", "t", None) for pid in stopped)

        wait_until(all_stopped, timeout=timeout, what=f"every process of {self.name} to stop")
        return sorted(stopped)

    def thaw(self) -> None:
        """SIGCONT every process of the host (unlike a resumed VM, a process with a SIGCONT handler notices)."""
        procs.send(self.pids(), signal.SIGCONT)

    def kill(self, timeout: float = 10) -> None:
        """The host crashes: SIGKILL every process of it but its init, which stays to serve new commands (a
        reboot that starts nothing; a node's slurmd too: `box.slurm.restart_slurmd(node)`)."""
        def none_left() -> bool:  # each pass kills what the last one saw fork
            left = self.pids()
            procs.send(left, signal.SIGKILL)
            return not left

        wait_until(none_left, timeout=timeout, what=f"every process of {self.name} to die")

    def partition(self) -> None:
        """The file server becomes unreachable from this host: its client stops answering, and every access
        to the shared folder blocks (as on a `hard` NFS mount) until `heal()`. Processes stay killable."""
        self._client_signal(signal.SIGSTOP)

    def heal(self) -> None:
        self._client_signal(signal.SIGCONT)

    def _client_signal(self, sig: int) -> None:
        if self.sshfs_pid is None:
            raise RuntimeError(f"host {self.name} has no client of the shared folder")
        procs.send([self.sshfs_pid, *procs.children(self.sshfs_pid)], sig)  # sshfs and its ssh

    # -- its environment overlay --------------------------------------------------------------------------

    @property
    def overlay_file(self) -> Path:
        return self.folder / "env"

    def overlay(self) -> dict[str, str]:
        """The variables this host adds to each of its new processes (clock offset, no flock)."""
        try:
            lines = self.overlay_file.read_text().splitlines()
        except FileNotFoundError:
            return {}
        return dict(line.removeprefix("export ").split("=", 1) for line in lines if line.startswith("export "))

    def set_clock_offset(self, seconds: float) -> None:
        """This host's new processes see a wall clock `seconds` off (negative: behind); 0 puts it right."""
        self._set_overlay(clock_offset=seconds, flock=self._flock())

    def clock_offset(self) -> float:
        return float(self.overlay().get(clock.VARIABLE, "0"))

    def set_flock(self, works: bool) -> None:
        """With False, flock()/lockf()/fcntl locks fail with ENOSYS in this host's new processes."""
        self._set_overlay(clock_offset=self.clock_offset(), flock=works)

    def _flock(self) -> bool:
        return str(self.tools.noflock) not in self.overlay().get("LD_PRELOAD", "")

    def _set_overlay(self, clock_offset: float, flock: bool) -> None:
        env: dict[str, str] = {}
        preload = []
        if clock_offset:
            env = clock.environment(clock_offset, self.tools.clockshift)
            preload.append(env.pop("LD_PRELOAD"))
        if not flock:
            preload.append(str(self.tools.noflock))
        if preload:
            env["LD_PRELOAD"] = ":".join(preload)  # a colon: the TaskProlog's `export` takes one word
        text = "".join(f"export {name}={value}\n" for name, value in env.items())
        scratch = self.overlay_file.with_suffix(".new")
        scratch.write_text(text)
        os.replace(scratch, self.overlay_file)  # a job starting now reads the old or the new one, whole


def launch(name: str, role: str, folder: Path, tools: Tools, mount: Path, system_env: dict[str, str],
           timeout: float = 10) -> Host:
    """Start a host: new namespaces around the box's init, named `name`. No shared folder yet (share.py)."""
    folder.mkdir(parents=True, exist_ok=True)
    ready = folder / "ready"
    ready.unlink(missing_ok=True)
    with open(folder / "init.log", "ab") as log:
        unshare = subprocess.Popen(
            ["unshare", "--mount", "--pid", "--uts", "--fork", "--mount-proc", "--propagation", "private",
             str(tools.init), name, str(ready)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True)  # a Ctrl-C in the terminal is for the test run, which then stops the box
    wait_until(lambda: ready.exists() or unshare.poll() is not None, timeout=timeout, what=f"host {name}'s init")
    if unshare.poll() is not None:
        raise RuntimeError(f"host {name} did not start: {(folder / 'init.log').read_text()[-2000:]}")
    init_pid = wait_until(lambda: procs.first_child(unshare.pid), timeout=timeout, what=f"host {name}'s init pid")
    return Host(name=name, role=role, init_pid=init_pid, folder=folder, tools=tools, mount=mount,
                system_env=system_env, handles=[unshare])
