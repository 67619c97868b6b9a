"""The records of the cluster API: what a job asks for, and what it is told back.

Plain frozen dataclasses, no IO. A `Cluster` (LocalCluster, FrayCluster)
takes a `JobRequest` and returns a job id; `poll`/`wait` return `JobInfo`.

    JobRequest(name, entrypoint, resources=ResourceConfig(), environment=EnvironmentConfig(),
               max_retries=FUNCTION_MAX_RETRIES, max_retries_preemption=100, reservation=None, time_limit_sec=None)
    Entrypoint.from_callable(fn, args, kwargs) | Entrypoint.from_script(path, args)
    Call(fn, *args, **kwargs)         what a checkpointable callable's checkpoint() returns to resume with
    JobGroupConfig(name, jobs)        launched all or nothing
    ReservationConfig(name, min, max, ttl_sec)
"""

from __future__ import annotations

import enum
import functools
import hashlib
import json
import os
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from fray.core.model import DEFAULT_MAX_RETRIES_PREEMPTION
from fray.errors import FrayError, UsageError

# A function call's workload failures before it fails: none. Its future raises the failure at once, as
# concurrent.futures does, and a call that wrote something before it failed is not run again unasked; a
# script run's default is fray.core.model.DEFAULT_MAX_RETRIES (a script is written to be restarted).
FUNCTION_MAX_RETRIES = 0


class ClusterError(FrayError):
    """A cluster API call could not be carried out (the message says why and what to do)."""


class JobFailed(ClusterError):
    """A job waited for with raise_on_failure did not succeed; `info` has its status and error text."""

    def __init__(self, info: "JobInfo") -> None:
        self.info = info
        detail = f"\n--- remote traceback ---\n{info.error}" if info.error else ""
        super().__init__(f"job {info.job_id} ({info.name}) {info.status.value}: {info.reason}{detail}")


