"""RemoteCluster: the cluster API of a FRAY_HOME on another machine, reached over SSH.

From a laptop or a notebook, `current_cluster(remote="login-node")` (or
`RemoteCluster("login-node", backend="slurm")`) launches jobs on the cluster
behind that host exactly as FrayCluster does on the login node itself: the
same JobRequest, the same JobInfo, results and tracebacks of callables
included. It is a FrayCluster whose files are on the other side:

- launching writes each run's folder here, in a private staging FRAY_HOME
  (fray.cluster.launching, so everything is checked and serialized before any
  byte travels), uploads the folders over SFTP under hidden names and renames
  them into place only once all are there (a group appears whole or not at
  all, as locally), then makes sure the remote daemon runs;
- polling, waiting and monitoring read meta.json, the call results and the
  logs over the same file session;
- terminating runs `fray control stop` there, so the stop is audited as any.

fray is installed on the remote when missing or older (fray.remote.bootstrap),
and one SSH session (fray.remote.session) serves every call. A pickled result is read only when
the remote file is private (mode 600) and belongs to the owner of the remote
FRAY_HOME, as payloads.load demands locally. Reservations are local to a
FRAY_HOME's daemon and are not offered over SSH: create them from a job.
"""

from __future__ import annotations

import json
import pickle
import posixpath
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path
from typing import Any

from fray.cluster import launching
from fray.cluster.api import ClusterError, JobRequest, Reservation, ReservationConfig
from fray.cluster.fray_cluster import FrayCluster
from fray.core.command_line import JSON_FLAG
from fray.core.model import Meta
from fray.errors import CorruptFileError, StateError
from fray.state.layout import Home

COMMAND_TIMEOUT = 120.0


