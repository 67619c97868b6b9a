"""Sweeps: `--sweep NAME=VALUES` axes, their points, and what each point passes to the script. Pure.

An axis is `NAME=V1,V2,...` (a comma list, taken as typed) or `NAME=A..B`
(the integers A to B, both included: nothing else is a range, so `../data`
is a value). A value is passed exactly as typed, `=`, `..` and `/` included;
one with a comma is quoted with double quotes, as in CSV (`""` is a quote
inside quotes); spaces around a value are dropped:

    --sweep 'data=../data,../other'     ->  ../data, ../other
    --sweep 'tag="a,b",c'               ->  a,b and c

Several axes make the cartesian product, the first axis varying slowest:

    --sweep lr=1e-3,3e-4 --sweep seed=0..2   ->  6 points, indexes 0..5:
    0: lr=1e-3 seed=0   1: lr=1e-3 seed=1   2: lr=1e-3 seed=2   3: lr=3e-4 seed=0 ...

Point i is one run of the sweep's group. Its script gets, after the script's
own arguments, `--NAME VALUE` for each axis in order (`--lr 1e-3 --seed 2`,
`point_args`), and the environment `FRAY_SWEEP_INDEX` (i), `FRAY_SWEEP_SIZE`,
`FRAY_SWEEP_GROUP` (the group id) and `FRAY_SWEEP_PARAMS` (the point as a JSON
object whose numbers are numbers: `{"lr": 0.001, "seed": 2}`, `point_env`).
"""

from __future__ import annotations

import csv
import itertools
import json
import re
from dataclasses import dataclass
from typing import Any

from fray.errors import UsageError

ENV_INDEX = "FRAY_SWEEP_INDEX"
ENV_SIZE = "FRAY_SWEEP_SIZE"
ENV_GROUP = "FRAY_SWEEP_GROUP"
ENV_PARAMS = "FRAY_SWEEP_PARAMS"
MAX_POINTS = 100_000  # a typo in a range should not write a million run folders

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_RANGE = re.compile(r"^(-?[0-9]+)\.\.(-?[0-9]+)$")
_SYNTAX = ("write NAME=V1,V2,... (a list; quote a value with a comma: \"a,b\") or NAME=A..B (integers A to B, "
           "both included), e.g. --sweep lr=1e-3,3e-4")


@dataclass(frozen=True)
class Axis:
    name: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Point:
    index: int
    params: tuple[tuple[str, str], ...]  # (axis name, value as typed), in axis order

    @property
    def values(self) -> dict[str, Any]:
        """The point with numbers as numbers (FRAY_SWEEP_PARAMS, the group's record)."""
        return {name: typed(text) for name, text in self.params}


def parse_axis(text: str) -> Axis:
    """One `--sweep` value; a UsageError that shows the value and the syntax when it is wrong."""
    name, equals, values = text.partition("=")
    name = name.strip()
    if not equals:
        raise UsageError(f"--sweep {text!r}: no '='; {_SYNTAX}")
    if not _NAME.match(name):
        raise UsageError(f"--sweep {text!r}: {name!r} is not a parameter name (letters, digits, _ and -, "
                         f"not starting with a digit); {_SYNTAX}")
    span = _RANGE.match(values.strip())
    if span:
        low, high = int(span[1]), int(span[2])
        if low > high:
            raise UsageError(f"--sweep {text!r}: the range {low}..{high} is empty (write the smaller bound first)")
        if high - low + 1 > MAX_POINTS:
            raise UsageError(f"--sweep {text!r}: {high - low + 1} values; a sweep has at most {MAX_POINTS} points")
        return Axis(name, tuple(str(v) for v in range(low, high + 1)))
    items = _split(text, values)
    if not values.strip() or any(not v for v in items):
        raise UsageError(f"--sweep {text!r}: an empty value; {_SYNTAX}")
    return Axis(name, items)


def _split(text: str, values: str) -> tuple[str, ...]:
    """The comma list, read as one CSV record: a double-quoted value keeps its commas."""
    try:
        record = next(csv.reader([values], strict=True, skipinitialspace=True))
    except (csv.Error, StopIteration) as exc:
        raise UsageError(f"--sweep {text!r}: {exc}; quote a value with a comma as \"a,b\" (a quote "
                         f"inside quotes is \"\"); {_SYNTAX}") from None
    return tuple(value.strip() for value in record)


def parse_axes(texts: list[str] | tuple[str, ...]) -> list[Axis]:
    axes = [parse_axis(text) for text in texts]
    seen: set[str] = set()
    for axis in axes:
        if axis.name in seen:
            raise UsageError(f"--sweep {axis.name} is given twice; give all its values in one --sweep "
                             f"({axis.name}=V1,V2,...)")
        seen.add(axis.name)
    size = 1
    for axis in axes:
        size *= len(axis.values)
    if size > MAX_POINTS:
        raise UsageError(f"--sweep: {size} points in all; a sweep has at most {MAX_POINTS}")
    return axes


def points(axes: list[Axis]) -> list[Point]:
    """Every point of the cartesian product, the first axis varying slowest."""
    names = [axis.name for axis in axes]
    return [Point(index, tuple(zip(names, combo)))
            for index, combo in enumerate(itertools.product(*(axis.values for axis in axes)))]


def point_args(point: Point) -> list[str]:
    """What the point adds after the script's own arguments: `--lr 1e-3 --seed 2`."""
    return [word for name, value in point.params for word in (f"--{name}", value)]


def point_env(index: int, values: dict[str, Any], size: int, group_id: str) -> dict[str, str]:
    """The environment of member `index`: which point it is, of how many, in which group, and its values."""
    return {ENV_INDEX: str(index), ENV_SIZE: str(size), ENV_GROUP: group_id,
            ENV_PARAMS: json.dumps(values, separators=(",", ":"))}


def typed(text: str) -> Any:
    """`3` -> 3, `1e-3` -> 0.001, anything else stays text (inf and nan too: not JSON)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return text
    return value if value == value and value not in (float("inf"), float("-inf")) else text


def check_max_parallel(value: int | None) -> int | None:
    if value is not None and value < 1:
        raise UsageError(f"--max-parallel {value}: give a number of runs of at least 1 (or leave it out: no limit)")
    return value
