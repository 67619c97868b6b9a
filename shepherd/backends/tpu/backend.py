"""The TPU backend: one slice per attempt, created with gcloud, the wrapper started on every host.

submit    create the slice (`--async`), zones in order: quota/capacity -> next zone.
snapshot  one `tpu-vm list` per zone, all zones in parallel; READY and not yet
          launched -> `ssh --worker=all` in the background (never waited on);
          PREEMPTED/TERMINATED/unhealthy or missing -> gone as a preemption, and the
          slice is deleted; fray-labelled slices no tracked attempt owns (leaks, or
          a finished attempt's) are deleted in the same batch.
cancel    delete the slices, in parallel.
Everything it needs to find or launch a slice again is in the attempt's reference,
so a restarted daemon adopts its slices by name and label and creates none twice.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable

from fray.backends import external
from fray.backends.base import AttemptKey, CancelTarget, Node, SubmitRequest, Tracked
from fray.backends.tpu import commands, launch, parse
from fray.backends.tpu.calls import CloudCalls
from fray.backends.tpu.topology import shape
from fray.core.model import Cause
from fray.core.observation import BackendView
from fray.errors import BackendError
from fray.state import store
from fray.state.layout import Home

DEFAULTS: dict[str, Any] = {"poll_interval_sec": 5.0, "workers": 16, "create_rate": 10.0,
                            "command_timeout_sec": 120.0, "python": None}
LAUNCHED = "tpu-launched"  # marker in the attempt folder: the ssh that starts the wrappers was sent


class TpuBackend:
    name = "tpu"
    poll_interval_sec = DEFAULTS["poll_interval_sec"]
    # Looked at every cycle, even with no attempt in flight: a finished attempt's slice is deleted there.
    snapshot_when_idle = True

    def __init__(self, home: Home, config: dict[str, Any] | None = None,
                 runner: external.Runner = external.run) -> None:
        self.home = home
        settings = {**DEFAULTS, **(config if config is not None else _tpu_config(home))}
        self.python = str(settings.get("python") or sys.executable)
        self.poll_interval_sec = float(settings["poll_interval_sec"])
        self.calls = CloudCalls(runner, workers=int(settings["workers"]), create_rate=float(settings["create_rate"]),
                                timeout=float(settings["command_timeout_sec"]))
        self._launches: dict[str, Future] = {}  # slice name -> its ssh, running in the pool
        self._zones_seen: set[str] = set(settings.get("zones", []))  # where leaks may be

    @classmethod
    def for_daemon(cls, home: Home, on_attempt_exit: Callable[[], None] | None = None) -> "TpuBackend":
        return cls(home)

    def capacity(self) -> None:
        return None  # the cloud queues (or refuses) by itself

    def nodes(self) -> list[Node]:
        return []

    def submit(self, request: SubmitRequest) -> dict[str, Any]:
        spec = request.spec
        if not spec.tpu or not spec.zones or not spec.runtime_version:
            raise BackendError("the tpu backend needs --tpu TYPE, --zone Z and --runtime-version V", temporary=False)
        try:
            hosts = shape(spec.tpu).hosts
        except ValueError as exc:
            raise BackendError(str(exc), temporary=False) from exc
        store.make_dirs(request.attempt_dir)
        refused = []
        for zone in spec.zones:
            wanted = commands.SliceRequest(request.key.run_id, request.key.attempt, zone, spec.tpu,
                                           spec.runtime_version, spec.provisioning, spec.queued)
            [result] = self.calls.run_all([commands.create(wanted)])
            name = commands.slice_name(request.key.run_id, request.key.attempt)
            if result.ok or "ALREADY_EXISTS" in result.stderr:
                self._zones_seen.add(zone)
                return {"slice": name, "zone": zone, "queued": spec.queued, "hosts": hosts,
                        "attempt_dir": str(request.attempt_dir),
                        "launch": launch.host_command(self.python, request, hosts)}
            if not parse.is_capacity_error(result.stderr):
                raise BackendError(f"creating slice {name} in {zone}: {result.describe()}")
            refused.append(f"{zone}: {result.describe()}")
        # Every zone refused for quota or capacity: temporary, the daemon backs off and tries again.
        raise BackendError("no zone had capacity: " + "; ".join(refused))

    def snapshot(self, tracked: list[Tracked]) -> dict[AttemptKey, BackendView]:
        zones = sorted(self._zones_seen | {t.ref["zone"] for t in tracked if t.ref})
        results = self.calls.run_all([commands.list_nodes(z) for z in zones])
        listed: dict[tuple[str, str], parse.Slice] = {}
        answered: set[str] = set()
        for zone, result in zip(zones, results):
            if result.ok:
                answered.add(zone)
                listed.update({(s.zone or zone, s.name): s for s in parse.parse_nodes(result.stdout)})
        views: dict[AttemptKey, BackendView] = {}
        to_delete: list[list[str]] = []
        owned: set[tuple[str, str]] = set()
        for item in tracked:
            ref = item.ref
            if not ref or "slice" not in ref:
                continue
            where = (ref["zone"], ref["slice"])
            owned.add(where)
            if ref["zone"] not in answered:
                views[item.key] = BackendView("unknown", ref=ref, detail="tpu-vm list failed")
                continue
            node = listed.get(where)
            if node is None:
                views[item.key] = BackendView("gone", ref=ref, detail="slice missing", cause=Cause.PREEMPTED.value)
                continue
            reading = parse.read_slice(node)
            if reading.phase == "lost":
                to_delete.append(commands.delete(node.name, ref["zone"]))
                views[item.key] = BackendView("gone", node=node.name, ref=ref, detail=reading.detail,
                                              cause=Cause.PREEMPTED.value)
            elif reading.phase == "ready":
                self._launch(node, ref)
                views[item.key] = BackendView("running", node=node.name, ref=ref, detail=node.state)
            else:
                views[item.key] = BackendView("pending", node=node.name, ref=ref, detail=node.state)
        # Leaks: fray's label, no tracked attempt (a finished attempt's slice, or one from a crash).
        to_delete += [commands.delete(name, zone) for (zone, name), node in listed.items()
                      if (zone, name) not in owned and node.run_id and node.state != "DELETING"]
        if to_delete:
            self._background(to_delete)
        return views

    def _launch(self, node: parse.Slice, ref: dict[str, Any]) -> None:
        marker = Path(ref["attempt_dir"]) / LAUNCHED
        if marker.exists() or node.name in self._launches or not node.ips:
            return
        store.write_bytes_atomic(marker, f"{time.time()}\n".encode())
        command = launch.with_host0(ref["launch"], node.ips[0])
        self._launches[node.name] = self.calls.submit(commands.ssh_all(node.name, ref["zone"], command))

    def _background(self, argvs: list[list[str]]) -> None:
        for argv in argvs:
            self.calls.submit(argv)

    def cancel(self, targets: list[CancelTarget]) -> None:
        argvs = [commands.delete(t.ref["slice"], t.ref["zone"]) for t in targets if t.ref and "slice" in t.ref]
        if argvs:
            self._background(argvs)


def _tpu_config(home: Home) -> dict[str, Any]:
    from fray.state.config import load_config

    return load_config(home).get("tpu", {})
