"""Submitting a script: what it would do (a preview that writes nothing), creating the run, and what it became.

`fray submit` and the dashboard's new-run screen both create runs here
(runs.create_run: the one way a run comes to be); each front end then makes
sure a daemon serves FRAY_HOME (`ensure_daemon`, which the dashboard runs in
a thread so the screen never waits for it).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Sequence

from fray.backends import offers
from fray.core import directives, values
from fray.core.model import Meta
from fray.errors import StateError, UsageError
from fray.state import runs
from fray.state.layout import Home


def script_args(text: str) -> tuple[str, ...]:
    """The script's arguments from one line typed as a shell would read it."""
    try:
        return tuple(shlex.split(text))
    except ValueError as exc:
        raise UsageError(f"arguments: {exc}") from None


def preview(script: Path, args: str = "") -> tuple[str, str | None]:
    """What submitting `script` would do, without writing anything: (summary, error)."""
    try:
        data = runs.read_script(script)  # the same errors as fray submit
        text = data.decode("utf-8")
    except UsageError as exc:
        return "", str(exc)
    except UnicodeDecodeError:
        return "", f"{script} is not UTF-8 text; submit a script (Python, bash, ...)"
    try:
        parsed = directives.parse_script(text, str(script))
        spec = directives.build_spec(parsed, {}, workdir=str(Path.cwd()), args=shlex.split(args))
    except (UsageError, ValueError) as exc:
        return "", str(exc)
    from fray.ops import human  # the dashboard's preview: not `fray submit`'s import

    name = parsed.name or script.stem
    mode = spec.mode + (f", keep alive {values.format_duration(spec.keep_alive_sec)}" if spec.keep_alive_sec else "")
    lines = [f"name: {name}", f"mode: {mode}", f"on: {spec.backend}, {human.resources(spec.to_dict())}"]
    if spec.sbatch:
        lines.append(f"#SBATCH lines: {len(spec.sbatch)}")
    return "\n".join(lines), None


def submit(home: Home, script: Path | None, args: Sequence[str] = (), overrides: dict[str, Any] | None = None,
           name: str | None = None, module: str | None = None, force: bool = False) -> Meta:
    """Create the run with its code snapshot (everything is checked first, fray.backends.offers included: a
    bad script, directive, interpreter or project, or a request the backend can never meet, writes no run)."""
    return runs.create_run(home, runs.SubmitOptions(script=script, overrides=overrides or {}, name=name or None,
                                                    args=tuple(args), module=module, force=force),
                           check=lambda ready: offers.check_prepared(home, ready))


def ensure_daemon(home: Home, meta: Meta) -> None:
    """Make sure a daemon serves the new run; the error says the run exists and how to start one."""
    from fray.daemon import lease  # after the run is written: the daemon may start it meanwhile

    try:
        lease.ensure_running(home)
    except StateError as exc:
        raise StateError(f"run {meta.run_id} was created, but {exc}; it starts once a daemon runs "
                         f"(`fray daemon start`)") from None


def submitted_view(home: Home, meta: Meta, prefix: str = "fray") -> dict[str, Any]:
    """A new run: its files, spec, the daemon serving it and, on Slurm, when `sbatch --test-only` expects it to
    start (schemas/cli-submit.json); `prefix` starts the hints."""
    from fray.daemon import lease  # the daemon's state as `fray status` words it; after the run is written

    paths = home.run(meta.run_id)
    view = {
        "run_id": meta.run_id,
        "name": meta.name,
        "dir": str(paths.dir),
        "script": {"source": meta.script["source"], "frozen": str(paths.script(meta.script["frozen"]))},
        "spec": meta.spec.to_dict(),
        "daemon": lease.view(home),
        "next": [f"{prefix} status {meta.run_id}", f"{prefix} logs {meta.run_id} -f"],
        "end": None,
    }
    estimate = offers.estimate(meta.spec)  # what the submit check was told, kept: no second call
    if estimate is not None:
        view["slurm_estimate"] = estimate
    return view


def end_view(home: Home, meta: Meta) -> dict[str, Any] | None:
    """How a run waited for ended, with the result its workload reported; None while it has not."""
    if meta.end is None:
        return None
    from fray.ops import wait  # only --wait gets here

    record = wait.ended_record(home, meta.run_id) or {}
    return {"status": meta.end.status, "reason": meta.end.reason, "at": meta.end.at,
            "attempts": len(meta.attempts), "result": record.get("result")}
