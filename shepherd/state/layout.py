"""The layout of FRAY_HOME: the one place that knows where every file lives.

Nobody else joins path strings. `Home` is the state directory, `RunPaths` one
run's folder, `AttemptPaths` one attempt's folder (names from fray.wrapper.contract).
The folders' records are NamedTuples, not frozen dataclasses: every command
imports this module, and on Python 3.11 a frozen dataclass costs about ten
times as much to create (its six generated methods are compiled at import).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import NamedTuple

from fray.wrapper import contract

DEFAULT_HOME = "~/.fray"
# Names that readers watching FRAY_HOME match files by (the TUI, the daemon's watcher).
META = contract.META  # the wrapper reads it too, to know whether its attempt is current
CONTROL = "control.json"
EVENTS = "events.jsonl"
ENDED = "ended.json"
DAEMON_LEASE = "daemon.json"
NODES = "nodes.json"
BLACKLIST = "blacklist.json"
RUNS = contract.RUNS_DIR
FROZEN_SCRIPT_STEM = "script"  # runs/<id>/script<.suffix>: the submitted script, frozen
ENTRYPOINT_STEM = "entrypoint"  # a launched job's own script, beside the shim
ATTEMPTS = "attempts"  # runs/<id>/attempts/<n>/: one folder per attempt
TASKS_DIR = "tasks"  # attempts/<n>/tasks/<i>/: the files of task i > 0 of a multi-node attempt
NEW_RUN_PREFIX = ".new-"  # a dot: `run_ids` and the daemon never see a run being built
LAUNCHED_SHIM = f"{FROZEN_SCRIPT_STEM}.py"  # the frozen script of a job launched through the cluster API
WATCH_PROBE = ".watch-probe"  # touched in runs/ by the daemon until its watcher reports it (a dot: never a run)
CORRUPT_MARK = ".corrupt-"  # <name>.corrupt-<stamp>: a file moved aside as corrupt
GROUPS = "groups"  # groups/<group id>/: a sweep's record, written whole by `fray submit --sweep`
RECORD_SUFFIX = ".json"  # namespaces/<ns>/actors/<name>/<actor id>.json, reservations/<id>.json


def record_id(file_name: str) -> str | None:
    """The id a record file's name carries (endpoint, reservation); None for others (temp files start with '.')."""
    if file_name.endswith(RECORD_SUFFIX) and not file_name.startswith("."):
        return file_name[: -len(RECORD_SUFFIX)]
    return None


def attempt_file(run_folder: str, number: int, name: str) -> str:  # a plain string: `fray list` reads heartbeat, progress
    return f"{run_folder}{os.sep}{ATTEMPTS}{os.sep}{number}{os.sep}{name}"


def corrupt_name(path: Path, stamp: str) -> Path:  # beside it, under a name no reader looks for
    return path.with_name(f"{path.name}{CORRUPT_MARK}{stamp}")


def resolve_home(explicit: str | os.PathLike[str] | None = None) -> Path:
    """`--home` if given, else $FRAY_HOME, else ~/.fray; always absolute."""
    chosen = explicit or os.environ.get(contract.ENV_HOME) or DEFAULT_HOME
    return Path(os.path.abspath(os.path.expanduser(str(chosen))))


