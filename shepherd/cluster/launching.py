"""Writing the run folder of a job launched through the cluster API.

A launched job is an ordinary run (the daemon starts and watches it like any
other) whose meta records its family (parent run and attempt, namespace,
group, reservation) and whose frozen script is the `entry` shim. Next to it:
job.json (what to run), payload.pkl (a callable, cloudpickled, 0600) or
entrypoint.<ext> (a script). The folder is written by `fray.state.runs`, the one
way any run comes to exist (built under a hidden name, renamed into place).
Everything is checked and serialized first (`prepare`), so a group whose one
member cannot be launched writes nothing at all.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fray.backends import offers
from fray.wrapper import contract
from fray.core import dependencies, directives
from fray.state import runs, upstreams
from fray.cluster import payloads
from fray.cluster.api import ClusterError, JobRequest
from fray.errors import UsageError
from fray.state import layout
from fray.state.layout import Home
from fray.core.model import Meta, RunSpec

SHIM_NAME = layout.LAUNCHED_SHIM
# The frozen script of a launched run: the function entry point (fray.cluster.entry). The local warm worker runs
# its imports once (fray.warm.worker.load_entry), so it stays imports, then the call of their main.
SHIM = """\
# Written by fray's cluster API: runs the job described by job.json in this folder.
import sys
from fray.cluster.entry import main
sys.exit(main())
"""


@dataclass(frozen=True)
class Family:
    parent_run_id: str | None
    parent_attempt: int | None
    namespace: str
    backend: str
    workdir: str


@dataclass(frozen=True)
class Prepared:
    meta: Meta
    payload: bytes | None
    script_data: bytes | None
    script_name: str | None
    job: dict[str, Any]


def prepare(home: Home, request: JobRequest, family: Family, now: float,
            group: dict[str, Any] | None = None) -> Prepared:
    """Check and serialize one job; ClusterError (nothing written) when it cannot be launched."""
    entry = request.entrypoint
    payload = script_data = None
    script_name = None
    if entry.callable is not None:
        try:
            payload = payloads.dumps((entry.callable, entry.args, dict(entry.kwargs)))
        except Exception as exc:
            raise ClusterError(f"job {request.name!r}: its callable or arguments cannot be serialized with "
                               f"cloudpickle: {exc}") from exc
    else:
        try:
            script_data = Path(str(entry.script)).read_bytes()
        except OSError as exc:
            raise ClusterError(f"job {request.name!r}: cannot read its script {entry.script}: {exc.strerror}") from None
        script_name = runs.frozen_name(layout.ENTRYPOINT_STEM, Path(str(entry.script)).suffix)
    env = request.environment
    spec_env = dict(env.env_vars)
    spec_env[contract.ENV_NAMESPACE] = family.namespace
    if family.parent_run_id:
        spec_env[contract.ENV_PARENT_JOB_ID] = family.parent_run_id
    res = request.resources
    spec = RunSpec(backend=family.backend, max_retries=request.max_retries,
                   max_retries_preemption=request.max_retries_preemption, cpus=res.cpus, mem_mb=res.mem_mb,
                   gpus=res.gpus, env=spec_env, workdir=family.workdir,
                   sbatch=time_limit_lines(request, family.backend))
    try:
        directives.check_spec(spec)
        # Its upstreams (`after`), settled now as `fray submit --after` settles them (fray.state.upstreams).
        spec.after = upstreams.resolve(home, [text for t in request.after for text in dependencies.parse_after(t)],
                                       request.name, runs.resolve)
    except (UsageError, ValueError) as exc:
        raise ClusterError(f"job {request.name!r}: {exc}") from None
    meta = runs.new_meta(request.name, now, family.workdir, spec, source=f"{entry.kind}: {entry.describe()}",
                         frozen=SHIM_NAME, script=SHIM.encode(), parent_run_id=family.parent_run_id,
                         parent_attempt=family.parent_attempt, namespace=family.namespace, group=group,
                         reservation=request.reservation)
    job = {"kind": entry.kind, "entrypoint": entry.describe(), "script": script_name,
           "script_args": list(entry.script_args),
           "environment": {"key": env.key(), "requirements": env.requirements()}}
    return Prepared(meta, payload, script_data, script_name, job)


def time_limit_lines(request: JobRequest, backend: str) -> list[str]:
    """The `#SBATCH --time` line of a time limit (whole minutes, rounded up); ClusterError off Slurm."""
    if request.time_limit_sec is None:
        return []
    if backend != "slurm":
        raise ClusterError(f"job {request.name!r}: a time limit is enforced by Slurm only, and this job runs on "
                           f"the {backend} backend; drop the time limit or use backend='slurm'")
    return [f"#SBATCH --time={math.ceil(request.time_limit_sec / 60)}"]


def _refuse_what_can_never_start(home: Home, meta: Meta) -> None:
    """fray submit's check (fray.backends.offers): a job its backend can never run is an error now, not a wait."""
    try:
        offers.check(home, meta.spec, meta.name)
    except UsageError as exc:
        raise ClusterError(f"job {meta.name!r}: {exc}") from None


def _new_run(home: Home, prepared: Prepared) -> runs.NewRun:
    files = {SHIM_NAME: SHIM.encode()}
    if prepared.payload is not None:
        files[home.run(prepared.meta.run_id).payload.name] = prepared.payload
    if prepared.script_data is not None and prepared.script_name:
        files[prepared.script_name] = prepared.script_data
    return runs.NewRun(prepared.meta, files, prepared.job)


def check(home: Home, request: JobRequest, family: Family) -> None:
    """What `launch` would refuse of the request (ClusterError), writing nothing: fray.submit's packed calls
    are written a few milliseconds later (fray.cluster.submit_batch), their errors still raised at the call."""
    _refuse_what_can_never_start(home, prepare(home, request, family, time.time()).meta)


def launch(home: Home, requests: list[JobRequest], family: Family, group_id: str | None = None) -> list[Meta]:
    """Write one run per request; all of them or (on any error) none."""
    now = time.time()
    prepared = []
    for index, request in enumerate(requests):
        group = {"id": group_id, "size": len(requests), "index": index} if group_id else None
        prepared.append(prepare(home, request, family, now, group))
    for item in prepared:
        _refuse_what_can_never_start(home, item.meta)
    runs.write_runs(home, [_new_run(home, item) for item in prepared])
    return [item.meta for item in prepared]


def launch_sweep(home: Home, requests: list[JobRequest], family: Family, name: str,
                 max_parallel: int | None = None, params: list[dict[str, Any]] | None = None) -> list[Meta]:
    """Write one run per request as the points of one sweep (`fray.map`): all of them or none.

    Point i's parameters are `{"index": i}` and `params[i]` (a chunk's `calls`);
    the sweep is listed, folded and controlled like one made by `fray submit
    --sweep` (fray.state.sweeps.creating).
    """
    from fray.state.sweeps import creating

    now = time.time()
    members = []
    for index, request in enumerate(requests):
        prepared = prepare(home, request, family, now)
        if index == 0:  # the points differ only in their arguments: one check speaks for all
            _refuse_what_can_never_start(home, prepared.meta)
        new = _new_run(home, prepared)
        members.append(creating.PointRun(prepared.meta.spec, {"index": index, **(params[index] if params else {})}, new.files, SHIM_NAME,
                                       prepared.meta.script["source"], prepared.job))
    return creating.create_group(home, name, members, max_parallel, workdir=family.workdir, now=now,
                               parent_run_id=family.parent_run_id, parent_attempt=family.parent_attempt,
                               namespace=family.namespace)
