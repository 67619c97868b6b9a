"""The TPU backend: one slice per attempt, created with gcloud, the wrapper started on every host.

submit    create the slice (`--async`), zones in order: quota/capacity -> next zone.
snapshot  one `tpu-vm list` per zone, all zones in parallel; READY and not yet
          launched -> `ssh --worker=all` in the background (never waited on); a
          launched slice whose host 1..N-1 lost its heartbeat or failed (`hosts`) -> gone;
          PREEMPTED/TERMINATED/unhealthy or missing -> gone as a preemption, and the
          slice is deleted; this home's slices (label `fray-home`) that no tracked
          attempt owns (leaks, or a finished attempt's) are deleted in the same batch;
          another home's slices in the same project are never listed, so never touched.
cancel    delete the slices, in parallel.
Everything it needs to find or launch a slice again is in the attempt's reference,
so a restarted daemon adopts its slices by name and label and creates none twice.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from fray.backends import cli_health, external
from fray.backends.protocol import AttemptKey, CancelTarget, Node, SubmitRequest, Tracked
from fray.backends.tpu import command_lines, hosts, inventory, launch, parse
from fray.backends.tpu.calls import CloudCalls
from fray.core.placement.tpu import place_on_slice
from fray.core.model import Cause
from fray.core.observation import BackendView, ViewState
from fray.errors import BackendError
from fray.state import identity, store
from fray.state.layout import Home
from fray.wrapper import contract

DEFAULTS: dict[str, Any] = {"poll_interval_sec": 5.0, "workers": 16, "create_rate": 10.0,
                            "command_timeout_sec": 120.0, "python": None, "records": contract.RECORDS_RENAME}
# An --async create may take this long to show in `tpu-vm list`; missing before that is not gone.
LIST_LAG_SEC = 60.0
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
        self.records = str(settings["records"])  # how the hosts write into FRAY_HOME (docs/tpu.md)
        self.poll_interval_sec = float(settings["poll_interval_sec"])
        self.nodes_every_sec: float | None = self.poll_interval_sec  # the hosts come from the last list: free to ask each cycle
        self._listed: dict[str, parse.Slice] = {}  # this home's slices as the last list showed them
        self.cli = cli_health.WatchedRunner(runner)  # gcloud failing every call is shown to people
        self.calls = CloudCalls(self.cli, workers=int(settings["workers"]), create_rate=float(settings["create_rate"]),
                                timeout=float(settings["command_timeout_sec"]))
        self._launches: dict[str, Future] = {}  # slice name -> its ssh, running in the pool
        self._creates: dict[str, Future] = {}  # slice name -> its create (zones in order), in the pool
        self._cancelled: set[str] = set()  # slices this daemon asked to delete: missing from a list is gone
        self._zones_seen: set[str] = set(settings.get("zones", []))  # where leaks may be
        # Labels this home's slices; lists show only those, so another home's are never taken for leaks.
        self.home_id = identity.home_id(home)

    @classmethod
    def for_daemon(cls, home: Home, on_attempt_exit: Callable[[], None] | None = None) -> "TpuBackend":
        return cls(home)

    def capacity(self) -> None:
        return None  # the cloud queues (or refuses) by itself

    def nodes(self) -> list[Node]:
        """The hosts of this home's slices as the last snapshot listed them (`fray nodes`)."""
        return inventory.host_nodes(self._listed.values())

    def submit(self, request: SubmitRequest) -> dict[str, Any]:
        """Check the request and start the create in the background; the snapshot reports how it went.

        Never waits on the cloud: fifty resubmissions after a preemption storm cost
        fifty queued calls, not fifty round trips in a row.
        """
        spec = request.spec
        if not spec.tpu or not spec.zones or not spec.runtime_version:
            raise BackendError("the tpu backend needs --tpu TYPE, --zone Z and --runtime-version V", temporary=False)
        try:
            host_of_task = place_on_slice(spec)  # task i -> the host with tpu-worker-id i, or why not
        except ValueError as exc:
            raise BackendError(str(exc), temporary=False) from exc
        store.make_dirs(request.attempt_dir)
        name = command_lines.slice_name(request.key.run_id, request.key.attempt)
        wanted = [command_lines.SliceRequest(request.key.run_id, request.key.attempt, zone, spec.tpu,
                                        spec.runtime_version, self.home_id, spec.provisioning, spec.queued)
                  for zone in spec.zones]
        self._zones_seen.update(spec.zones)
        self._creates[name] = self.calls.pool.submit(self._create, wanted)
        return {"slice": name, "zones": list(spec.zones), "queued": spec.queued, "hosts": len(host_of_task),
                "host_of_task": list(host_of_task),
                "attempt_dir": str(request.attempt_dir),
                "launch": launch.host_command(self.python, request, host_of_task, records=self.records)}

    def _create(self, wanted: list[command_lines.SliceRequest]) -> _Created:
        """Zones in order: quota or capacity -> the next; any other refusal ends the try."""
        refused = []
        for request in wanted:
            result = self.calls.call(command_lines.create(request))
            if result.ok or "ALREADY_EXISTS" in result.stderr:
                return _Created(request.zone, None, time.monotonic())
            refused.append(f"{request.zone}: {result.describe()}")
            if not parse.is_capacity_error(result.stderr):
                return _Created(None, "; ".join(refused), time.monotonic(), parse.is_config_error(result.stderr))
        return _Created(None, "; ".join(refused), time.monotonic())

    def snapshot(self, tracked: list[Tracked]) -> dict[AttemptKey, BackendView]:
        zones = sorted(self._zones_seen | {z for t in tracked if t.ref for z in _zones_of(t.ref)})
        results = self.calls.run_all([command_lines.list_nodes(z, self.home_id) for z in zones])
        by_name: dict[str, parse.Slice] = {}
        answered: set[str] = set()
        for zone, result in zip(zones, results):
            if result.ok:
                answered.add(zone)
                by_name.update({s.name: dataclasses.replace(s, zone=s.zone or zone)
                                for s in parse.parse_nodes(result.stdout)})
        # A zone whose list failed keeps its slices from before: hosts do not vanish from `fray nodes` for that.
        self._listed = {**{n: s for n, s in self._listed.items() if s.zone not in answered}, **by_name}
        queued = self._queued_resources(tracked)
        views: dict[AttemptKey, BackendView] = {}
        to_delete: list[list[str]] = []
        owned: set[str] = set()
        for item in tracked:
            ref = item.ref
            if not ref or "slice" not in ref:
                continue
            owned.add(ref["slice"])
            node = by_name.get(ref["slice"])
            if node is None and ref["slice"] in queued:
                # Queued mode: no node until the queued resource is provisioned.
                reading = parse.read_queued(queued[ref["slice"]])
                if reading.phase == "lost":
                    to_delete.append(command_lines.delete(queued[ref["slice"]].name, queued[ref["slice"]].zone, queued=True))
                views[item.key] = BackendView(ViewState.GONE if reading.phase == "lost" else "pending", ref=ref,
                                              detail=reading.detail,
                                              cause=Cause.PREEMPTED.value if reading.phase == "lost" else None)
                continue
            if node is None:
                views[item.key] = self._not_listed(ref, answered)
                continue
            reading = parse.read_slice(node)
            if reading.phase == "lost":
                to_delete.append(_delete(node))
                views[item.key] = BackendView(ViewState.GONE, node=node.name, ref=ref, detail=reading.detail,
                                              cause=Cause.PREEMPTED.value)
            elif reading.phase == "ready":
                self._launch(node, ref)
                lost = self._host_lost(ref, item)
                if lost is not None:
                    to_delete.append(_delete(node))
                    views[item.key] = BackendView(ViewState.GONE, node=node.name, ref=ref, detail=lost.detail,
                                                  cause=lost.cause)
                else:
                    views[item.key] = BackendView(ViewState.RUNNING, node=node.name, ref=ref, detail=node.state)
            else:
                views[item.key] = BackendView(ViewState.PENDING, node=node.name, ref=ref, detail=node.state)
        # Leaks: fray's label, no tracked attempt (a finished attempt's slice, or one from a crash).
        to_delete += [_delete(node) for name, node in by_name.items()
                      if name not in owned and node.run_id and node.state != "DELETING"
                      and not self._create_running(name)]
        for argv in to_delete:
            self.calls.pool.submit(self.calls.call, argv)
        self._cancelled &= owned  # an attempt no longer tracked needs no memory of its cancel
        return views

    def _queued_resources(self, tracked: list[Tracked]) -> dict[str, parse.QueuedResource]:
        """Node id -> its queued resource, listed only in the zones of attempts created in queued mode."""
        zones = sorted({z for t in tracked if t.ref and t.ref.get("queued") for z in _zones_of(t.ref)})
        found: dict[str, parse.QueuedResource] = {}
        for result in self.calls.run_all([command_lines.list_queued(z) for z in zones]):
            if result.ok:
                found.update({node: q for q in parse.parse_queued(result.stdout) for node in q.node_ids})
        return found

    def _not_listed(self, ref: dict[str, Any], answered: set[str]) -> BackendView:
        """A slice in no list: still being created, refused everywhere, or gone."""
        if not set(_zones_of(ref)) <= answered:
            return BackendView(ViewState.UNKNOWN, ref=ref, detail="tpu-vm list failed")
        if ref["slice"] in self._cancelled:
            return BackendView(ViewState.GONE, ref=ref, detail="slice deleted")
        future = self._creates.get(ref["slice"])
        if future is not None and not future.done():
            return BackendView(ViewState.PENDING, ref=ref, detail="creating the slice")
        created = future.result() if future is not None else None
        if created is not None and created.zone is None:
            cause = Cause.CONFIG_REFUSED if created.final else Cause.SUBMIT_FAILED
            return BackendView(ViewState.GONE, ref=ref, detail=f"no zone would create the slice: {created.refused}",
                               cause=cause.value)
        if created is not None and time.monotonic() - created.at < LIST_LAG_SEC:
            return BackendView(ViewState.PENDING, ref=ref, detail="created, not listed yet")
        return BackendView(ViewState.GONE, ref=ref, detail="slice missing", cause=Cause.PREEMPTED.value)

    def _create_running(self, name: str) -> bool:
        future = self._creates.get(name)
        return future is not None and not future.done()

    def _host_lost(self, ref: dict[str, Any], item: Tracked) -> hosts.Verdict | None:
        """Hosts 1..N-1 of a launched multi-host slice: one lost or failed ends the attempt."""
        count = int(ref.get("hosts") or 1)
        launched_at = store.read_heartbeat(Path(ref["attempt_dir"]) / LAUNCHED)
        if count <= 1 or launched_at is None or item.spec is None:
            return None  # host 0 alone: policy watches it; not launched yet: nothing to miss
        return hosts.verdict(hosts.read_hosts(Path(ref["attempt_dir"]), count), count, launched_at, time.time(),
                             item.spec.heartbeat_timeout_sec, item.spec.startup_grace_sec)

    def _launch(self, node: parse.Slice, ref: dict[str, Any]) -> None:
        marker = Path(ref["attempt_dir"]) / LAUNCHED
        # Task 0's host coordinates (JAX process 0); `networkEndpoints` are in worker-id order.
        coordinator = (ref.get("host_of_task") or [0])[0]
        if marker.exists() or node.name in self._launches or len(node.ips) <= coordinator:
            return
        store.write_bytes_atomic(marker, f"{time.time()}\n".encode())
        command = launch.with_host0(ref["launch"], node.ips[coordinator])
        self._launches[node.name] = self.calls.pool.submit(self.calls.call, command_lines.ssh_all(node.name, node.zone, command))

    def cancel(self, targets: list[CancelTarget]) -> None:
        # The slice's zone is known only from a listing; deleting in a zone without it is a harmless NOT_FOUND.
        for target in targets:
            if target.ref and "slice" in target.ref:
                self._cancelled.add(target.ref["slice"])
                for zone in _zones_of(target.ref):
                    self.calls.pool.submit(self.calls.call, command_lines.delete(target.ref["slice"], zone,
                                                                            queued=bool(target.ref.get("queued"))))


@dataclass(frozen=True)
class _Created:
    zone: str | None  # where the slice was created; None: every zone refused
    refused: str | None
    at: float
    final: bool = False  # refused for what it asks (gcloud INVALID_ARGUMENT...): no retry changes that


def _delete(node: parse.Slice) -> list[str]:
    """A queued resource's node goes with its queued resource (`--force`), or the request would linger."""
    if node.queued_resource:
        return command_lines.delete(node.queued_resource, node.zone, queued=True)
    return command_lines.delete(node.name, node.zone)


def _zones_of(ref: dict[str, Any]) -> list[str]:
    return list(ref.get("zones") or ([ref["zone"]] if ref.get("zone") else []))


def _tpu_config(home: Home) -> dict[str, Any]:
    from fray.state.config import load_config

    return load_config(home).get("tpu", {})
