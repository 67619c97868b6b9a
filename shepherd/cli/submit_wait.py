"""What `fray submit` prints for a new run, and `--wait`: each change told on stderr, the end on stdout.

Shared by the click command (fray.cli.submit) and the console script's fast path (fray.cli.entry), which
takes `fray submit SCRIPT [--wait] [--json]` without click: its time to the run's first heartbeat and to the
end of a short run is mostly this process's start (tests/bench/bench_scale.py), so the fast path imports
this module (the row views, the wait, the renderers) once the run is written, while the daemon starts it.
"""

from __future__ import annotations

from typing import Any, Callable

from fray.cli import output, render
from fray.core.model import Meta
from fray.core.waiting import EXIT_NEVER_STARTS
from fray.ops import declared, human, lookup, submit as submitting
from fray.state.layout import Home

SUCCESS = "completed_success"
EXIT_INTERRUPTED = 130


def finish(home: Home, meta: Meta, data: dict[str, Any], as_json: bool, prefix: str,
           wait: Callable[[], Meta | None] | None) -> int:
    """Print the new run (`data`, fray.ops.submit.submitted_view); with `wait` (the run's meta once it has
    ended, None if it can never start here), wait and print how it ended. The exit code: 0 when not waiting
    or it succeeded, 1 if it did not, 3 if it can never start here, 130 when the wait was interrupted."""
    if wait is None:
        output.emit(data, as_json, render_submitted)
        return 0
    if not as_json:
        for text in render_submitted(data):
            output.line(text)
    try:
        ended = wait()
    except KeyboardInterrupt:
        output.note(f"\nstopped watching; run {meta.run_id} goes on (`{prefix} status {meta.run_id}`)")
        return EXIT_INTERRUPTED
    if ended is None:  # it can never start here: waiting longer changes nothing (the reason was just told)
        if as_json:
            output.json_line(data)  # "end": null: it has not ended
        output.note(f"gave up waiting: run {meta.run_id} can never start here; it is left as it is "
                    f"(`{prefix} control stop {meta.run_id}`)")
        return EXIT_NEVER_STARTS
    data["end"] = submitting.end_view(home, ended)
    if as_json:
        output.json_line(data)
    else:
        for text in render_end(data):
            output.line(text)
    return 0 if ended.end and ended.end.status == SUCCESS else 1


def narrated_wait(home: Home, run_id: str) -> Meta | None:
    """Wait for the run, telling each change on stderr; its meta once ended, None if it can never start."""
    from fray.ops import wait as waiting  # only a wait loads it (the click command's plain submit does not)

    from fray.cli.narration import Narrator

    narrator = Narrator.for_stderr()
    watch = waiting.Watch(home, [run_id], narrator.told)
    try:
        code = watch.run(on_tick=lambda: narrator.live(watch.live()))
    finally:
        narrator.done()
    if code == EXIT_NEVER_STARTS:
        return None
    return lookup.read_meta(home, run_id)


def render_submitted(data: dict[str, Any]) -> list[str]:
    spec = data["spec"]
    daemon = data["daemon"]
    lines = [
        f"submitted run {render.style(data['run_id'], bold=True)} ({data['name']})",
        *render.key_values([
            ("mode", f"{spec['mode']} on {spec['backend']}, {human.resources(spec)}"),
            ("script", data["script"]["source"]),
            ("code", human.code(spec)),
            ("python", human.interpreter(spec)),
            *([("progress", declared.progress_sources(spec))] if declared.progress_sources(spec) else []),
            *([("retry args", declared.retry_args_line(spec, []))] if spec.get("retry_args") else []),
            ("files", data["dir"]),
            ("daemon", render.style(f"{daemon['state']}: {daemon['detail']}", **render.DAEMON_COLOURS.get(daemon["state"], {}))),
            *([("slurm", _estimate(data["slurm_estimate"]))] if data.get("slurm_estimate") else []),
        ]),
    ]
    left_out = declared.left_out_lines(spec)
    if left_out:
        lines.append(render.style("left out of the snapshot: ", fg="yellow") + left_out[0])
        lines.extend(left_out[1:])
    lines.append("next:")
    lines.extend(f"  {hint}" for hint in data["next"])
    return lines


def _estimate(estimate: dict[str, Any]) -> str:
    """When Slurm expects the first attempt to start (`sbatch --test-only`), and where."""
    where = f" on {estimate['nodes']}" + (f" (partition {estimate['partition']})" if estimate.get("partition") else "")
    at = estimate.get("start_at")
    when = f"at {human.timestamp(at)}" if at is not None else "(no time given)"
    return f"expected to start {when}{where}, says sbatch --test-only"


def render_end(data: dict[str, Any]) -> list[str]:
    end = data["end"]
    if end is None:
        return []
    lines = [f"run {data['run_id']} ended: {render.status_label(end['status'])}: {end['reason']}"
             f" ({human.plural(end['attempts'], 'attempt')})"]
    if end.get("result"):
        lines.append(f"result: {output.dumps(end['result'])}")
    if end["status"] != SUCCESS:
        lines.append(f"see: {data['next'][0]}")
    return lines
