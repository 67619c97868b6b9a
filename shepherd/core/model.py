"""Records of the state files, as dataclasses, and the enums they use.

Conversion is explicit (`from_dict` / `to_dict`) and schema validation happens in
`store`, so a record built here from a file read through `store` is known-good.
Pure: no IO.
"""

from __future__ import annotations

import dataclasses
import reprlib
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from fray.wrapper import contract

SCHEMA_VERSION = 1

_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """A record as plain JSON-ready data, copying only containers.

    `dataclasses.asdict` deep-copies every value and costs ~0.5 ms for a meta;
    the daemon converts every live run's meta several times a cycle.
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {key: _plain(item) for key, item in value.items()}
    if kind is list:
        return [_plain(item) for item in value]
    if kind in _FIELD_NAMES or dataclasses.is_dataclass(value):
        return {name: _plain(getattr(value, name)) for name in _field_names(kind)}
    if isinstance(value, Enum):  # a state member: its string, so the files read as before
        return value.value
    return value


def _field_names(kind: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(kind)
    if names is None:
        names = _FIELD_NAMES[kind] = tuple(f.name for f in dataclasses.fields(kind))
    return names


def _copied(value: Any) -> Any:
    """A deep copy of a record made of records, dicts, lists and scalars (what `copy.deepcopy`
    does for these, without its memo and dispatch: the policy copies every live run's meta each
    cycle)."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {key: _copied(item) for key, item in value.items()}
    if kind is list:
        return [_copied(item) for item in value]
    if kind in _FIELD_NAMES or dataclasses.is_dataclass(value):
        clone = object.__new__(kind)
        clone.__dict__.update({name: _copied(item) for name, item in value.__dict__.items()})
        return clone
    return value


class _Record:
    """`__eq__` and `__repr__` of the records below, as @dataclass writes them but written once.

    Every command imports this module, and on Python 3.11 @dataclass compiles each
    method it generates from source at import (most of the module's import time);
    the records keep only their generated `__init__`.
    """

    __hash__ = None  # type: ignore[assignment]  # as @dataclass(eq=True) leaves a record: unhashable

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        names = _field_names(type(self))
        return tuple(getattr(self, name) for name in names) == tuple(getattr(other, name) for name in names)

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in _field_names(type(self)))
        return f"{type(self).__qualname__}({fields})"


class StrEnum(str, Enum):
    """A state's name: a member equals (and hashes, prints and formats as) its string, so a stored "ended"
    compares with AttemptState.ENDED and an f-string shows "ended" (enum.StrEnum, which Python 3.10 lacks)."""

    __str__ = str.__str__
    __format__ = str.__format__


def _member(kind: type[Enum], value: Any) -> Any:
    """`value` read from a file as `kind`'s member (None stays None)."""
    return None if value is None else kind(value)


class Mode(StrEnum):
    RUN_ONCE = "run_once"
    INDEFINITE = "indefinite"


class Phase(StrEnum):
    QUEUED = "queued"  # waiting to start an attempt (resources, backoff, pause)
    ACTIVE = "active"  # an attempt is in flight
    ENDED = "ended"


class AttemptState(StrEnum):
    SUBMITTING = "submitting"  # intent recorded; the backend may or may not have it yet
    SUBMITTED = "submitted"  # the backend has it; the wrapper is not up yet
    RUNNING = "running"  # the wrapper said it started
    STOPPING = "stopping"  # asked to stop; waiting for it to go
    ENDED = "ended"


class Cause(StrEnum):
    """Why an attempt ended. Which budget, if any, it draws on is fray.core.budgets' (attempt_ended)."""

    SUCCESS = "success"
    WORKLOAD_FAILURE = "workload_failure"
    CLEAN_EXIT = "clean_exit"  # exit 0 where that is not success (indefinite, or no final.json)
    NODE_FAULT = "node_fault"
    LOST = "lost"  # the process vanished without an exit record
    HEARTBEAT_STALL = "heartbeat_stall"
    SUBMIT_FAILED = "submit_failed"
    STOPPED = "stopped"
    RESTARTED = "restarted"
    PAUSED = "paused"
    EXPIRED = "expired"
    PREEMPTED = "preempted"
    PROGRESS_STALL = "progress_stall"
    HANG_STOPPED = "hang_stopped"  # the wrapper saw the main process stopped (state T) and ended it
    HANG_IDLE = "hang_idle"  # the wrapper saw no CPU and no progress for --idle-timeout and ended it
    UNSCHEDULABLE = "unschedulable"  # not placed within --scheduling-timeout: the run ends, failed
    CONFIG_REFUSED = "config_refused"  # the backend refused the submission for good: the run ends, failed_config
    SNAPSHOT_LEFT_OUT = "snapshot_left_out"  # it failed on a file its code snapshot left out: ends, failed_config


