"""Which workers satisfy a set of constraints: posting lists, or a linear scan (pure).

`WorkerIndex` is built once per scheduling cycle from the workers. For each
discrete attribute (every value a str, or every value an int) it keeps a
posting list per value and one per key, so EQ and IN cost a set lookup, EXISTS
and NOT_EXISTS a set operation, and NE and the orders (GT/GE/LT/LE) one test per
distinct value (a handful: memory sizes, GPU counts) instead of one per worker.
Float or mixed-type attributes, and any constraint whose value has another type
than the attribute (so that the type error is reported), are checked by a
linear scan over the workers the indexed constraints left.

`index="linear"` checks every constraint by scanning: the same answers, kept as
the baseline the benchmark compares with and the oracle the property tests use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

from fray.core.placement.attributes import Worker, is_taint
from fray.core.placement.constraints import Constraint, ConstraintTypeError, Op, Value

IndexKind = Literal["posting", "linear"]


@dataclass(frozen=True)
class Candidates:
    """Workers (positions in the index's list, ascending) that satisfy the constraints; why none, if none."""

    workers: tuple[int, ...]
    reason: str = ""


class WorkerIndex:
    def __init__(self, workers: Sequence[Worker], index: IndexKind = "posting") -> None:
        self.workers = workers
        self.index = index
        self._all = frozenset(range(len(workers)))
        self._by_key: dict[str, set[int]] = {}
        self._by_value: dict[str, dict[Value, set[int]]] = {}
        kinds: dict[str, set[type]] = {}
        for position, worker in enumerate(workers):
            for key, value in worker.attributes.items():
                self._by_key.setdefault(key, set()).add(position)
                self._by_value.setdefault(key, {}).setdefault(value, set()).add(position)
                kinds.setdefault(key, set()).add(type(value))
        # Discrete: one type, str or int; floats and mixed keys are scanned (1 == 1.0 would merge posting lists).
        self._discrete = {key for key, seen in kinds.items() if seen == {str} or seen == {int}}
        self._kind = {key: next(iter(seen)) for key, seen in kinds.items() if key in self._discrete}
        self.taints = tuple(sorted(key for key in self._by_key if is_taint(key)))

    def implicit(self, tolerations: Sequence[str]) -> tuple[Constraint, ...]:
        """The NOT_EXISTS constraints every job carries for the taints it does not tolerate."""
        tolerated = {f"taint:{name}" for name in tolerations}
        return tuple(Constraint(key, Op.NOT_EXISTS) for key in self.taints if key not in tolerated)

    def candidates(self, constraints: Sequence[Constraint]) -> Candidates:
        current: frozenset[int] | set[int] = self._all
        scanned: list[Constraint] = []
        for constraint in constraints:
            if self.index == "posting" and self._indexable(constraint):
                current = self._posting(constraint, current)
            else:
                scanned.append(constraint)
        if scanned:
            current = {p for p in current if self._scan(scanned, p)}
        workers = tuple(sorted(current))
        return Candidates(workers, "" if workers else self._why_none(constraints))

    def _indexable(self, constraint: Constraint) -> bool:
        if constraint.op in (Op.EXISTS, Op.NOT_EXISTS) or constraint.key not in self._by_key:
            return True
        if constraint.key not in self._discrete:
            return False
        kind = self._kind[constraint.key]
        values = constraint.value if isinstance(constraint.value, tuple) else (constraint.value,)
        return all(type(v) is kind for v in values)

    def _posting(self, constraint: Constraint, current: frozenset[int] | set[int]) -> set[int]:
        key = constraint.key
        present = self._by_key.get(key, set())
        if constraint.op is Op.EXISTS:
            return present & current if len(present) < len(current) else current & present
        if constraint.op is Op.NOT_EXISTS:
            return set(current - present)
        by_value = self._by_value.get(key, {})
        hit: set[int] = set()
        if constraint.op in (Op.EQ, Op.IN):
            values = constraint.value if isinstance(constraint.value, tuple) else (constraint.value,)
            for value in values:
                hit |= by_value.get(value, set())  # type: ignore[arg-type]
        else:  # NE and the orders: one test per distinct value, not per worker
            for value, workers in by_value.items():
                if constraint.matches({key: value}):
                    hit |= workers
        return hit & current if len(hit) < len(current) else current & hit

    def _scan(self, constraints: Sequence[Constraint], position: int) -> bool:
        worker = self.workers[position]
        try:
            return all(c.matches(worker.attributes, worker.worker_id) for c in constraints)
        except ConstraintTypeError:
            return False  # reported by _why_none if it leaves no worker

    def _why_none(self, constraints: Sequence[Constraint]) -> str:
        """The reason a person reads: the first constraint no worker meets alone (with the type
        error, if one is why), else the combination. The same whichever index found none."""
        if not self.workers:
            return "no workers"
        for constraint in constraints:
            if self.index == "posting" and self._indexable(constraint):
                # Indexed: every value has the constraint's type, so absence is the only possible reason.
                if not self._posting(constraint, self._all):
                    return _nobody(constraint)
                continue
            error = ""
            for worker in self.workers:
                try:
                    if constraint.matches(worker.attributes, worker.worker_id):
                        break
                except ConstraintTypeError as exc:
                    error = error or str(exc)
            else:
                return error or _nobody(constraint)
        return "no worker with " + " and ".join(str(c) for c in constraints) + " together"

    def groups(self, candidates: Sequence[int], group_by: str) -> list[tuple[Value, tuple[int, ...]]]:
        """Candidates split by their `group_by` value (workers without it left out), groups in value
        order, workers in each by `tpu-worker-id` (then by position): task i goes to the i-th."""
        buckets: dict[Value, list[int]] = {}
        for position in candidates:
            value = self.workers[position].attributes.get(group_by)
            if value is not None:
                buckets.setdefault(value, []).append(position)

        def worker_order(position: int) -> tuple[int, float, int]:
            rank = self.workers[position].attributes.get("tpu-worker-id")
            return (0, float(rank), position) if isinstance(rank, (int, float)) else (1, 0.0, position)

        return [(value, tuple(sorted(members, key=worker_order)))
                for value, members in sorted(buckets.items(), key=lambda kv: _value_order(kv[0]))]


def _value_order(value: Value) -> tuple[int, float, str]:
    return (1, 0.0, value) if isinstance(value, str) else (0, float(value), "")



def _nobody(constraint: Constraint) -> str:
    if constraint.op is Op.NOT_EXISTS and is_taint(constraint.key):
        name = constraint.key.split(":", 1)[1]
        return f"every worker has {constraint.key}; tolerate it (--tolerate {name}) to run there"
    return f"no worker with {constraint}"
