"""Every cluster in one view, as read models: `fray list` and `fray usage` of this machine and the hosts.

Each cluster answers its own `--json` document (fray.remote.clusters.ask_all: in parallel, each within
the per-host timeout); here they are merged into one document whose every row names its `cluster`
(schemas/cli-clusters-list.json, cli-clusters-usage.json), with one entry per cluster saying how it
answered: a cluster that could not (down, refused, timed out, an error) is `unavailable`, with why.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from fray.ops import human
from fray.remote import clusters, forward

USAGE_SUMS = ("runs", "attempts", "running", "wall_sec", "useful_sec", "lost_sec", "cpu_hours", "gpu_hours",
              "tpu_chip_hours")


def _asked(names: list[str], argv: list[str]) -> tuple[list[clusters.Answer], list[dict[str, Any]]]:
    """Every cluster's answer, and its entry in the view's `clusters` (how it answered)."""
    answers = clusters.ask_all(names, argv, clusters.timeout_sec())
    key = "runs" if forward.command_words(argv)[:1] == ["list"] else "rows"
    states = []
    for answer in answers:
        doc = answer.document
        ok = isinstance(doc, dict) and key in doc
        if ok:
            detail = f"{human.plural(len(doc[key]), 'row')} in {answer.seconds:.1f}s"
        elif isinstance(doc, dict) and "error" in doc:
            detail = str(doc["error"].get("message", "")).splitlines()[0]
        else:
            detail = answer.error or f"exit {answer.exit_code}"
        states.append({"cluster": answer.cluster, "state": "ok" if ok else "unavailable", "detail": detail,
                       "home": doc.get("home") if ok else None,
                       "daemon": doc.get("daemon") if ok and key == "runs" else None,
                       "seconds": round(answer.seconds, 3)})
    return answers, states


def list_view(names: list[str], argv: list[str]) -> dict[str, Any]:
    """`fray list` of every cluster (schemas/cli-clusters-list.json): each cluster's rows in turn."""
    answers, states = _asked(names, argv)
    runs: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    for answer, state in zip(answers, states):
        if state["state"] == "ok":
            runs += [{**row, "cluster": answer.cluster} for row in answer.document["runs"]]
            counts.update(answer.document["counts"])
    return {"generated_at": time.time(), "clusters": states, "counts": dict(counts), "runs": runs,
            "active_only": "--active" in argv}


def usage_view(names: list[str], argv: list[str]) -> dict[str, Any]:
    """`fray usage` of every cluster (schemas/cli-clusters-usage.json): the rows of each, and one total."""
    answers, states = _asked(names, argv)
    rows: list[dict[str, Any]] = []
    total: dict[str, Any] = {"key": "total", "label": "total", **{k: 0 for k in USAGE_SUMS}}
    lost_by_cause: Counter[str] = Counter()
    bases: set[str] = set()
    first: dict[str, Any] = {}
    for answer, state in zip(answers, states):
        if state["state"] != "ok":
            continue
        doc = answer.document
        first = first or doc
        rows += [{**row, "cluster": answer.cluster} for row in doc["rows"]]
        for key in USAGE_SUMS:
            total[key] += doc["total"][key]
        lost_by_cause.update(doc["total"].get("lost_by_cause", {}))
        bases.update(filter(None, [doc["total"].get("basis")]))
    accounted = total["useful_sec"] + total["lost_sec"]  # goodput as fray.core.usage counts it
    total["goodput"] = round(total["useful_sec"] / accounted, 4) if accounted else None
    total["lost_by_cause"] = {cause: round(seconds, 3) for cause, seconds in lost_by_cause.items()}
    total["basis"] = None if not bases else (next(iter(bases)) if len(bases) == 1 else "mixed")
    rows.sort(key=lambda row: -row["wall_sec"])
    return {"generated_at": time.time(), "clusters": states, "by": first.get("by", "run"),
            "since": first.get("since"), "since_text": first.get("since_text", ""), "rows": rows, "total": total}
