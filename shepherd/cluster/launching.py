"""Writing the run folder of a job launched through the cluster API.

A launched job is an ordinary run (the daemon starts and watches it like any
other) whose meta records its family (parent run and attempt, namespace,
group, reservation) and whose frozen script is the `entry` shim. Next to it:
job.json (what to run), payload.pkl (a callable, cloudpickled, 0600) or
entrypoint.<ext> (a script). Like `runs.create_run`, the folder is built under
a hidden name and renamed into place, so the daemon never sees half a run.
Everything is checked and serialized first (`prepare`), so a group whose one
member cannot be launched writes nothing at all.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import re
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fray.wrapper import contract
from fray.core import directives
from fray.state import runs, store
from fray.cluster import payloads
from fray.cluster.api import ClusterError, JobRequest
from fray.cluster.entry import SHIM
from fray.errors import UsageError
from fray.state.layout import Home
from fray.core.model import Control, Meta, Phase, RunSpec

SHIM_NAME = "script.py"


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


def prepare(request: JobRequest, family: Family, now: float, group: dict[str, Any] | None = None) -> Prepared:
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
        suffix = Path(str(entry.script)).suffix
        script_name = "entrypoint" + (suffix if re.fullmatch(r"\.[A-Za-z0-9_]+", suffix) else "")
    env = request.environment
    spec_env = dict(env.env_vars)
    spec_env[contract.ENV_NAMESPACE] = family.namespace
    if family.parent_run_id:
        spec_env[contract.ENV_PARENT_JOB_ID] = family.parent_run_id
    res = request.resources
    spec = RunSpec(backend=family.backend, max_retries=request.max_retries_failure,
                   max_retries_preemption=request.max_retries_preemption, cpus=max(1, res.cpus), mem_mb=res.mem_mb,
                   gpus=res.gpus, env=spec_env, workdir=family.workdir)
    try:
        directives.check_spec(spec)
    except UsageError as exc:
        raise ClusterError(f"job {request.name!r}: {exc}") from None
    shim = SHIM.encode()
    run_id = runs.make_run_id(request.name, now)
    meta = Meta(
        run_id=run_id, name=request.name[:128], created_at=now,
        submitted_by={"user": getpass.getuser(), "host": socket.gethostname(), "cwd": family.workdir},
        script={"source": f"{entry.kind}: {entry.describe()}", "frozen": SHIM_NAME,
                "sha256": hashlib.sha256(shim).hexdigest()},
        spec=spec, phase=Phase.QUEUED.value, wait_reason="waiting for the daemon",
        parent_run_id=family.parent_run_id, parent_attempt=family.parent_attempt, namespace=family.namespace,
        group=group, reservation=request.reservation,
    )
    job = {"kind": entry.kind, "entrypoint": entry.describe(), "script": script_name,
           "script_args": list(entry.script_args),
           "environment": {"key": env.key(), "requirements": env.requirements()}}
    return Prepared(meta, payload, script_data, script_name, job)


def stage(home: Home, prepared: Prepared) -> Path:
    """Write the run under a hidden name; `publish` makes it visible."""
    meta = prepared.meta
    store.ensure_home(home)
    staging = home.runs_dir / f".new-{meta.run_id}"
    store.make_dirs(staging)
    try:
        store.write_bytes_atomic(staging / SHIM_NAME, SHIM.encode())
        if prepared.payload is not None:
            store.write_bytes_atomic(staging / "payload.pkl", prepared.payload)
        if prepared.script_data is not None and prepared.script_name:
            store.write_bytes_atomic(staging / prepared.script_name, prepared.script_data)
        store.write_json(staging / "job.json", prepared.job, "job")
        store.write_json(staging / "meta.json", meta.to_dict(), "meta")
        store.write_json(staging / "control.json",
                         Control(updated_at=meta.created_at, updated_by=meta.submitted_by["user"]).to_dict(), "control")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


def publish(home: Home, staging: Path, run_id: str) -> None:
    os.rename(staging, home.run(run_id).dir)


def discard(staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)


def launch(home: Home, requests: list[JobRequest], family: Family, group_id: str | None = None) -> list[Meta]:
    """Write one run per request; all of them or (on any error) none."""
    now = time.time()
    prepared = []
    for index, request in enumerate(requests):
        group = {"id": group_id, "size": len(requests), "index": index} if group_id else None
        prepared.append(prepare(request, family, now, group))
    staged: list[Path] = []
    try:
        for item in prepared:
            staged.append(stage(home, item))
    except BaseException:
        for path in staged:
            discard(path)
        raise
    for item, path in zip(prepared, staged):
        publish(home, path, item.meta.run_id)
    return [item.meta for item in prepared]
