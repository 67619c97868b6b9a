"""One run in full: what the dashboard's run screen shows, and the one-line summaries
that `fray status` and that screen both print (mode, progress, requests, failures).

The data is views.status_view (what `fray status --json` prints) plus, for the
dashboard, each attempt's probe results and the frozen script's text.
"""

from __future__ import annotations

from typing import Any

from fray.core import values
from fray.ops import human
from fray.ops.views import read_record, status_view
from fray.state.layout import Home

SCRIPT_SHOWN_BYTES = 256 * 1024
GOOD_CAUSES = frozenset({"success"})
NEUTRAL_CAUSES = frozenset({"stopped", "restarted", "paused", "expired"})


def detail_view(home: Home, run_id: str) -> dict[str, Any]:
    """What the TUI's run screen shows: status_view, plus each attempt's probe results, the
    runtime commands not yet acknowledged, and the frozen script's text."""
    data = status_view(home, run_id, events=50)
    paths = home.run(run_id)
    probes = []
    for attempt in data["attempts"]:
        probe = read_record(paths.attempt(attempt["number"]).probe, "probe")
        if probe is not None:
            probes.append({"attempt": attempt["number"], **probe})
    data["probes"] = probes
    script = data["script"]
    text = None
    if script:
        try:
            with open(paths.script(script["frozen"]), "rb") as handle:
                text = handle.read(SCRIPT_SHOWN_BYTES).decode("utf-8", errors="replace")
        except OSError:
            text = None
    data["script_text"] = text
    return data


def mode_summary(spec: dict[str, Any]) -> str:
    retries = (f"allows {human.plural(spec['max_retries'], 'workload failure')} and "
               f"{spec['max_retries_preemption']} node-side")
    if spec["mode"] == "indefinite":
        keep = values.format_duration(spec["keep_alive_sec"]) if spec["keep_alive_sec"] else "until stopped"
        return f"indefinite (keep alive {keep}), {retries}"
    return f"run_once, {retries}"


def resources_summary(spec: dict[str, Any]) -> str:
    """`2 CPUs, 1 GPU, memory 32G on slurm`."""
    return f"{human.resources(spec)} on {spec['backend']}"


def tasks_summary(spec: dict[str, Any]) -> str | None:
    """What `--replicas N` means for failures (core.placement.reporting); None for a run of one task."""
    count = spec.get("replicas") or 1
    if count < 2:
        return None
    placed = f", on workers sharing {spec['group_by']}" if spec.get("group_by") else ""
    return (f"{count} tasks that live and die together{placed}: one failing stops the others, and the whole "
            "group is retried as the next attempt under --max-retries")


def failures_summary(counters: dict[str, Any], budgets: dict[str, Any] | None = None) -> str:
    """`5 workload, 1 node-side, 2 fast in a row; budget left: 2 of 3 workload, 99 of 100 node-side (last 1d)`."""
    text = (f"{counters['workload_failures']} workload, {counters['node_failures']} node-side, "
            f"{counters['consecutive_fast_failures']} fast in a row")
    if budgets is None:
        return text
    window = f"last {values.format_duration(budgets['window_sec'])}" if budgets["window_sec"] else "since the start"
    left = ", ".join(f"{max(0, b['max'] - b['used'])} of {b['max']} {label}"
                     for label, b in (("workload", budgets["workload"]), ("node-side", budgets["node"])))
    return f"{text}; budget left: {left} ({window})"


def backoff_summary(backoff: dict[str, Any]) -> str:
    """`none after an attempt that made progress (...); else 2s doubling to 5m over those without (now 1)`."""
    if not backoff["base_sec"]:
        return "none (--backoff-base 0)"
    ramp = (f"{values.format_duration(backoff['base_sec'])} doubling to {values.format_duration(backoff['max_sec'])}"
            if backoff["max_sec"] > backoff["base_sec"] else values.format_duration(backoff["base_sec"]))
    return (f"none after an attempt that made progress (its step past every earlier one's, or "
            f"{values.format_duration(backoff['progress_after_sec'])} of running); else {ramp} over the attempts "
            f"in a row without (now {backoff['streak']}), half of it random")


def progress_summary(progress: dict[str, Any], now: float) -> str:
    parts = [f"{key} {human.number(progress[key])}" for key in ("step", "loss", "samples_per_sec", "checkpoint_version")
             if progress.get(key) is not None]
    chunk = (progress.get("extra") or {}).get("fray_chunk")  # a chunk of fray.map's calls (cluster.chunks)
    if isinstance(chunk, dict) and isinstance(chunk.get("calls"), int) and isinstance(chunk.get("first"), int):
        calls, first = chunk["calls"], chunk["first"]
        done = progress.get("step") or 0
        parts = [f"{done} of {calls} calls returned (calls {first}-{first + calls - 1} of the map)"]
    return f"{', '.join(parts) or 'reported'} ({human.age(progress['updated_at'], now)})"