class AttemptPaths(NamedTuple):
    """The files of one attempt, in runs/<id>/attempts/<n>/."""

    dir: Path

    @property
    def number(self) -> int:
        return int(self.dir.name)

    def task(self, index: int) -> "AttemptPaths":
        """Task `index` of a multi-node attempt: task 0 writes here, task i in tasks/<i>/ (Slurm -N, TPU hosts)."""
        return self if index == 0 else AttemptPaths(self.dir / TASKS_DIR / str(index))

    def task_indexes(self) -> list[int]:
        """The tasks that have a folder (always 0), in order."""
        try:
            found = [int(e.name) for e in os.scandir(self.dir / TASKS_DIR) if e.is_dir() and e.name.isdigit()]
        except FileNotFoundError:
            found = []
        return [0, *sorted(i for i in found if i > 0)]

    @property
    def stdout(self) -> Path:
        return self.dir / contract.STDOUT

    @property
    def stderr(self) -> Path:
        return self.dir / contract.STDERR

    @property
    def wrapper_log(self) -> Path:
        return self.dir / contract.WRAPPER_LOG

    @property
    def heartbeat(self) -> Path:
        return self.dir / contract.HEARTBEAT

    @property
    def started(self) -> Path:
        return self.dir / contract.STARTED

    @property
    def progress(self) -> Path:
        return self.dir / contract.PROGRESS

    @property
    def history(self) -> Path:
        """Every kept step and checkpoint (fray.wrapper.history); `history.jsonl.d/` of chunks when write-once."""
        return self.dir / contract.HISTORY

    @property
    def probe(self) -> Path:
        return self.dir / contract.PROBE

    @property
    def result(self) -> Path:
        return self.dir / contract.RESULT

    @property
    def final(self) -> Path:
        return self.dir / contract.FINAL

    @property
    def failure(self) -> Path:
        return self.dir / contract.FAILURE

    @property
    def exit(self) -> Path:
        return self.dir / contract.EXIT

    @property
    def health(self) -> Path:
        return self.dir / contract.HEALTH

    @property
    def call_record(self) -> Path:
        """How a launched callable ended: returned or raised, with the traceback text (schemas/call-result.json)."""
        return self.dir / "call-result.json"

    @property
    def call_value(self) -> Path:  # a launched callable's return value (cloudpickle), for `wait` and `poll`
        return self.dir / "call-result.pkl"

    @property
    def resume_call(self) -> Path:
        """What a checkpointable callable's checkpoint() returned in this attempt: the call the next one makes."""
        return self.dir / "resume-call.pkl"

    @property
    def slurm_script(self) -> Path:  # the batch script the Slurm backend submitted for this attempt
        return self.dir / "sbatch.sh"

    @property
    def slurm_log(self) -> Path:  # Slurm's own output of the batch job (the wrapper's stdout and stderr)
        return self.dir / "slurm.log"


class ArrayPaths(NamedTuple):
    """The files of one Slurm job array (a sweep's attempts submitted together), in arrays/<name>/."""

    dir: Path

    @property
    def script(self) -> Path:
        """The array's batch script: it runs, for array task i, the attempt named on line i+1 of `tasks`."""
        return self.dir / "array.sh"

    @property
    def tasks(self) -> Path:  # one attempt folder a line (relative to FRAY_HOME), in array task order
        return self.dir / "tasks"

    def task_log(self, index: str) -> Path:
        """Slurm's own output of array task `index` (sbatch's `%a`) before it moves into its attempt folder."""
        return self.dir / f"task-{index}.log"


class GroupPaths(NamedTuple):
    """A sweep's record, in groups/<group id>/: written once by `fray submit --sweep`, launched by the daemon."""

    dir: Path

    @property
    def group_id(self) -> str:
        return self.dir.name

    @property
    def record(self) -> Path:
        """What the sweep is: the members' common meta and each point (schemas/group.json); written once."""
        return self.dir / "group.json"

    @property
    def launch(self) -> Path:
        """How far the daemon got in turning the record into runs (schemas/launch.json); the daemon's."""
        return self.dir / "launch.json"

    @property
    def control(self) -> Path:
        """What people asked of the members before the daemon wrote their runs (schemas/control.json): front
        ends write it, under the group's lock; each member's run starts with it as its control.json."""
        return self.dir / CONTROL

    def script(self, frozen_name: str) -> Path:
        """The submitted script, frozen once for every member (each member's folder links to it)."""
        return self.dir / frozen_name