class RemoteCluster(FrayCluster):
    def __init__(self, host: str, home: str | None = None, namespace: str | None = None, backend: str | None = None,
                 workdir: str | None = None) -> None:
        from fray.remote import session

        self.host = host
        self._ssh = session.connect(host, home)
        self._conn = self._ssh.conn
        self._remote = self._ssh.fray
        self.home = Home(Path(self._remote.home))  # paths on the remote; never opened here
        self.job_id = None
        self.attempt = None
        self.namespace = namespace or "default"
        self.backend = backend or "local"
        self.workdir = workdir or self._remote.home
        self._lock = threading.Lock()  # one file session, used by one call at a time
        self._files: Any = None
        self._owner: int | None = None
        self._check_cloudpickle()

    def _check_cloudpickle(self) -> None:
        """Callables pickled here must load there: the same cloudpickle (major.minor) on both sides."""
        import importlib.metadata

        from fray.remote import command

        python = posixpath.join(posixpath.dirname(self._remote.executable), "python")
        result = command.run(self._conn, [python, "-c", "import cloudpickle; print(cloudpickle.__version__)"],
                             timeout=COMMAND_TIMEOUT)
        here = importlib.metadata.version("cloudpickle")
        there = result.stdout.decode().strip() if result.exit_code == 0 else "none"
        if there.split(".")[:2] != here.split(".")[:2]:
            raise ClusterError(
                f"cloudpickle {there} on {self.host} ({python}) but {here} here: a function pickled here would "
                f"not load there. Install the same version on one side, e.g. `{python} -m pip install "
                f"cloudpickle=={here}` on {self.host}")

    def __repr__(self) -> str:
        return f"RemoteCluster(host={self.host!r}, home={self._remote.home!r}, namespace={self.namespace!r})"

    def launch_family(self) -> launching.Family:
        """What every run launched from here inherits on the host: no parent, this namespace, backend and workdir."""
        return launching.Family(parent_run_id=None, parent_attempt=None, namespace=self.namespace,
                                backend=self.backend, workdir=self.workdir)

    # -- launching -----------------------------------------------------------------------

    def _write(self, requests: list[JobRequest], group_id: str | None = None) -> list[Meta]:
        staging = Path(tempfile.mkdtemp(prefix="fray-launch-"))  # 0700: payloads stay private here too
        try:
            metas = launching.launch(Home(staging), requests, self.launch_family(), group_id=group_id)
            with self._lock:
                self._upload(Home(staging), [m.run_id for m in metas])
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return metas

    def _upload(self, staging: Home, run_ids: list[str]) -> None:
        files = self._session()
        files.makedirs(str(self.home.runs_dir), 0o700)  # private, as fray makes FRAY_HOME's folders
        hidden = []
        for run_id in run_ids:
            target = str(self.home.new_run(run_id).dir)
            files.put_tree(target, *_tree(staging.run(run_id).dir), dir_mode=0o700)
            hidden.append((target, str(self.home.run(run_id).dir)))
        for target, final in hidden:
            files.rename(target, final)

    def ensure_daemon(self) -> None:
        """Start the host's daemon unless one is running (`fray daemon start` there); ClusterError when it cannot."""
        result = self._fray("daemon", "start")
        if result.exit_code != 0:
            raise ClusterError(f"could not start the daemon of {self._remote.home} on {self.host}: "
                               f"{result.stderr.decode(errors='replace').strip() or result.stdout.decode()}")

    def _stop(self, job_id: str) -> None:
        result = self._fray("control", "stop", job_id)
        if result.exit_code != 0:
            error = _error_message(result.stdout) or result.stderr.decode(errors="replace").strip()
            if "already ended" not in error:
                raise ClusterError(f"stopping {job_id} on {self.host}: {error}")

    def _fray(self, *argv: str) -> Any:
        return self._ssh.run([*argv, JSON_FLAG], timeout=COMMAND_TIMEOUT)

    # -- the remote's files --------------------------------------------------------------

    def _session(self) -> Any:
        from fray.remote.files import open_files

        if self._files is None:
            self._files = open_files(self._conn)
        return self._files

    def _read_bytes(self, path: Path, offset: int = 0) -> bytes:
        with self._lock:
            return self._session().read(str(path), offset)

    def _read_json(self, path: Path, kind: str) -> Any:
        try:
            data = self._read_bytes(path)
        except FileNotFoundError:
            return None
        try:
            return json.loads(data)
        except ValueError as exc:
            raise CorruptFileError(path, f"not JSON ({exc})", None) from None

    def _load_value(self, path: Path) -> Any:
        with self._lock:
            files = self._session()
            if self._owner is None:
                self._owner = files.stat(str(self.home.root)).uid
            info = files.stat(str(path))
            if not stat.S_ISREG(info.mode) or info.uid != self._owner or stat.S_IMODE(info.mode) & 0o077:
                raise StateError(f"refusing to unpickle {self.host}:{path}: not a private file (mode "
                                 f"{stat.S_IMODE(info.mode):o}, uid {info.uid}) of the owner of {self.home.root}")
            data = files.read(str(path))
        return pickle.loads(data)

    def _run_ids(self) -> list[str]:
        with self._lock:
            try:
                names = self._session().listdir(str(self.home.runs_dir))
            except FileNotFoundError:
                return []
        return sorted(n for n in names if not n.startswith("."))

    # -- not over SSH --------------------------------------------------------------------

    def create_reservation(self, config: ReservationConfig) -> str:
        raise ClusterError("reservations are made by a job on the cluster, not over SSH: launch a job that "
                           "calls current_cluster().create_reservation(...)")

    def get_reservation(self, reservation_id: str) -> Reservation | None:
        raise ClusterError("reservations are not visible over SSH; query them from a job on the cluster")

    def release_reservation(self, reservation_id: str) -> None:
        raise ClusterError("reservations are released by a job on the cluster, not over SSH")

    def _check_reservation(self, request: JobRequest) -> None:
        if request.reservation is not None:
            raise ClusterError(f"job {request.name!r}: reservations cannot be used over SSH")


def _tree(local: Path) -> tuple[list[tuple[Path, str]], list[str]]:
    """The files (with their paths relative to `local`) and the folders under `local`, for put_tree."""
    files: list[tuple[Path, str]] = []
    folders: list[str] = []
    for dirpath, dirnames, filenames in os.walk(local):
        rel = os.path.relpath(dirpath, local)
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        folders += [prefix + d for d in sorted(dirnames)]
        files += [(Path(dirpath) / f, prefix + f) for f in sorted(filenames)]
    return files, folders


def _error_message(stdout: bytes) -> str | None:
    try:
        return json.loads(stdout)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return None