@dataclass(frozen=True)
class ResourceConfig:
    cpus: int = 1
    mem_mb: int | None = None
    gpus: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.cpus, int) or self.cpus < 0:
            raise UsageError(f"cpus must be a whole number >= 0, not {self.cpus!r}")
        if self.mem_mb is not None and (not isinstance(self.mem_mb, int) or self.mem_mb < 1):
            raise UsageError(f"mem_mb must be a whole number of megabytes >= 1 (or None), not {self.mem_mb!r}")
        if not isinstance(self.gpus, int) or self.gpus < 0:
            raise UsageError(f"gpus must be a whole number >= 0, not {self.gpus!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"cpus": self.cpus, "mem_mb": self.mem_mb, "gpus": self.gpus}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ResourceConfig":
        return cls(cpus=data["cpus"], mem_mb=data.get("mem_mb"), gpus=data.get("gpus", 0))


@dataclass(frozen=True)
class Entrypoint:
    """What a job runs: a Python callable (cloudpickled) or a script file."""

    callable: Callable[..., Any] | None = None
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    script: str | None = None
    script_args: tuple[str, ...] = ()

    @classmethod
    def from_callable(cls, fn: Callable[..., Any], args: Sequence[Any] = (),
                      kwargs: Mapping[str, Any] | None = None) -> "Entrypoint":
        if not callable(fn):
            raise UsageError(f"Entrypoint.from_callable needs a callable, not {type(fn).__name__}")
        return cls(callable=fn, args=tuple(args), kwargs=dict(kwargs or {}))

    @classmethod
    def from_script(cls, path: str | os.PathLike[str], args: Sequence[str] = ()) -> "Entrypoint":
        return cls(script=os.path.abspath(os.fspath(path)), script_args=tuple(str(a) for a in args))

    @property
    def kind(self) -> str:
        return "callable" if self.callable is not None else "script"

    def describe(self) -> str:
        if self.callable is not None:
            fn = self.callable
            return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"
        return str(self.script)


class Call:
    """A call to make later: what a checkpointable callable's `checkpoint` returns.

        class Train:
            def __call__(self, steps): ...                 # trains, keeping its state in self
            def checkpoint(self, steps):                   # on preemption or before a time limit
                return fray.Call(self, steps)              # the next attempt calls this (self as it is now)

    It is cloudpickled into the attempt's folder, and the next attempt makes
    this call instead of the one first submitted (fray.cluster.resuming).
    """

    __slots__ = ("fn", "args", "kwargs")

    def __init__(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        if not callable(fn):
            raise UsageError(f"Call needs a callable first, not {type(fn).__name__}")
        self.fn = fn
        self.args = args
        self.kwargs = kwargs

    def __call__(self) -> Any:
        return self.fn(*self.args, **self.kwargs)

    def __repr__(self) -> str:
        name = getattr(self.fn, "__qualname__", type(self.fn).__qualname__)
        return f"Call({name}, {len(self.args)} args, {len(self.kwargs)} kwargs)"


@dataclass(frozen=True)
class EnvironmentConfig:
    """Environment variables, and packages installed into a virtual environment cached by their hash.

    `extras` are optional-dependency groups of `workspace` (a project directory),
    installed as `<workspace>[extra,...]`. The environment sees the packages of
    the Python that runs fray (--system-site-packages), so fray itself is there.
    """

    env_vars: Mapping[str, str] = field(default_factory=dict)
    pip_packages: Sequence[str] = ()
    extras: Sequence[str] = ()
    workspace: str | None = None

    def __post_init__(self) -> None:
        if self.extras and not self.workspace:
            raise UsageError("EnvironmentConfig(extras=...) needs workspace=<project directory> whose extras they are")
        for key, value in self.env_vars.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise UsageError(f"env_vars must map strings to strings, not {key!r}: {value!r}")

    def requirements(self) -> list[str]:
        """What pip installs, in a stable order."""
        reqs = sorted(str(p) for p in self.pip_packages)
        if self.workspace:
            target = os.path.abspath(self.workspace)
            reqs.append(f"{target}[{','.join(sorted(self.extras))}]" if self.extras else target)
        return reqs

    def key(self) -> str | None:
        """The venv cache key: a hash of the requirements and the Python that runs them (None: no venv)."""
        reqs = self.requirements()
        if not reqs:
            return None
        # sys.prefix, not the base: an environment sees the packages of the (virtual) environment that built it.
        identity = {"requirements": reqs, "python": sys.version.split()[0], "base": sys.prefix}
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]


@dataclass(frozen=True)
class JobRequest:
    """A job to launch: what it runs, on what, and its retry budgets.

    `max_retries` is the number of workload failures it may have before it fails (`fray submit
    --max-retries`); `max_retries_preemption` counts lost nodes and preemptions apart. The old name
    `max_retries_failure` still works, with a DeprecationWarning.
    """

    name: str
    entrypoint: Entrypoint
    resources: ResourceConfig = field(default_factory=ResourceConfig)
    environment: EnvironmentConfig = field(default_factory=EnvironmentConfig)
    max_retries: int = FUNCTION_MAX_RETRIES  # workload failures before the job fails: `fray submit --max-retries`
    max_retries_preemption: int = DEFAULT_MAX_RETRIES_PREEMPTION
    reservation: str | None = None
    time_limit_sec: float | None = None  # Slurm's --time (SIGUSR1 comes two minutes before it); Slurm only
    after: Sequence[str] = ()  # runs it waits for, `RUN[:ok|:fail|:any]` as `fray submit --after` (FRAY_HOME only)

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise UsageError("a JobRequest needs a name")
        if self.max_retries < 0 or self.max_retries_preemption < 0:
            raise UsageError("retry budgets must be >= 0")
        if self.time_limit_sec is not None and not self.time_limit_sec > 0:
            raise UsageError(f"time_limit_sec must be a positive number of seconds, not {self.time_limit_sec!r}")


# The budget's old name, `max_retries_failure`, still works as a keyword and as an attribute, with a
# DeprecationWarning. Not a field: dataclasses.replace (JobGroupConfig.replicas) reads every field, and
# would warn each time.
_dataclass_init = JobRequest.__init__


@functools.wraps(_dataclass_init)
def _init_with_old_name(self: JobRequest, *args: Any, max_retries_failure: int | None = None, **kwargs: Any) -> None:
    if max_retries_failure is not None:
        if "max_retries" in kwargs or len(args) >= 5:
            raise UsageError("JobRequest got max_retries and max_retries_failure, two names of one budget: "
                             "give max_retries only")
        warnings.warn("JobRequest(max_retries_failure=) is deprecated: use max_retries=", DeprecationWarning,
                      stacklevel=2)
        kwargs["max_retries"] = max_retries_failure
    _dataclass_init(self, *args, **kwargs)


def _max_retries_failure(request: JobRequest) -> int:
    warnings.warn("JobRequest.max_retries_failure is deprecated: read max_retries", DeprecationWarning, stacklevel=2)
    return request.max_retries


JobRequest.__init__ = _init_with_old_name  # type: ignore[method-assign]
JobRequest.max_retries_failure = property(_max_retries_failure)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class JobGroupConfig:
    """Jobs that start all together or not at all (a slice, a gang)."""

    name: str
    jobs: Sequence[JobRequest]

    @classmethod
    def replicas(cls, name: str, request: JobRequest, count: int) -> "JobGroupConfig":
        from dataclasses import replace

        return cls(name, [replace(request, name=f"{request.name}-{i}") for i in range(count)])


@dataclass(frozen=True)
class ReservationConfig:
    """Resources held for a set of jobs: `min` is kept free for them, `max` caps what they use together."""

    name: str
    min: ResourceConfig = field(default_factory=lambda: ResourceConfig(cpus=0))
    max: ResourceConfig = field(default_factory=ResourceConfig)
    ttl_sec: float = 3600.0

    def __post_init__(self) -> None:
        for attr in ("cpus", "gpus"):
            if getattr(self.min, attr) > getattr(self.max, attr):
                raise UsageError(f"a reservation's min {attr} ({getattr(self.min, attr)}) exceeds its max "
                                 f"({getattr(self.max, attr)})")
        if self.ttl_sec <= 0:
            raise UsageError("a reservation's ttl_sec must be positive")


@dataclass(frozen=True)
class Reservation:
    reservation_id: str
    name: str
    min: ResourceConfig
    max: ResourceConfig
    created_at: float
    expires_at: float
    used: ResourceConfig | None = None  # what its running jobs use now (FrayCluster: from the run files)


class JobStatus(str, enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"

    @property
    def finished(self) -> bool:
        return self in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED)


@dataclass(frozen=True)
class JobInfo:
    job_id: str
    name: str
    status: JobStatus
    reason: str = ""
    parent_job_id: str | None = None
    namespace: str | None = None
    result: Any = None  # a callable's return value, once it succeeded
    error: str | None = None  # the remote traceback text, when it failed
    attempts: int = 0

    @property
    def finished(self) -> bool:
        return self.status.finished