class RunPaths(NamedTuple):
    """The files of one run, in runs/<id>/."""

    dir: Path

    @property
    def run_id(self) -> str:
        return self.dir.name

    @property
    def meta(self) -> Path:
        return self.dir / META

    @property
    def meta_copy(self) -> Path:
        return self.dir / contract.META_COPY

    @property
    def control(self) -> Path:
        return self.dir / CONTROL

    @property
    def events(self) -> Path:
        return self.dir / EVENTS

    @property
    def badnode_events(self) -> Path:
        return self.dir / "badnode_events.log"

    @property
    def ended(self) -> Path:
        return self.dir / ENDED

    @property
    def commands_dir(self) -> Path:
        return self.dir / "commands"

    @property
    def attempts_dir(self) -> Path:
        return self.dir / ATTEMPTS

    @property
    def checkpoints_dir(self) -> Path:
        return self.dir / "checkpoints"

    @property
    def code_dir(self) -> Path:
        """The run's copy of its code snapshot, laid out by its first attempt (fray.wrapper.code)."""
        return self.dir / contract.CODE_DIR

    def command(self, command_id: str) -> Path:
        """A runtime command's envelope (written once, by the CLI)."""
        return self.commands_dir / f"{command_id}{contract.COMMAND_SUFFIX}"

    def command_delivered(self, command_id: str) -> Path:
        """Its delivery receipt (written once, by the workload through fray.wrapper.report)."""
        return self.commands_dir / f"{command_id}{contract.DELIVERED_SUFFIX}"

    def command_ack(self, command_id: str) -> Path:
        """Its acknowledgement (written once, by the workload through fray.wrapper.report)."""
        return self.commands_dir / f"{command_id}{contract.ACK_SUFFIX}"

    def command_ids(self) -> list[str]:
        """Every runtime command's id (receipts and temp files are not commands)."""
        pattern = re.compile(contract.COMMAND_ID_PATTERN)
        try:
            names = os.listdir(self.commands_dir)
        except FileNotFoundError:
            return []
        suffix = contract.COMMAND_SUFFIX
        return sorted(n[: -len(suffix)] for n in names if n.endswith(suffix) and pattern.fullmatch(n[: -len(suffix)]))

    def ended_archive(self, stamp: int) -> Path:
        return self.dir / f"ended.{stamp}.json"  # a reactivated run's previous ended.json

    def script(self, frozen_name: str) -> Path:
        return self.dir / frozen_name

    def attempt(self, number: int) -> AttemptPaths:
        return AttemptPaths(self.attempts_dir / str(number))

    @property
    def job(self) -> Path:
        """What a job launched through the cluster API runs: entrypoint kind, environment (schemas/job.json)."""
        return self.dir / "job.json"

    @property
    def payload(self) -> Path:
        """The cloudpickled callable and arguments of a job launched with Entrypoint.from_callable."""
        return self.dir / "payload.pkl"

    def entrypoint_script(self, suffix: str) -> Path:
        """The user's script of a job launched with Entrypoint.from_script (the frozen script is the shim)."""
        return self.dir / f"{ENTRYPOINT_STEM}{suffix}"

    def corrupt_files(self) -> list[Path]:
        """Files of this run and of its attempts that were moved aside as corrupt (`<name>.corrupt-<ts>`)."""
        found: list[Path] = []
        for folder in (self.dir, *self._attempt_dirs()):
            try:
                found.extend(sorted(p for p in folder.iterdir() if CORRUPT_MARK in p.name))
            except (FileNotFoundError, NotADirectoryError):
                continue
        return found

    def _attempt_dirs(self) -> list[Path]:
        try:
            numbers = sorted(int(name) for name in os.listdir(self.attempts_dir) if name.isdigit())
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [self.attempts_dir / str(number) for number in numbers]


