"""Runs from the CLI's side: creating one, and writing a person's requests into control.json (the CLI is
its only writer); finding one by what a person typed is fray.state.run_lookup's.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Callable, NamedTuple

from fray.state import doorbell, meta_file, run_code, store, upstreams

from fray.core import directives
from fray.errors import UsageError
from fray.state import layout
from fray.state.run_lookup import read_control, read_meta, resolve, slug
from fray.state.layout import Home, RunPaths
from fray.core.model import Control, Meta, Phase, RunSpec
from fray.wrapper import contract

CONTROL_OPS = ("stop", "start", "restart", "pause", "unpause")
SYNC_EACH_UP_TO = 1  # runs written together; more share one barrier (write_runs)


def make_run_id(name: str, now: float, suffix: str | None = None) -> str:
    """Sortable and readable: `YYYYMMDD-HHMMSS-<name>-<4 hex>` (UTC)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"{stamp}-{slug(name)}-{suffix or _random_hex()}"


def _random_hex() -> str:
    """Four random hex digits, as secrets.token_hex(2) draws them (os.urandom), without importing secrets
    (base64, hmac): every `fray submit` draws one before its run exists."""
    return os.urandom(2).hex()


class SubmitOptions(NamedTuple):
    script: Path | None  # None with `module`
    overrides: dict[str, Any]  # RunSpec field -> value, from CLI flags (and run_code.FIELDS, as typed)
    name: str | None = None
    args: tuple[str, ...] = ()
    workdir: str | None = None  # where fray was run (default: the current folder)
    module: str | None = None  # `fray submit -m pkg.train`
    force: bool = False  # snapshot a project over the size limit


class Prepared(NamedTuple):
    """A script read and checked for submission: its name, spec, bytes and frozen file name."""

    name: str
    spec: RunSpec
    data: bytes
    source: str
    frozen: str
    workdir: str
    in_place: bool = False  # --code none: run the script where it is
    left_out: dict[str, Any] | None = None  # what the snapshot left out (runs/<id>/left-out.json)


def create_run(home: Home, options: SubmitOptions, now: float | None = None,
               check: Callable[[Prepared], None] | None = None) -> Meta:
    """Parse the script's directives, snapshot its code and write the new run folder atomically; `check` may
    refuse it first (before the snapshot is stored)."""
    now = time.time() if now is None else now
    ready = prepare(options, home, check)
    meta = new_meta(ready.name, now, ready.workdir, ready.spec, source=ready.source, frozen=ready.frozen,
                    script=ready.data, in_place=ready.in_place)
    files = {meta.script["frozen"]: ready.data}
    if ready.left_out is not None:
        # The wrapper reads it (fray.wrapper.left_out). Stdlib json: a job with fray from a bare wheel imports this.
        files[contract.LEFT_OUT] = (json.dumps(ready.left_out, ensure_ascii=False) + "\n").encode()
    write_run(home, NewRun(meta, files))
    return meta


