"""`fray doctor`: the cluster checked as fray needs it, each finding with its fix (schemas/cli-doctor.json).

It measures, from this login host:

- FRAY_HOME's file system (its kind and mount options: what caching and locking to expect) and whether
  the operations fray's writes rely on work there (rename over a file, O_EXCL create, link);
- flock on this host, and across login hosts: each doctor holds a probe lock for as long as it runs and
  says so in its host's record; one that sees another host's doctor holding it and still gets the lock has
  found node-local locks (run `fray doctor` on two login hosts at once);
- the daemon: who serves, judged on this host's clock, and whether its lease timeout fits the latency;
- a probe job on the backend (through a real run, as any script): it says where it runs and with which
  Python, whether `from fray import report` works there, and answers files this host writes, so the
  round trip login -> node -> login is timed on this host's clock and the node's clock offset taken from
  it (NTP-style: the node's time against the middle of the round trip);
- every node's clock offset the daemon measured from heartbeats (nodes.json).

The conclusions are fray.core.doctor_rules'.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Callable

from fray.core import doctor_rules as rules
from fray.core.doctor_rules import Finding
from fray.daemon import lease
from fray.errors import FrayError
from fray.state import file_system, store, this_host
from fray.state.config import load_config
from fray.state.layout import Home

ROUNDS = 5
LOCK_WATCH_SEC = 0.6  # how long another host's probe record is watched for a change (it is rewritten every 0.2 s)

PROBE = '''#FRAY --backend {backend} --max-retries 0 --max-retries-preemption 0 --name fray-doctor
"""fray doctor's probe: where it runs, with what, and answers each ping the login host writes."""
import json, os, socket, sys, time

folder = {folder!r}


def write(name, document):
    with open(os.path.join(folder, name + ".tmp"), "w") as handle:
        json.dump(document, handle)
    os.replace(os.path.join(folder, name + ".tmp"), os.path.join(folder, name))


try:
    from fray import report  # noqa: F401 - the job-side helpers, whether or not fray is installed here
    importable, error = True, None
except Exception as exc:
    importable, error = False, repr(exc)
write("node.json", {{"host": socket.gethostname(), "python": sys.version.split()[0], "executable": sys.executable,
                    "report_importable": importable, "report_error": error, "time": time.time()}})
for k in range({rounds}):
    deadline = time.monotonic() + {timeout}
    while not os.path.exists(os.path.join(folder, f"ping-{{k}}")) and time.monotonic() < deadline:
        time.sleep(0.01)
    write(f"pong-{{k}}.json", {{"time": time.time()}})
