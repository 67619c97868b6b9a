"""What a run declared about its job, in words for `fray submit` and `fray status`: what its code snapshot
left out (and how to bring it back), where its relative outputs land, what fray reads as its progress,
and which attempts got its --retry-args.
"""

from __future__ import annotations

from typing import Any

from fray.ops.human import plural

RULES_SHOWN = 5


def size(count: int) -> str:
    """`1.2 GB`, `340 kB`, `12 B`."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def left_out_lines(spec: dict[str, Any]) -> list[str]:
    """What the snapshot did not take, one line per rule, the largest first; [] when it took everything."""
    summary = (spec.get("code") or {}).get("left_out")
    if not summary:
        return []
    at_least = "" if summary["counted"] else "at least "
    lines = [f"{at_least}{plural(summary['files'], 'file')}, {size(summary['bytes'])}, by "
             f"{plural(len(summary['rules']), 'rule')}:"]
    for group in summary["rules"][:RULES_SHOWN]:
        counted = (f"{plural(group['files'], 'file')}, {size(group['bytes'])}" if group["counted"]
                   else "not counted" if not group["files"] else f"at least {plural(group['files'], 'file')}")
        largest = ", ".join(item["path"] + (f" ({size(item['bytes'])})" if item["bytes"] else "")
                            for item in group["largest"])
        lines.append(f"  {group['rule']}: {counted}" + (f": {largest}" if largest else ""))
    if len(summary["rules"]) > RULES_SHOWN:
        lines.append(f"  … and {plural(len(summary['rules']) - RULES_SHOWN, 'rule')} more (--json lists them)")
    lines.append("  a job that needs one: bring it back with a `!` line in .frayignore (like !*.bin or !data/), "
                 "or read it from where it is (an absolute path, or --workdir)")
    return lines


def workdir_line(view: dict[str, Any] | None) -> str | None:
    """Where the job's relative paths (its outputs, its checkpoints) land."""
    if not view:
        return None
    if view["in_snapshot"]:
        return f"{view['path']} (the run's copy of its code, kept across attempts; --workdir DIR to choose)"
    return f"{view['path']} (--workdir)"


def progress_sources(spec: dict[str, Any]) -> str | None:
    """What fray reads as the job's progress besides report.progress: its output, its event files."""
    parts = [f"its output, by {plural(len(spec['progress_patterns']), 'pattern')}"] if spec.get("progress_patterns") else []
    if spec.get("progress_tensorboard"):
        parts.append(f"the TensorBoard scalars under {spec['progress_tensorboard']}")
    return " and ".join(parts) or None


def retry_args_line(spec: dict[str, Any], attempts: list[dict[str, Any]]) -> str | None:
    """`--init_from=resume`: added to attempt 2 (out/ckpt.pt exists); not to 1 (the first attempt starts afresh)."""
    if not spec.get("retry_args"):
        return None
    words = " ".join(spec["retry_args"])
    condition = f" when {spec['retry_args_if_exists']} exists" if spec.get("retry_args_if_exists") else ""
    told = [f"attempt {a['number']}: {'added' if a['retry_args']['added'] else 'not added'} "
            f"({a['retry_args']['reason']})" for a in attempts if a.get("retry_args")]
    return f"{words}, after the first attempt{condition}" + (f"; {'; '.join(told)}" if told else "")