def prepare(options: SubmitOptions, home: Home, check: Callable[[Prepared], None] | None = None) -> Prepared:
    """Read the script, build its spec from its directives and the flags, let `check` refuse it, and take its
    code snapshot; raise UsageError on anything wrong (nothing is written but the snapshot's
    content-addressed files)."""
    cwd = Path(options.workdir or os.getcwd())
    script = options.script
    if options.module is not None:
        if script is not None:
            raise UsageError(f"give a script or -m {options.module}, not both")
        script = run_code.module_script(options.module,
                                        run_code.module_root(options.overrides.get("code"), cwd, home))
    elif script is None:
        raise UsageError("give the script to run (or -m MODULE)")
    data = read_script(script)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{script} is not UTF-8 text; submit a script (Python, bash, ...)") from None
    parsed = directives.parse_script(text, str(script))
    given = {field: run_code.Given(parsed.overrides.pop(field), script.resolve().parent)
             for field in run_code.FIELDS if field in parsed.overrides}
    flags = dict(options.overrides)
    given.update({field: run_code.Given(flags.pop(field), cwd) for field in run_code.FIELDS if field in flags})
    spec = directives.build_spec(parsed, flags, workdir=str(cwd), args=list(options.args))
    settled = run_code.settle(home, script, options.module, given, cwd)
    for field, value in settled.fields.items():
        setattr(spec, field, value)
    name = options.name or parsed.name or (options.module.rsplit(".", 1)[-1] if options.module else script.stem)
    spec.after = upstreams.resolve(home, spec.after, name, resolve)  # before the snapshot: a bad name writes nothing
    ready = Prepared(name, spec, data, str(script.resolve()), frozen_name(layout.FROZEN_SCRIPT_STEM, script.suffix),
                     spec.workdir, in_place=settled.root is None and options.module is None)
    if check is not None:
        check(ready)
    spec.code, left_out = settled.snapshot(home, options.force)
    return Prepared(ready.name, ready.spec, ready.data, ready.source, ready.frozen, ready.workdir, ready.in_place,
                    left_out)


def entry_script(paths: RunPaths, meta: Meta) -> Path:
    """The script an attempt's wrapper is given: the submitted file itself for --code none, else the frozen
    copy (a run with a snapshot runs the snapshot's copy of it, spec.code.entry)."""
    if meta.script.get("in_place"):
        return Path(meta.script["source"])
    return paths.script(meta.script["frozen"])


def frozen_name(stem: str, suffix: str) -> str:
    """`stem` with the script's suffix when it is a plain one (.py, .sh): the interpreter is chosen by it."""
    return stem + (suffix if re.fullmatch(r"\.[A-Za-z0-9_]+", suffix) else "")


def new_meta(name: str, now: float, workdir: str, spec: RunSpec, source: str, frozen: str, script: bytes,
             in_place: bool = False, **family: Any) -> Meta:
    """The meta.json of a run not yet started: who submitted it, from where, and its frozen script
    (`in_place`: --code none, attempts run the script at `source` instead)."""
    return Meta(
        run_id=make_run_id(name, now), name=name[:128], created_at=now,
        submitted_by={"user": getpass.getuser(), "host": os.uname().nodename, "cwd": workdir},
        script={"source": source, "frozen": frozen, "sha256": hashlib.sha256(script).hexdigest(),
                **({"in_place": True} if in_place else {})},
        spec=spec, phase=Phase.QUEUED.value, wait_reason="waiting for the daemon", **family,
    )


class NewRun(NamedTuple):
    """Everything a new run's folder holds: its meta, `files` by name (the frozen script; a launched job's
    payload or script; a path inside the folder: a sweep member's first batch script and events) and, for a
    job launched through the cluster API, its job.json."""

    meta: Meta
    files: Mapping[str, bytes]
    job: dict[str, Any] | None = None


def write_run(home: Home, new: NewRun) -> None:
    """The one way a run comes to exist: its folder built whole under a hidden name, then renamed into place."""
    write_runs(home, [new])


def _unique_ids(home: Home, new: list[NewRun]) -> None:
    for item, run_id in zip(new, unique_ids(home, [item.meta.run_id for item in new])):
        item.meta.run_id = run_id


def unique_ids(home: Home, run_ids: list[str]) -> list[str]:
    """`run_ids` with a fresh random suffix for each one taken (two runs of one name in one second share
    the rest of it; 50 of them collide on 4 hex digits about once in 50 tries)."""
    taken: set[str] = set()
    fresh = []
    for run_id in run_ids:
        while run_id in taken or os.path.lexists(home.run_folder(run_id)):
            run_id = run_id[:-4] + _random_hex()
        taken.add(run_id)
        fresh.append(run_id)
    return fresh