class EndStatus(StrEnum):
    COMPLETED_SUCCESS = "completed_success"
    FAILED = "failed"
    FAILED_CONFIG = "failed_config"  # a submission the backend refuses whatever the retry (bad option, no such partition)
    STOPPED_MANUAL = "stopped_manual"
    ENDED_EXPIRED = "ended_expired"
    FAILED_DEPENDENCY = "failed_dependency"  # an upstream run of --after can no longer satisfy it


# Partition fallback: after this many failures in a row on a partition, use the next
# one; try the preferred one again this long after its last failure.
PARTITION_FALLBACK_DEFAULTS: dict[str, Any] = {"after_failures": 2, "retry_preferred_sec": 1800.0}
# A reported step that has not advanced this long is a hang: the wrapper's
# heartbeat comes from its own thread, so only progress shows a stuck workload.
DEFAULT_PROGRESS_TIMEOUT_SEC = 1800.0
# The retry budgets' defaults, one per budget. A script run (`fray submit`, and a WorkerPool's workers, servers
# meant to stay up) may fail its workload this many times before it ends failed; the Python API's one-off
# calls (fray.submit, fray.map, JobRequest) default to FUNCTION_MAX_RETRIES in fray.cluster.api instead.
DEFAULT_MAX_RETRIES = 3
DEFAULT_MAX_RETRIES_PREEMPTION = 100  # node-side failures: a lost node or a preemption is not the workload's fault
# Failures count against a budget only while they are this recent, so a service
# kept alive for weeks is not ended by crashes days apart.
DEFAULT_RETRY_WINDOW_SEC = 86400.0


@dataclass(eq=False, repr=False)
class RunSpec(_Record):
    """How a run must be run: from `#FRAY` directives, overridden by CLI flags."""

    mode: Mode = Mode.RUN_ONCE
    backend: str = "local"
    max_retries: int = DEFAULT_MAX_RETRIES
    max_retries_preemption: int = DEFAULT_MAX_RETRIES_PREEMPTION
    keep_alive_sec: float | None = None
    clean_exit_ok: bool = False
    heartbeat_interval_sec: float = 10.0
    heartbeat_timeout_sec: float = 120.0
    startup_grace_sec: float = 120.0
    backoff_base_sec: float = 2.0
    backoff_max_sec: float = 300.0
    stop_grace_sec: float = 30.0
    progress_timeout_sec: float | None = DEFAULT_PROGRESS_TIMEOUT_SEC  # None: off
    restart_on_progress_stall: bool = True
    retry_window_sec: float | None = DEFAULT_RETRY_WINDOW_SEC  # None: every failure since the run (re)started
    cpus: int = 1
    mem_mb: int | None = None
    gpus: int = 0
    partitions: list[str] = field(default_factory=list)  # Slurm partitions to try, in order (empty: chosen by GPUs)
    min_vram_gb: float | None = None
    max_vram_gb: float | None = None
    prefer: str = "min"  # "min" | "max": the smallest or the largest GPU memory that fits first
    partition_fallback: dict[str, Any] = field(default_factory=lambda: dict(PARTITION_FALLBACK_DEFAULTS))
    env: dict[str, str] = field(default_factory=dict)
    sbatch: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    workdir: str = "."  # where it was submitted from; the job's working directory when it has no snapshot
    # Its code and interpreter (fray.state.snapshots, fray.wrapper.code): the snapshot it runs from,
    # {tree, root, entry, cwd, files, bytes, git}, None to run in place (--code none); `cwd` is the
    # working directory inside the snapshot, None when --workdir names one. The interpreter: a path
    # (--python, --venv, --conda, else the python3 it was submitted with for a .py without #!), with
    # `python_env` the venv or conda prefix whose bin/ leads PATH; `module`: run as `python -m module`.
    code: dict[str, Any] | None = None
    python: str | None = None
    python_env: str | None = None
    module: str | None = None
    # Preflight probes and the health command (fray.wrapper.probes, fray.wrapper.health).
    probes: list[str] | None = None  # exactly these; None: chosen by the resources asked for
    skip_probes: list[str] = field(default_factory=list)
    probe_timeout_sec: float = contract.DEFAULT_PROBE_TIMEOUT_SEC
    min_free_disk_mb: int = contract.DEFAULT_MIN_FREE_DISK_MB
    health_cmd: str | None = None
    health_interval_sec: float = contract.DEFAULT_HEALTH_INTERVAL_SEC
    health_retries: int = contract.DEFAULT_HEALTH_RETRIES
    idle_timeout_sec: float | None = contract.DEFAULT_IDLE_TIMEOUT_SEC  # None: off (fray.wrapper.hangwatch)
    # What the job already emits, read as its progress (fray.wrapper.logscan, fray.wrapper.tensorboard), and
    # the arguments it resumes by, added to every attempt after the first (when retry_args_if_exists exists).
    progress_patterns: list[str] = field(default_factory=list)
    progress_tensorboard: str | None = None
    retry_args: list[str] = field(default_factory=list)
    retry_args_if_exists: str | None = None
    # Cloud TPU slices (backend tpu): accelerator type, zones to try in order, runtime, provisioning.
    tpu: str | None = None
    zones: list[str] = field(default_factory=list)
    runtime_version: str | None = None
    spot: bool = False
    preemptible: bool = False
    reserved: bool = False
    queued: bool = False

    # Placement (fray.core.placement): where the tasks may run, how many, and in which band.
    constraints: list[str] = field(default_factory=list)  # `gpu-type=h100`, `memory-gb>=80`, ... (--constraint)
    tolerations: list[str] = field(default_factory=list)  # taints this run may land on (--tolerate)
    replicas: int = 1  # tasks of the run (--replicas)
    group_by: str | None = None  # all tasks on workers sharing this attribute, or none (--group-by)
    priority: str = "interactive"  # production | interactive | batch (--priority)
    scheduling_timeout_sec: float | None = None  # not placed this long after it could start: ends (--scheduling-timeout)
    # Upstream runs it waits for (--after), resolved at submit: {ref, on, name, run_id | group, size}
    # (fray.core.dependencies; as parsed, before submit settles them, the texts as written).
    after: list[Any] = field(default_factory=list)

    @property
    def provisioning(self) -> str:
        return "spot" if self.spot else "preemptible" if self.preemptible else "reserved" if self.reserved else "on-demand"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunSpec":
        spec = cls(**{name: data[name] for name in _field_names(cls) if name in data})
        spec.mode = Mode(spec.mode)
        return spec

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(eq=False, repr=False)
class Attempt(_Record):
    """One try at running the workload: where it went, how it started and ended, and why."""

    number: int
    state: AttemptState
    backend: str
    submitted_at: float
    backend_ref: dict[str, Any] | None = None
    node: str | None = None
    started_at: float | None = None
    stop_requested_at: float | None = None
    stop_reason: str | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    cause: Cause | None = None
    detail: str | None = None
    partition: str | None = None  # the Slurm partition it was submitted to
    counted_as: str | None = None  # the budget its end drew on: "workload" | "node" | "submit" | None
    step: int | None = None  # the last step its workload reported (progress.json), kept when it ends
    probe: str | None = None  # the preflight probe that failed on its node (failure.json), for a node fault
    # Its node's clock minus the daemon's, as the daemon measured it (fray.daemon.sightings): its times above are
    # the daemon's; a reader turns the node's own (a heartbeat, a progress step) into them with this.
    clock_offset_sec: float | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Attempt":
        attempt = cls(**data)
        attempt.state, attempt.cause = AttemptState(attempt.state), _member(Cause, attempt.cause)
        return attempt

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    @property
    def in_flight(self) -> bool:
        return self.state != AttemptState.ENDED  # a member equals its string; `.value` costs a call (hot in `fray list`)