'''


def run(home: Home, backend: str | None = None, job: bool = True, timeout: float = 120.0,
        on_step: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    store.ensure_home(home)
    config = load_config(home)
    backend = backend or config.get("default_backend", "local")
    daemon_config = config.get("daemon", {})
    file_latency = float(daemon_config.get("file_latency_sec", 60.0))
    findings: list[Finding] = []
    mount = file_system.mount_of(home.root)
    findings.append(rules.file_system(mount.fstype, mount.source, mount.options, backend))
    findings.append(rules.atomic_operations(file_system.atomic_failures(home.root)))
    measured: dict[str, Any] = {"round_trips_sec": [], "clock_offsets_sec": {}, "node": None}
    run_id = None
    with LockProbe(home) as probe:
        if job:
            on_step(f"probe job on {backend}: submitting")
            run_id, report, trips, offset = _probe_job(home, backend, timeout, on_step)
            measured.update(round_trips_sec=trips, node=report)
            if report is not None and offset is not None:
                measured["clock_offsets_sec"][report["host"]] = round(offset, 3)
        findings.append(rules.locks(probe.works, *probe.other()))
    health, record = lease.confirmed(home)
    timeout_sec = float((record or {}).get("lease_timeout_sec") or daemon_config.get("lease_timeout_sec", 15.0))
    trips = measured["round_trips_sec"]
    findings.append(rules.daemon(health.state, health.detail, timeout_sec, max(trips) if trips else None))
    if job:
        findings.append(rules.round_trip(trips, file_latency, backend))
        findings.append(rules.node_python(measured["node"]))
    measured["clock_offsets_sec"] = {**_daemon_offsets(home), **measured["clock_offsets_sec"]}
    findings.append(rules.clocks(measured["clock_offsets_sec"]))
    return {"home": str(home.root), "host": this_host.hostname(), "backend": backend,
            "verdict": rules.verdict(findings),
            "mount": {"point": mount.point, "fstype": mount.fstype, "source": mount.source, "options": mount.options},
            "findings": [{"check": f.check, "status": f.status, "summary": f.summary, "fix": f.fix} for f in findings], "measured": measured, "run_id": run_id}


def _probe_job(home: Home, backend: str, timeout: float,
               on_step: Callable[[str], None]) -> tuple[str | None, dict[str, Any] | None, list[float], float | None]:
    """Submit the probe, wait for it to report, then time ROUNDS round trips: (run id, its report, seconds per
    round, the node's clock offset from the fastest round)."""
    from fray.ops import control, submit

    folder = home.doctor(f"job-{secrets.token_hex(4)}")
    store.make_dirs(folder)
    script = folder / "probe.py"
    script.write_text(PROBE.format(backend=backend, folder=str(folder), rounds=ROUNDS, timeout=timeout))
    try:
        meta = submit.submit(home, script, overrides={"backend": backend})
    except FrayError as exc:
        on_step(f"probe job: not submitted: {exc}")
        return None, None, [], None
    submit.ensure_daemon(home, meta)
    trips: list[float] = []
    best: tuple[float, float] | None = None  # (round trip, offset)
    try:
        report = _wait_for_json(folder / "node.json", timeout)
        if report is None:
            on_step(f"probe job: no answer within {timeout:.0f}s (`fray status {meta.run_id}`)")
            return meta.run_id, None, [], None
        on_step(f"probe job: running on {report['host']}; timing {ROUNDS} round trips")
        for k in range(ROUNDS):
            sent = time.time()
            (folder / f"ping-{k}").write_text("")
            answer = _wait_for_json(folder / f"pong-{k}.json", min(timeout, 60.0))
            if answer is None:
                break
            back = time.time()
            trips.append(round(back - sent, 3))
            offset = answer["time"] - (sent + back) / 2
            if best is None or back - sent < best[0]:
                best = (back - sent, offset)
    finally:
        try:
            control.request(home, meta.run_id, "stop")  # it ends by itself; a probe stuck in a queue must not linger
        except FrayError:
            pass
        shutil.rmtree(folder, ignore_errors=True)
    return meta.run_id, report, trips, best[1] if best else None


def _wait_for_json(path: Path, timeout: float) -> dict[str, Any] | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return json.loads(path.read_bytes())  # type: ignore[no-any-return]
        except (FileNotFoundError, ValueError):
            time.sleep(0.01)
    return None


def _daemon_offsets(home: Home) -> dict[str, float]:
    try:
        inventory = store.read_json(home.nodes, "nodes") or {}
    except FrayError:
        return {}
    return {node: entry["offset_sec"] for node, entry in inventory.get("clock_offsets", {}).items()}


class LockProbe:
    """Holds the probe lock (flock) while the doctor runs, and says so in this host's record, rewritten every 0.2 s
    so that a doctor on another host can tell it is live; `other()` is what this host made of another's."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self.path = home.doctor(f"lock-{this_host.hostname()}.json")
        self.lock_file = home.doctor("probe.lock")
        self.works = "yes"
        self.holding = False
        self._fd: int | None = None
        self._stop = threading.Event()
        self._writes = 0
        self._seen: dict[str, bool] = {}  # host -> whether its doctor held the lock, for each seen running
        self._writes_seen: dict[str, Any] = {}

    def __enter__(self) -> "LockProbe":
        store.make_dirs(self.path.parent)
        self.works = file_system.flock_works(self.lock_file)
        if self.works == "yes":
            import fcntl

            self._fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.holding = True
            except BlockingIOError:
                self.holding = False  # held by a doctor of another host (coherent locks), or of this one
        self._write()
        threading.Thread(target=self._keep, name="fray-doctor-lock", daemon=True).start()
        return self

    def other(self) -> tuple[str | None, bool | None]:
        """(another host whose doctor ran while this one did, whether the lock kept the two apart), or (None, None)."""
        if not self._seen:
            time.sleep(LOCK_WATCH_SEC)  # a doctor started elsewhere an instant ago: give its record a write or two
            self._look()
        if not self._seen or self.works != "yes":
            return None, None
        host = sorted(self._seen)[0]
        return host, not (self.holding and self._seen[host])  # both held it at once: node-local

    def _look(self) -> None:
        """Note each other host whose record changed since the last look (its doctor runs): whether it holds."""
        for record in self.path.parent.glob("lock-*.json"):
            if record == self.path:
                continue
            try:
                found = json.loads(record.read_bytes())
            except (OSError, ValueError):
                continue
            host = record.stem[len("lock-"):]
            if host in self._writes_seen and self._writes_seen[host] != found.get("writes"):
                self._seen[host] = bool(found.get("holding"))
            self._writes_seen[host] = found.get("writes")

    def _write(self) -> None:
        self._writes += 1
        try:
            store.write_json(self.path, {"host": this_host.hostname(), "pid": os.getpid(), "writes": self._writes,
                                         "holding": self.holding}, "doctor-lock", sync=False)
        except OSError:
            pass

    def _keep(self) -> None:
        """Rewrite this host's record, and look at the others', every 0.2 s while the doctor runs."""
        while not self._stop.wait(0.2):
            self._write()
            self._look()

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._fd is not None:
            os.close(self._fd)
        try:
            os.unlink(self.path)
        except OSError:
            pass