def write_runs(home: Home, new: list[NewRun], control: bool = True, keep_ids: bool = False) -> None:
    """Write several runs, all of them or (on any error) none: every folder is built before any is shown,
    so readers (and the daemon) never see a half-made folder nor part of a group.

    `control=False`: no control.json (the daemon writing a sweep's runs: that file is the CLI's, and a run
    without one has had nothing asked of it). `keep_ids`: the ids were drawn already (a sweep's record)."""
    publish_runs(home, new, stage_runs(home, new, control, keep_ids))


def stage_runs(home: Home, new: list[NewRun], control: bool = True, keep_ids: bool = False) -> list[RunPaths]:
    """write_runs' first half: every folder built, whole and durable, under a hidden name (none on error)."""
    store.ensure_home(home)
    if not keep_ids:
        _unique_ids(home, new)
    staged: list[RunPaths] = []
    # Several runs (a sweep, a map's chunks): their files are made durable by one barrier before any folder is
    # shown, instead of an fsync each (thousands of milliseconds for a 1,000-point sweep, 50 for a map's 4 runs).
    batched = len(new) > SYNC_EACH_UP_TO
    try:
        for item in new:
            staged.append(_stage_run(home, item, sync=not batched, control=control))
        if batched:
            from fray.state.commit_batch import barrier

            barrier(home.root)  # syncfs of FRAY_HOME's file system alone, not os.sync's of every one
    except BaseException:
        discard_staged(staged)
        raise
    return staged


def publish_runs(home: Home, new: list[NewRun], staged: list[RunPaths], asked: Control | None = None) -> None:
    """write_runs' second half: each staged folder renamed into place. `asked`: a control record the runs
    start with (what people asked of a sweep's points before the daemon wrote them), added first."""
    if asked is not None:
        data = asked.to_dict()
        for paths in staged:
            store.write_json(paths.control, data, "control", sync=False)
        store.sync_all()
    for item, paths in zip(new, staged):
        os.rename(paths.dir, home.run(item.meta.run_id).dir)
    doorbell.ring(home, [item.meta.run_id for item in new])


def _stage_run(home: Home, new: NewRun, sync: bool = True, control: bool = True) -> RunPaths:
    """Build a new run's folder under a hidden name: files, job.json, control.json, meta.json (written last).
    Nothing is left behind on failure."""
    meta = new.meta
    staging = home.new_run(meta.run_id)
    store.make_dirs(staging.dir)
    try:
        for name, data in new.files.items():
            path = staging.script(name)
            if os.sep in name:  # a file in a subfolder (an attempt's batch script)
                store.make_dirs(path.parent)
            store.write_bytes_atomic(path, data, sync)
        if new.job is not None:
            store.write_json(staging.job, new.job, "job", sync)
        if control:
            store.write_json(staging.control, Control(updated_at=meta.created_at,
                                                      updated_by=meta.submitted_by["user"]).to_dict(), "control", sync)
        meta_file.write(staging, meta.to_dict(), sync)
    except BaseException:
        discard_staged([staging])
        raise
    return staging


def discard_staged(staged: list[RunPaths]) -> None:
    """Folders staged but not published: gone (renamed ones are not under these names any more)."""
    for paths in staged:
        shutil.rmtree(paths.dir, ignore_errors=True)


def read_script(path: Path) -> bytes:
    """The script's bytes; a UsageError saying why not (missing, a folder, unreadable), as `fray submit` reports it."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"script not found: {path}") from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a directory; give the script to run") from None
    except PermissionError:
        raise UsageError(f"cannot read {path}: permission denied") from None


def set_overrides(home: Home, run_id: str, settings: dict[str, Any]) -> Control:
    """`fray control config-set`: change safe settings of a run (validated as a whole). A live run uses them
    from the daemon's next cycle; an ended one from its next `fray control start`, so "a larger budget, then
    start it again" works in that order (the order `fray status` prints under What now)."""
    from fray.core.policy import SAFE_OVERRIDES

    unsafe = sorted(set(settings) - SAFE_OVERRIDES)
    if unsafe:
        allowed = ", ".join(sorted(key.replace("_sec", "").replace("_", "-") for key in SAFE_OVERRIDES))
        raise UsageError(f"cannot change {', '.join(unsafe)} after submit; the settings that can change: {allowed}")
    meta = read_meta(home, run_id)
    with store.lock(home, f"control-{run_id}"):
        control = read_control(home, run_id)
        merged = {**control.overrides, **settings}
        directives.check_spec(RunSpec.from_dict({**meta.spec.to_dict(), **merged}))
        control.overrides = merged
        _stamp_and_write(home, run_id, control)
    from fray.state import audit  # the audit log (socket for the host name): control requests, not submit

    audit.record(home, "control.config-set", run_id, {"settings": settings})
    return control