@dataclass(frozen=True)
class Home:
    """FRAY_HOME and where everything in it lives."""

    root: Path

    @classmethod
    def resolve(cls, explicit: str | os.PathLike[str] | None = None) -> "Home":
        return cls(resolve_home(explicit))

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    @property
    def daemon_lease(self) -> Path:
        return self.root / DAEMON_LEASE

    @property
    def daemon_log(self) -> Path:
        return self.root / "daemon.log"

    @property
    def nodes(self) -> Path:  # the daemon's inventory of what each backend offers
        return self.root / NODES

    @property
    def blacklist(self) -> Path:
        return self.root / BLACKLIST

    @property
    def audit(self) -> Path:
        return self.root / "audit.jsonl"

    @property
    def locks_dir(self) -> Path:
        return self.root / "locks"

    @property
    def runs_dir(self) -> Path:
        return self.root / RUNS

    @property
    def cache_dir(self) -> Path:  # derived data that may be deleted at any time
        return self.root / "cache"

    @property
    def list_cache(self) -> Path:
        return self.cache_dir / "list-rows.json"

    @property
    def settled_index(self) -> Path:  # the runs settled when the daemon last looked (fray.daemon.settled)
        return self.cache_dir / "daemon-settled.json"

    @property
    def parents_index(self) -> Path:
        return self.cache_dir / "parents.json"  # run id -> parent run id (fray.state.parents_index)

    @property
    def children_index(self) -> Path:
        return self.cache_dir / "children.json"  # parent run id -> children, and runs/'s mtime (parents_index)

    @property
    def namespaces_dir(self) -> Path:
        return self.root / "namespaces"

    @property
    def secret(self) -> Path:  # 0600: an actor connection proves it can read it before anything is unpickled
        return self.root / "secret"

    @property
    def home_id(self) -> Path:  # a random name for this FRAY_HOME, written once: it marks its cloud resources
        return self.root / "home-id"

    def actors_dir(self, namespace: str) -> Path:
        return self.namespaces_dir / namespace / "actors"

    def actor_dir(self, namespace: str, name: str) -> Path:
        """namespaces/<ns>/actors/<name>/: one endpoint file per registered actor."""
        return self.actors_dir(namespace) / name

    def endpoint(self, namespace: str, name: str, actor_id: str) -> Path:
        return self.actor_dir(namespace, name) / f"{actor_id}{RECORD_SUFFIX}"

    @property
    def reservations_dir(self) -> Path:
        return self.root / "reservations"

    def reservation(self, reservation_id: str) -> Path:
        return self.reservations_dir / f"{reservation_id}{RECORD_SUFFIX}"

    @property
    def arrays_dir(self) -> Path:
        return self.root / "arrays"

    def array(self, name: str) -> ArrayPaths:
        return ArrayPaths(self.arrays_dir / name)

    def array_names(self) -> list[str]:
        try:
            return sorted(e.name for e in os.scandir(self.arrays_dir) if e.is_dir())
        except FileNotFoundError:
            return []

    @property
    def groups_dir(self) -> Path:
        return self.root / GROUPS

    def group(self, group_id: str) -> GroupPaths:
        return GroupPaths(self.groups_dir / group_id)

    def new_group(self, group_id: str) -> GroupPaths:
        """Where a sweep's record is built, under a hidden name, before it is renamed into place."""
        return GroupPaths(self.groups_dir / f"{NEW_RUN_PREFIX}{group_id}")

    def group_ids(self) -> list[str]:
        """Every published sweep record's group id."""
        try:
            return sorted(e.name for e in os.scandir(self.groups_dir) if e.is_dir() and not e.name.startswith("."))
        except FileNotFoundError:
            return []

    @property
    def snapshots_dir(self) -> Path:
        """Code snapshots: objects/ (each file's bytes once) and trees/ (fray.state.snapshots)."""
        return self.root / contract.SNAPSHOTS_DIR

    def snapshot_tree(self, tree: str) -> Path:
        return Path(contract.snapshot_tree(str(self.root), tree))

    @property
    def venvs_dir(self) -> Path:
        """Virtual environments of EnvironmentConfig, one per hash of their requirements."""
        return self.root / "venvs"

    def venv(self, key: str) -> Path:
        return self.venvs_dir / key

    def venv_python(self, key: str) -> Path:
        """The interpreter of that environment."""
        return self.venv(key) / "bin" / "python"

    def venv_ready(self, key: str) -> Path:  # written last, once the environment is complete (schemas/venv.json)
        return self.venvs_dir / key / "fray-venv.json"

    def lock_file(self, name: str) -> Path:
        return self.locks_dir / f"{name}.lock"

    # Plain strings, no Path: `fray list` and the daemon's cycle stat and read these for every run.
    def meta_file(self, run_id: str) -> str:
        return f"{self._runs_prefix}{run_id}{os.sep}{META}"

    def control_file(self, run_id: str) -> str:
        return f"{self._runs_prefix}{run_id}{os.sep}{CONTROL}"

    def run_folder(self, run_id: str) -> str:
        return f"{self._runs_prefix}{run_id}"

    @property
    def watch_probe(self) -> Path:
        return self.runs_dir / WATCH_PROBE

    @cached_property
    def _runs_prefix(self) -> str:
        return os.path.join(self.root, RUNS, "")

    def run(self, run_id: str) -> RunPaths:
        return RunPaths(self.runs_dir / run_id)

    def new_run(self, run_id: str) -> RunPaths:  # where a new run is built, hidden, before it is renamed into place
        return RunPaths(self.runs_dir / f"{NEW_RUN_PREFIX}{run_id}")

    def run_ids(self) -> list[str]:  # every run folder's name, oldest first (run ids sort by creation time)
        try:
            names = [e.name for e in os.scandir(self.runs_dir) if e.is_dir() and not e.name.startswith(".")]
        except FileNotFoundError:
            return []
        return sorted(names)