def goodput_summary(figures: dict[str, Any]) -> str:
    """`64% from the steps: useful 2m of 3m06s; lost redone 14s, detection 20s (14 steps redone, 2 restarts)`."""
    share = f"{figures['goodput']:.0%}"
    lost = sorted(((s, c) for c, s in figures["lost_sec"].items() if s >= 0.05), reverse=True)
    lost_text = ", ".join(f"{c.replace('_', ' ')} {human.duration(s)}" for s, c in lost) or "nothing"
    useful = f"useful {human.duration(figures['useful_sec'])} of {human.duration(figures['wall_sec'])}; lost {lost_text}"
    if figures["basis"] != "steps":
        return f"{share} from the attempts' ends (no steps reported): {useful}"
    redone = f" ({human.plural(figures['redone_steps'], 'step')} redone, {human.plural(figures['restarts'], 'restart')})"
    return f"{share} from the steps: {useful}{redone if figures['restarts'] else ''}"


def control_summary(control: dict[str, Any]) -> str:
    asked = []
    if control.get("stop_requested"):
        asked.append("stop")
    if control.get("paused"):
        asked.append("paused")
    if asked and control.get("updated_by"):
        return f"{', '.join(asked)} (by {control['updated_by']})"
    return ", ".join(asked)


def submitted_summary(created_at: float | None, submitted_by: dict[str, Any] | None, now: float) -> str:
    """`14:03:27 by alice@login1`."""
    who = submitted_by or {}
    return f"{human.timestamp(created_at, now)} by {who.get('user')}@{who.get('host')}"


def after_summary(spec: dict[str, Any]) -> str | None:
    """'train (20261122-...-train-3fa2) to succeed; sweep lr (all points) to end': what it waits for (--after)."""
    wanted = {"ok": "to succeed", "fail": "to fail", "any": "to end"}
    parts = [f"{u['name']} ({u['run_id'] if u.get('run_id') else 'sweep ' + u['group'] + ', all points'}) "
             f"{wanted[u['on']]}" for u in spec.get("after") or ()]
    return "; ".join(parts) or None


def synced_code(spec: dict[str, Any]) -> str | None:
    """A run with no snapshot (`--code none`) submitted over `--remote` runs in the synced copy: its path
    and tree hash, as the submit recorded them in the run's env; None for any other run."""
    from fray.remote.forward import SYNCED_CODE_HASH, SYNCED_CODE_PATH

    env = spec.get("env") or {}
    if SYNCED_CODE_PATH not in env:
        return None
    tree = f" (tree {env[SYNCED_CODE_HASH][:12]})" if env.get(SYNCED_CODE_HASH) else ""
    return f"in place, in the synced copy {env[SYNCED_CODE_PATH]}{tree}"


def attempt_took(attempt: dict[str, Any], now: float) -> float | None:
    """How long an attempt ran (until now while it runs); None before it started."""
    started = attempt["started_at"]
    return None if started is None else (attempt["ended_at"] or now) - started


def cause_kind(cause: str | None) -> str:
    """How an attempt's end reads: "good" (success), "bad" (a failure) or "neutral" (fray stopped it, or none yet)."""
    if cause is None or cause in NEUTRAL_CAUSES:
        return "neutral"
    return "good" if cause in GOOD_CAUSES else "bad"


def hang_summaries(attempts: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """What the hang watch says (fray.wrapper.hangwatch): where the last hung or stalled attempt hung, from its
    stacks, and what the running one is stuck in: [("hung in", "worker, train.py:12 (attempt 2, hang_idle; ...)")]."""
    facts = []
    hung = next((a for a in reversed(attempts) if (a.get("watch") or {}).get("stacks")), None)
    if hung is not None:
        stacks = hung["watch"]["stacks"]
        why = f"attempt {hung['number']}" + (f", {hung['cause']}" if hung["cause"] else "")
        if stacks["hung_in"]:
            facts.append(("hung in", f"{stacks['hung_in']} ({why}; all stacks: fray logs --stacks)"))
        else:
            facts.append(("hung in", f"unknown ({why}): {'; '.join(stacks['notes']) or 'no stack could be taken'}"))
    watch = (attempts[-1].get("watch") or {}) if attempts and attempts[-1]["state"] != "ended" else {}
    for stuck in watch.get("stuck_io") or ():
        facts.append(("stuck", f"in I/O (D state) on {stuck['wchan']}: pid {stuck['pid']} for "
                               f"{values.format_duration(stuck['for_sec'])} (usually the file system, not the job)"))
    if watch.get("could_not_see"):
        facts.append(("not seen", watch["could_not_see"]))
    return facts


def last_failure(attempts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The last attempt that failed and left a failure record (not one fray stopped on request)."""
    return next((a for a in reversed(attempts)
                 if a.get("failure") and a["cause"] not in NEUTRAL_CAUSES | GOOD_CAUSES), None)


def clock_summaries(attempts: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The latest attempt's node clock, when it is off the daemon's enough to say: [("node clock", "...")]."""
    latest = attempts[-1] if attempts else None
    offset = latest.get("clock_offset_sec") if latest else None
    if latest is None or not human.clock_off(offset):
        return []
    return [("node clock", f"{latest['node'] or 'its node'} is {human.clock_offset(offset)} the daemon's host: "
                           "fray judges liveness on its own clock, but the job's own timestamps are off")]