def _stamp_and_write(home: Home, run_id: str, control: Control, sync: bool = True) -> None:
    control.updated_at = time.time()
    control.updated_by = getpass.getuser()
    store.write_json(home.run(run_id).control, control.to_dict(), "control", sync)
    if sync:
        doorbell.ring(home, [run_id])


def request(home: Home, run_id: str, op: str) -> Control:
    """Record a person's request for a run in control.json; the daemon acts on it."""
    _check_op(op)
    control = _ask(home, run_id, op, read_meta(home, run_id), sync=True)
    from fray.state import audit  # as in set_overrides

    audit.record(home, f"control.{op}", run_id)
    return control


def request_many(home: Home, run_ids: list[str], op: str) -> tuple[dict[str, tuple[Meta, Control]], dict[str, str]]:
    """`request` of many runs (a sweep's): what was asked (run id -> its meta before the request, the control
    record written) and the runs it does not apply to (run id -> why). The control.json files are written
    without an fsync each and made durable together by one barrier before this returns, their audit lines
    appended in one write and the daemon rung once: pausing 10,000 points took a minute of fsyncs before."""
    _check_op(op)
    asked: dict[str, tuple[Meta, Control]] = {}
    refused: dict[str, str] = {}
    for run_id in run_ids:
        try:
            meta = read_meta(home, run_id)
            asked[run_id] = (meta, _ask(home, run_id, op, meta, sync=False))
        except UsageError as exc:  # it changed since the caller looked (ended meanwhile)
            refused[run_id] = str(exc)
    if asked:
        from fray.state import audit
        from fray.state.commit_batch import barrier

        barrier(home.root)
        doorbell.ring(home, asked)
        audit.record_many(home, f"control.{op}", list(asked))
    return asked, refused


def _check_op(op: str) -> None:
    if op not in CONTROL_OPS:
        raise UsageError(f"unknown control operation {op!r}; choose one of {', '.join(CONTROL_OPS)}")


def why_not(op: str, meta: Meta, control: Control) -> str | None:
    """Why `op` does not apply to the run (None: it does). A stop, pause or restart of an ended run does not,
    unless a start asked of it is still to be applied: `fray control start --group S` then `stop --group S` at
    once must stop what the start reopens. A start applies to an ended run only."""
    ended = meta.phase == Phase.ENDED.value and control.start_nonce <= meta.applied.start_nonce
    if op in ("stop", "restart", "pause") and ended:
        return f"already ended ({meta.end.status if meta.end else ''})"
    if op == "start" and not ended:
        return "has not ended"
    return None


def _check_applies(op: str, meta: Meta, control: Control, run_id: str) -> None:
    why = why_not(op, meta, control)
    if why is None:
        return
    if op == "start":
        raise UsageError(f"run {run_id} {why}; use `fray control restart` to start a new attempt now")
    raise UsageError(f"run {run_id} has {why}; use `fray control start` to run it again")


def _ask(home: Home, run_id: str, op: str, meta: Meta, sync: bool) -> Control:
    with store.lock(home, f"control-{run_id}"):
        control = read_control(home, run_id)
        _check_applies(op, meta, control, run_id)
        control.ask(op, meta.applied)
        _stamp_and_write(home, run_id, control, sync)
    return control
