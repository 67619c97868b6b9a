"""The placement directives' values (`--constraint`, `--tolerate`, `--group-by`) and their
cross-field checks, for `directives` (pure). Errors are ValueError / problem strings saying what
would be valid, as `fray.core.values` does for the other options."""

from __future__ import annotations

import re

from fray.core.model import RunSpec
from fray.errors import UsageError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/-]*")


def parse_constraint(text: str) -> dict[str, str]:
    """One constraint, checked now, stored as written (as a one-entry dict: the option repeats)."""
    from fray.core.placement.constraints import ConstraintSyntaxError, parse  # a run without one: not loaded

    try:
        constraint = parse(text)
    except ConstraintSyntaxError as exc:
        raise ValueError(str(exc)) from None
    return {str(constraint): str(constraint)}


def parse_toleration(text: str) -> dict[str, str]:
    name = text.strip().removeprefix("taint:")
    if not _NAME.fullmatch(name):
        raise ValueError(f"{text!r} is not a taint name: use letters, digits, - _ . (like spot)")
    return {name: name}


def parse_attribute_name(text: str) -> str:
    name = text.strip()
    if not _NAME.fullmatch(name):
        raise ValueError(f"{text!r} is not an attribute name: use letters, digits, - _ . : / (like tpu-name)")
    return name


def placement_problems(spec: RunSpec) -> list[str]:
    """What cannot work in this spec's placement settings, each with what to do instead."""
    problems = []
    if spec.group_by and spec.replicas < 2:
        problems.append(f"--group-by {spec.group_by} places the tasks of a run together; add --replicas N (N >= 2)")
    if spec.backend == "local" and spec.group_by:
        problems.append(f"--group-by {spec.group_by} puts each task on its own worker, and the local backend has "
                        "one machine; drop --group-by (its --replicas then run side by side here) or use another backend")
    if spec.backend == "tpu" and spec.tpu:
        from fray.core.placement.tpu import place_on_slice  # the scheduler itself: only a TPU run needs it here

        try:
            place_on_slice(spec)
        except ValueError as exc:
            problems.append(str(exc))
    if spec.backend == "slurm":
        from fray.core.placement.constraints import parse  # as in parse_constraint
        from fray.core.placement.slurm import to_slurm

        try:
            to_slurm([parse(text) for text in spec.constraints])
        except UsageError as exc:
            problems.append(str(exc))
    return problems
