"""One experiment-tracker run per fray run: the trackers' own environment variables, set for every attempt.

Weights & Biases lets the caller choose a run's id, and resumes it when asked to:

    WANDB_RUN_ID=<the fray run id>   WANDB_RESUME=allow     (resume the run if it exists, else create it)

so every attempt's `wandb.init()` logs into one W&B run, online or offline (a W&B run id may be up to 64
characters of letters, digits and dashes; a fray run id is at most 61 of those).

MLflow does not: a run's id is made by its tracking store, and MLFLOW_RUN_ID must name a run that
already exists (`mlflow.start_run()` raises otherwise). So fray tags every run the job creates with the
fray run id through MLflow's documented MLFLOW_RUN_CONTEXT (JSON tags for new runs), and from the
second attempt on sets MLFLOW_RUN_ID to the run so tagged, when it can find it in the job's local
tracking store: MLFLOW_TRACKING_URI as a `sqlite:///` database or a file store folder, or by default
`mlflow.db` (MLflow 3.7 and later) else `mlruns/` in the job's working directory. A tracking server
(http, databricks) cannot be searched from here without MLflow; there each attempt makes its own run,
all tagged `fray.run_id`, and wrapper.log says so.

A variable the user set (in their environment or with --env) is left as it is. FRAY_TRACKER_VARS names
those fray set, so a job launched from inside a fray job gets its own run, not its parent's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping

from . import contract

WANDB_RUN_ID = "WANDB_RUN_ID"
WANDB_RESUME = "WANDB_RESUME"
WANDB_RESUME_MODE = "allow"
MLFLOW_RUN_ID = "MLFLOW_RUN_ID"
MLFLOW_RUN_CONTEXT = "MLFLOW_RUN_CONTEXT"
MLFLOW_TRACKING_URI = "MLFLOW_TRACKING_URI"
MLFLOW_TAG = "fray.run_id"
MLFLOW_DEFAULT_DB = "mlflow.db"
MLFLOW_DEFAULT_FOLDER = "mlruns"
SQLITE_TIMEOUT_SEC = 5.0


def _users(base: Mapping[str, str], name: str) -> bool:
    """Whether the user set `name`: present, and not one a wrapper set (a fray job that launched this one)."""
    return bool(base.get(name)) and name not in base.get(contract.ENV_TRACKER_VARS, "").split(",")


def environment(base: Mapping[str, str], run_id: str, attempt: int, cwd: str,
                log: Callable[[str], None] = lambda _line: None) -> dict[str, str | None]:
    """The trackers' variables to set in the workload's environment (`base`: the wrapper's own; None: unset
    it), and FRAY_TRACKER_VARS naming those set."""
    env: dict[str, str | None] = {}
    if not _users(base, WANDB_RUN_ID):
        env[WANDB_RUN_ID] = run_id
        if not _users(base, WANDB_RESUME):
            env[WANDB_RESUME] = WANDB_RESUME_MODE
    if not _users(base, MLFLOW_RUN_CONTEXT):
        env[MLFLOW_RUN_CONTEXT] = json.dumps({MLFLOW_TAG: run_id})
    if not _users(base, MLFLOW_RUN_ID):
        found = mlflow_run(base.get(MLFLOW_TRACKING_URI), cwd, run_id, log) if attempt > 1 else None
        if found is not None:
            env[MLFLOW_RUN_ID] = found
        elif MLFLOW_RUN_ID in base:
            env[MLFLOW_RUN_ID] = None  # a parent job's run, not this one's: unset
    env[contract.ENV_TRACKER_VARS] = ",".join(sorted(name for name, value in env.items() if value is not None))
    return env


def mlflow_run(uri: str | None, cwd: str, run_id: str, log: Callable[[str], None]) -> str | None:
    """The id of the active MLflow run tagged with `run_id` in the job's local tracking store, or None."""
    if uri and "://" in uri and not uri.startswith(("sqlite:", "file:")):
        log(f"MLflow tracks to {uri.split('://', 1)[0]}://...: fray cannot look its runs up, so this attempt "
            f"starts an MLflow run of its own (tagged {MLFLOW_TAG}={run_id})")
        return None
    if uri and uri.startswith("sqlite:"):
        return _from_sqlite(os.path.join(cwd, _sqlite_path(uri)), run_id, log)
    if uri:
        folder = uri[len("file://"):] if uri.startswith("file://") else uri[len("file:"):] if uri.startswith("file:") else uri
        return _from_folder(os.path.join(cwd, folder), run_id)
    database = os.path.join(cwd, MLFLOW_DEFAULT_DB)
    if os.path.isfile(database):
        return _from_sqlite(database, run_id, log)
    return _from_folder(os.path.join(cwd, MLFLOW_DEFAULT_FOLDER), run_id)


def _sqlite_path(uri: str) -> str:
    """`sqlite:///relative.db` -> relative.db; `sqlite:////abs/x.db` -> /abs/x.db (SQLAlchemy's form)."""
    rest = uri[len("sqlite:"):]
    return rest[3:] if rest.startswith("///") else rest.lstrip("/")


def _from_sqlite(path: str, run_id: str, log: Callable[[str], None]) -> str | None:
    if not os.path.isfile(path):
        return None
    import sqlite3  # only a run that tracks to MLflow's database loads it

    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=SQLITE_TIMEOUT_SEC)
        try:
            row = connection.execute(
                "SELECT tags.run_uuid FROM tags JOIN runs ON runs.run_uuid = tags.run_uuid "
                "WHERE tags.key = ? AND tags.value = ? AND runs.lifecycle_stage = 'active' "
                "ORDER BY runs.start_time DESC LIMIT 1", (MLFLOW_TAG, run_id)).fetchone()
        finally:
            connection.close()
    except sqlite3.Error as exc:
        log(f"cannot look up the MLflow run in {path}: {exc}; this attempt starts one of its own")
        return None
    return str(row[0]) if row else None


def _from_folder(root: str, run_id: str) -> str | None:
    """MLflow's file store: <root>/<experiment id>/<run id>/tags/<tag>, the tag's value as the file's text."""
    newest: tuple[float, str] | None = None
    try:
        experiments = list(os.scandir(root))
    except OSError:
        return None
    for experiment in experiments:
        if not experiment.is_dir() or experiment.name.startswith("."):
            continue
        try:
            runs = list(os.scandir(experiment.path))
        except OSError:
            continue
        for run in runs:
            tag = os.path.join(run.path, "tags", MLFLOW_TAG)
            try:
                with open(tag, encoding="utf-8") as handle:
                    if handle.read().strip() != run_id:
                        continue
                stamp = os.path.getmtime(tag)
            except OSError:
                continue
            if newest is None or stamp > newest[0]:
                newest = (stamp, run.name)
    return newest[1] if newest else None