@dataclass(eq=False, repr=False)
class End(_Record):
    """How a run ended: its final status, the one-line reason, and when; for a run that spent a retry budget,
    which budget and its limit then (what `fray status` suggests raising), as data rather than words to parse."""

    status: EndStatus
    reason: str
    at: float
    budget: str | None = None  # "workload" | "node": the budget whose spending ended it (fray.core.budgets)
    budget_limit: int | None = None  # that budget's limit when it was spent (--max-retries or its -preemption)


@dataclass(eq=False, repr=False)
class Counters(_Record):
    """Failures drawn from each budget, and the streak of fast failures behind crash_loop."""

    workload_failures: int = 0  # in all, since `since`; the budgets count only those in the retry window
    node_failures: int = 0
    consecutive_fast_failures: int = 0
    since: float | None = None  # when counting (re)started: a restart of an ended run starts afresh


@dataclass(eq=False, repr=False)
class Applied(_Record):
    """The control.json nonces the daemon has acted on, so each request is acted on once."""

    restart_nonce: int = 0
    start_nonce: int = 0


GANG, SWEEP = "gang", "sweep"  # the kinds of group a run may belong to (Meta.group["kind"])
# Left out of meta.json when unset: a run's family, and who wrote it (runs written before either read as before).
OPTIONAL_FIELDS = ("parent_run_id", "parent_attempt", "namespace", "group", "reservation", "lease_generation")


