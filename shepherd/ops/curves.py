"""A run's metric curves: the data `fray plot` and the dashboard's run screen draw, and how they draw it.

`curves_view` reads the run's history (fray.ops.history) and gives, for one
metric (loss by default, else the first reported), each attempt's points
against step and against wall time (seconds since the run was created),
the restarts, the checkpoints (at the metric's value at their step), and
the points where the metric was NaN, infinite or too large to draw (past
DRAWABLE: left out of the curve, marked on it). A run without meta.json, or without steps, has no curve
(`attempts` empty) and a `note` saying why.

`sweep_view` overlays a sweep's runs the same way, one curve per run.

`draw(plt, view, axis)` issues plotext calls on `plt`: the plotext module
itself in the terminal (`fray plot`), a textual-plotext widget's `plt` in the
dashboard. It never imports plotext, so `fray list` does not pay for it.
"""

from __future__ import annotations

import bisect
from typing import Any

from fray.core import history
from fray.core.history import DEFAULT_METRIC
from fray.core.model import Meta
from fray.errors import CorruptFileError
from fray.core.sweeps import lookup
from fray.ops import views
from fray.ops.history import run_history
from fray.state import store
from fray.state.layout import Home

# plotext colour names, one per attempt (cycled): distinct on dark and light terminals alike
COLOURS = ("cyan", "orange", "green", "magenta", "blue", "red", "yellow")
AXES = ("step", "time")
# plotext rounds tick values through 10**8 * value: past this it overflows, so such values are marked, not drawn
DRAWABLE = 1e100


def curves_view(home: Home, run_id: str, metric: str | None = None) -> dict[str, Any]:
    try:
        raw = store.read_json(home.meta_file(run_id), "meta")
    except CorruptFileError:
        raw = None
    if raw is None:
        return _empty(run_id, run_id, metric, "meta.json is missing or unreadable")
    meta = Meta.from_dict(raw)
    series = run_history(home, meta).series
    chosen = metric or series.default_metric()
    view = _empty(run_id, meta.name, chosen, None)
    view["metrics"] = series.metrics
    view["skipped"] = series.skipped
    view["params"] = (meta.group or {}).get("params")  # a sweep's point
    if chosen is None or chosen not in series.metrics:
        view["note"] = ("no steps reported yet (report.progress(step=..., loss=...))" if not series.points
                        else f"no metric {chosen!r}: reported {', '.join(series.metrics) or 'none'}")
        return view
    origin = meta.created_at
    by_attempt: dict[int, dict[str, Any]] = {}
    drawable = [p for p in history.finite_values(series, chosen) if abs(p.metrics[chosen]) < DRAWABLE]
    too_big = [p for p in history.finite_values(series, chosen) if abs(p.metrics[chosen]) >= DRAWABLE]
    for p in drawable:
        curve = by_attempt.setdefault(p.attempt, {"attempt": p.attempt, "steps": [], "times": [], "values": []})
        curve["steps"].append(p.step)
        curve["times"].append(round(p.t - origin, 3))
        curve["values"].append(p.metrics[chosen])
    view["attempts"] = [by_attempt[n] for n in sorted(by_attempt)]
    view["restarts"] = [{"attempt": r.attempt, "step": r.step, "time": round(r.t - origin, 3),
                         "redone_steps": r.redone_steps} for r in series.restarts]
    view["checkpoints"] = [{**c, "time": round(c["t"] - origin, 3)} for c in _checkpoints(series, chosen, by_attempt)]
    view["not_finite"] = [{"attempt": p.attempt, "step": p.step, "time": round(p.t - origin, 3),
                           "value": repr(p.metrics[chosen])}
                          for p in [*history.not_finite_points(series, chosen), *too_big]]
    return view


def sweep_view(home: Home, group: str, metric: str | None = None) -> dict[str, Any]:
    """A sweep's runs overlaid: one curve per run (its points not redone, all attempts), in index order.

    Shaped as `curves_view` (so `draw` and the PNG take it), each curve labelled
    by its run; no restarts or checkpoints are marked (`fray plot RUN` has them).
    `points` has every run of the sweep, drawn or not: its parameters, status, and
    the metric's last step and value."""
    group_id, members = lookup.resolve(views.list_view(home, fold=False)["runs"], group)
    view = {**_empty(group_id, group_id, metric, None), "points": []}
    names: dict[str, None] = {}
    for index, row in enumerate(members):
        one = curves_view(home, row["run_id"], metric or DEFAULT_METRIC)
        names.update(dict.fromkeys(one["metrics"]))
        steps, times, values = [], [], []
        for curve in one["attempts"]:
            steps += curve["steps"]
            times += curve["times"]
            values += curve["values"]
        view["skipped"] += one["skipped"]
        view["not_finite"] += one["not_finite"]
        view["points"].append({"run_id": row["run_id"], "name": row["name"], "curve": index + 1,
                               "params": one.get("params") or {}, "status": row["status"], "icon": row["icon"],
                               "step": steps[-1] if steps else None, "value": values[-1] if values else None})
        if values:
            view["attempts"].append({"attempt": index + 1, "label": row["name"], "steps": steps, "times": times,
                                     "values": values})
    view["metric"] = metric or DEFAULT_METRIC
    view["metrics"] = list(names)
    view["runs"] = len(members)
    if not view["attempts"]:
        view["note"] = f"no run of group {group_id} reported {view['metric']!r} yet"
    return view


