"""Constraints on worker attributes: parsing `gpu-type=h100` and matching a worker (pure).

A constraint is `key OP value` over one typed attribute of a worker (see
`attributes`). The operators:

    key=value  key==value   EQ          key!=value              NE
    key                     EXISTS      !key                    NOT_EXISTS
    key>value  key>=value   GT, GE      key<value  key<=value   LT, LE
    key in (a, b, c)        IN

Values are typed by how they are written: `80` is an int, `1.5` a float,
anything else (or anything in quotes: `rack="12"`) a str. Comparing values of
different types (an int constraint against a worker's str attribute) is not
guessed at: `matches` raises `ConstraintTypeError`, whose message names the
constraint, the worker's value and how to fix it; the scheduler turns that into
"this worker does not match" plus a reason a person can read. int and float
compare with each other (both are numbers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Mapping, Union

from fray.errors import UsageError

Value = Union[str, int, float]


class Op(str, Enum):
    EQ = "="
    NE = "!="
    EXISTS = "exists"
    NOT_EXISTS = "!exists"
    GT = ">"
    GE = ">="
    LT = "<"
    LE = "<="
    IN = "in"


ORDERED = frozenset({Op.GT, Op.GE, Op.LT, Op.LE})


class ConstraintSyntaxError(UsageError):
    """A constraint string that does not parse: what, where in the text, how to fix it."""

    def __init__(self, text: str, position: int, problem: str) -> None:
        self.text, self.position, self.problem = text, position, problem
        pointer = " " * (position + 4) + "^"
        super().__init__(f"bad constraint {text!r}: {problem}\n    {text}\n{pointer}\nwrite it as key=value, "
                         "key!=value, key>=number, 'key in (a, b)', key (exists) or !key (absent)")


class ConstraintTypeError(UsageError):
    """A constraint compared with a worker's attribute of another type."""


@dataclass(frozen=True)
class Constraint:
    key: str
    op: Op
    value: Value | tuple[Value, ...] | None = None

    def __str__(self) -> str:
        if self.op is Op.EXISTS:
            return self.key
        if self.op is Op.NOT_EXISTS:
            return f"!{self.key}"
        if self.op is Op.IN:
            assert isinstance(self.value, tuple)
            return f"{self.key} in ({', '.join(_show(v) for v in self.value)})"
        assert self.value is not None and not isinstance(self.value, tuple)
        return f"{self.key}{self.op.value}{_show(self.value)}"

    def matches(self, attributes: Mapping[str, Value], worker: str = "the worker") -> bool:
        """Whether a worker with `attributes` satisfies this constraint.

        Raises ConstraintTypeError when the worker's value has another type than
        the constraint's (names `worker` in the message)."""
        have = attributes.get(self.key)
        if self.op is Op.EXISTS:
            return have is not None
        if self.op is Op.NOT_EXISTS:
            return have is None
        if have is None:
            return False
        wanted = self.value if isinstance(self.value, tuple) else (self.value,)
        for value in wanted:
            if not same_kind(have, value):
                raise ConstraintTypeError(
                    f"constraint {self} compares a {_kind(value)} with {worker}'s {self.key}={have!r} "
                    f"(a {_kind(have)}); write the value as a {_kind(have)}"
                    + (f", e.g. {self.key}{self.op.value if self.op is not Op.IN else '='}\"{value}\""
                       if isinstance(have, str) else ""))
        op, value = self.op, self.value
        if op is Op.EQ:
            return bool(have == value)
        if op is Op.NE:
            return bool(have != value)
        if op is Op.IN:
            return have in wanted
        if op is Op.GT:
            return have > value  # type: ignore[operator]
        if op is Op.GE:
            return have >= value  # type: ignore[operator]
        if op is Op.LT:
            return have < value  # type: ignore[operator]
        return have <= value  # type: ignore[operator]


def same_kind(a: Value, b: Value) -> bool:
    """str with str, numbers with numbers (bool is not a number here)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b)
    return isinstance(a, str) == isinstance(b, str)


def _kind(value: Value) -> str:
    return "string" if isinstance(value, str) else "number"


def _show(value: Value) -> str:
    if isinstance(value, str) and (_parse_value(value) != value or not value or _NEEDS_QUOTES.search(value)):
        return f'"{value}"'
    return str(value)


_KEY = r"!?[A-Za-z_][A-Za-z0-9_.:/-]*"
_NEEDS_QUOTES = re.compile(r"[\s,()=<>!\"']")
_OPS = ("==", "!=", ">=", "<=", "=", ">", "<")
_KEY_RE = re.compile(_KEY)
_IN_RE = re.compile(r"\s+in\s*\(", re.IGNORECASE)


def parse(text: str) -> Constraint:
    """`gpu-type=h100`, `memory-gb>=80`, `zone in (a, b)`, `taint:spot`, `!taint:spot`."""
    stripped = text.strip()
    offset = len(text) - len(text.lstrip())
    if not stripped:
        raise ConstraintSyntaxError(text, 0, "it is empty")
    key_match = _KEY_RE.match(stripped)
    if key_match is None:
        raise ConstraintSyntaxError(text, offset, "it must start with an attribute name (letters, digits, - _ . : /)")
    key = key_match.group()
    rest = stripped[key_match.end():]
    at = offset + key_match.end()
    if key.startswith("!"):
        if rest.strip():
            raise ConstraintSyntaxError(text, at, "'!key' means the attribute is absent and takes no value")
        return Constraint(key[1:], Op.NOT_EXISTS)
    if not rest.strip():
        return Constraint(key, Op.EXISTS)
    in_match = _IN_RE.match(rest)
    if in_match:
        body = rest[in_match.end():]
        if not body.rstrip().endswith(")"):
            raise ConstraintSyntaxError(text, len(text), "the list after 'in' needs a closing ')'")
        items = [item.strip() for item in body.rstrip()[:-1].split(",")]
        if not items or any(not item for item in items):
            raise ConstraintSyntaxError(text, at + in_match.end(), "'in' takes a list of values: in (a, b)")
        return Constraint(key, Op.IN, tuple(_parse_value(item) for item in items))
    stripped_rest = rest.lstrip()
    at += len(rest) - len(stripped_rest)
    for symbol in _OPS:
        if stripped_rest.startswith(symbol):
            raw = stripped_rest[len(symbol):].strip()
            if not raw:
                raise ConstraintSyntaxError(text, at + len(symbol), f"'{symbol}' needs a value after it")
            op = Op.EQ if symbol == "==" else Op(symbol)
            value = _parse_value(raw)
            if op in ORDERED and isinstance(value, str):
                raise ConstraintSyntaxError(text, at + len(symbol), f"'{symbol}' compares numbers; {raw!r} is not one")
            return Constraint(key, op, value)
    raise ConstraintSyntaxError(text, at, "expected an operator (= != > >= < <= in) after the attribute name")


def _parse_value(raw: str) -> Value:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return raw[1:-1]
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        number = float(raw)
    except ValueError:
        return raw
    return raw if number != number or number in (float("inf"), float("-inf")) else number