@dataclass(eq=False, repr=False)
class Meta(_Record):
    """A run's meta.json: its spec, phase, attempts and budgets."""

    run_id: str
    name: str
    created_at: float
    submitted_by: dict[str, str]
    script: dict[str, str]
    spec: RunSpec
    phase: Phase = Phase.QUEUED
    wait_reason: str | None = None
    next_attempt_at: float | None = None
    attempts: list[Attempt] = field(default_factory=list)
    counters: Counters = field(default_factory=Counters)
    applied: Applied = field(default_factory=Applied)
    end: End | None = None
    updated_at: float | None = None
    lease_generation: int | None = None  # the daemon's lease generation when it wrote this (fray.daemon.lease_keeper)
    # Jobs launched through the cluster API (all optional: `fray submit` runs have none).
    parent_run_id: str | None = None
    parent_attempt: int | None = None
    namespace: str | None = None
    # {"id", "size", "index"}: a job group launched all or nothing; with "kind": "sweep" (and "name",
    # "max_parallel", "params") one point of a sweep, which starts on its own (fray.core.sweeps.grid).
    group: dict[str, Any] | None = None
    reservation: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any], spec: RunSpec | None = None) -> "Meta":
        """`spec`: the run's spec when the caller has it already (shared, as Meta.copy shares it); else data's."""
        end = data.get("end")
        return cls(
            run_id=data["run_id"],
            name=data["name"],
            created_at=data["created_at"],
            submitted_by=dict(data["submitted_by"]),
            script=dict(data["script"]),
            spec=RunSpec.from_dict(data["spec"]) if spec is None else spec,
            phase=Phase(data["phase"]),
            wait_reason=data.get("wait_reason"),
            next_attempt_at=data.get("next_attempt_at"),
            attempts=[Attempt.from_dict(a) for a in data["attempts"]],
            counters=Counters(**data["counters"]),
            applied=Applied(**data["applied"]),
            end=End(**{**end, "status": EndStatus(end["status"])}) if end else None,
            updated_at=data.get("updated_at"),
            lease_generation=data.get("lease_generation"),
            parent_run_id=data.get("parent_run_id"),
            parent_attempt=data.get("parent_attempt"),
            namespace=data.get("namespace"),
            group=data.get("group"),
            reservation=data.get("reservation"),
        )

    def to_dict(self) -> dict[str, Any]:
        data = _plain(self)
        data["schema_version"] = SCHEMA_VERSION
        for name in OPTIONAL_FIELDS:  # left out when unset, so runs without a family read as before
            if data[name] is None:
                del data[name]
        return data

    @property
    def gang(self) -> dict[str, Any] | None:
        """Its job group when that is launched all or nothing (a sweep's is not)."""
        return self.group if self.group is not None and self.group.get("kind", GANG) == GANG else None

    @property
    def sweep(self) -> dict[str, Any] | None:
        """Its sweep group, if it is one point of a sweep."""
        return self.group if self.group is not None and self.group.get("kind") == SWEEP else None

    @property
    def job_namespace(self) -> str:
        """FRAY_NAMESPACE inside the run: its family's, or for a top-level run its own id (its jobs and actors live there)."""
        return self.namespace or self.run_id

    def copy(self) -> "Meta":
        """An independent copy (what policy changes never touches the original).

        The spec is shared, not copied: it is most of a meta, and every change of it replaces it whole
        (policy's safe overrides, sweep_record), so a copy that changes it leaves the original's alone."""
        clone = object.__new__(Meta)
        clone.__dict__.update({name: item if name == "spec" else _copied(item) for name, item in self.__dict__.items()})
        return clone

    @property
    def current(self) -> Attempt | None:
        """The latest attempt, in flight or not."""
        return self.attempts[-1] if self.attempts else None

    @property
    def in_flight(self) -> Attempt | None:
        last = self.current
        return last if last is not None and last.in_flight else None


@dataclass(eq=False, repr=False)
class Control(_Record):
    """A run's control.json: what people asked of it (stop, restart, pause, overrides)."""

    paused: bool = False
    stop_requested: bool = False
    restart_nonce: int = 0
    start_nonce: int = 0
    overrides: dict[str, Any] = field(default_factory=dict)  # safe RunSpec settings changed on a live run
    updated_at: float = 0.0
    updated_by: str = ""

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "Control":
        if not data:
            return cls()
        return cls(**{k: v for k, v in data.items() if k != "schema_version"})

    def to_dict(self) -> dict[str, Any]:
        data = _plain(self)
        data["schema_version"] = SCHEMA_VERSION
        return data

    def ask(self, op: str, applied: Applied) -> None:
        """Record a person's `op` (stop, start, restart, pause, unpause); a nonce moves past the one the daemon
        last acted on (`applied`), so the daemon acts on the request once."""
        if op == "stop":
            self.stop_requested = True
        elif op == "start":
            self.stop_requested = self.paused = False
            self.start_nonce = max(self.start_nonce, applied.start_nonce) + 1
        elif op == "restart":
            self.restart_nonce = max(self.restart_nonce, applied.restart_nonce) + 1
        elif op == "pause":
            self.paused = True
        elif op == "unpause":
            self.paused = False
        else:
            raise ValueError(f"unknown control operation {op!r}")