def _empty(run_id: str, name: str, metric: str | None, note: str | None) -> dict[str, Any]:
    return {"run_id": run_id, "name": name, "metric": metric, "metrics": [], "attempts": [], "restarts": [],
            "checkpoints": [], "not_finite": [], "skipped": 0, "note": note}


def _checkpoints(series: history.Series, metric: str, curves: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each checkpoint with the metric's value at its step in its attempt (the last point at or before it)."""
    found = []
    for mark in series.checkpoints:
        curve = curves.get(mark.attempt)
        if not curve:
            continue
        at = bisect.bisect_right(curve["steps"], mark.step) - 1
        if at >= 0:
            found.append({"attempt": mark.attempt, "name": mark.name, "step": mark.step, "t": mark.t,
                          "value": curve["values"][at]})
    return found


def draw(plt: Any, view: dict[str, Any], axis: str) -> None:
    """Draw `view` against `axis` ("step" or "time") on plotext's `plt` (the caller clears and sizes it)."""
    key = "steps" if axis == "step" else "times"
    plt.title(f"{view['metric'] or 'no metric'} by {'step' if axis == 'step' else 'wall time'}")
    plt.xlabel("step" if axis == "step" else "seconds since submit")
    for curve in view["attempts"]:
        colour = COLOURS[(curve["attempt"] - 1) % len(COLOURS)]
        label = curve.get("label") or f"attempt {curve['attempt']}"
        plt.plot(curve[key], curve["values"], color=colour, marker="braille", label=label)
    for restart in view["restarts"]:
        plt.vline(restart["step" if axis == "step" else "time"], "red")
    marks = view["checkpoints"]
    if marks:
        plt.scatter([m["step" if axis == "step" else "time"] for m in marks], [m["value"] for m in marks],
                    marker="o", color="white", label="checkpoint")
    values = [v for curve in view["attempts"] for v in curve["values"]]
    if view["not_finite"] and values:
        top = max(values)
        plt.scatter([p["step" if axis == "step" else "time"] for p in view["not_finite"]],
                    [top] * len(view["not_finite"]), marker="x", color="red", label="nan/inf")


def next_metric(view: dict[str, Any] | None) -> str | None:
    """The metric `m` moves to: the one after the view's among those reported (None: none reported)."""
    names = (view or {}).get("metrics") or []
    if not names:
        return None
    current = view["metric"] if view else None
    return names[(names.index(current) + 1) % len(names)] if current in names else names[0]


def summary(view: dict[str, Any]) -> str:
    """One line under the plot: what it shows and what it left out."""
    if not view["attempts"]:
        return view["note"] or "nothing to plot"
    points = sum(len(c["values"]) for c in view["attempts"])
    shown = (f"{len(view['attempts'])} of {view['runs']} runs" if "runs" in view
             else f"{len(view['attempts'])} attempt(s)")
    colours = ", ".join(f"{c.get('label') or 'attempt ' + str(c['attempt'])} {COLOURS[(c['attempt'] - 1) % len(COLOURS)]}"
                        for c in view["attempts"])
    parts = [f"{view['metric']}: {points} points in {shown} ({colours})"]
    if view["restarts"]:
        redone = sum(r["redone_steps"] for r in view["restarts"])
        parts.append(f"{len(view['restarts'])} restart(s) (red lines), {redone} steps redone")
    if view["checkpoints"]:
        parts.append(f"{len(view['checkpoints'])} checkpoint(s) (o)")
    if view["not_finite"]:
        parts.append(f"{len(view['not_finite'])} not finite (x)")
    if view["skipped"]:
        parts.append(f"{view['skipped']} unreadable lines or values skipped")
    others = [m for m in view["metrics"] if m != view["metric"]]
    if others:
        parts.append(f"also: {', '.join(others)}")
    return "; ".join(parts)
