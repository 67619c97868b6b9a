"""Placement of pending tasks on workers: constraints, attributes, posting lists, priority, groups.

The pure scheduler of the controller and coscheduling designs. Public names:
`find_assignments` and its records (`placement`), `parse`/`Constraint`
(`constraints`), `Worker`/`Resources` and the attribute builders
(`attributes`), `Band`/`Credits` (`priority`), `TaskEnd`/`reporting_task`
(`reporting`: which task a failed group is reported by).
"""

from __future__ import annotations

import importlib
from typing import Any

# Each public name from its module, imported when first used: the parsers submit needs
# (`fray.core.placement.values`, `.constraints`) come without the scheduler itself.
_HOMES = {
    "attributes": ("Resources", "Worker"),
    "constraints": ("Constraint", "ConstraintSyntaxError", "ConstraintTypeError", "Op", "parse"),
    "reporting": ("TaskEnd", "reporting_task", "siblings_finishing"),
    "placement": ("Assignment", "Job", "SchedulingResult", "Task", "Unschedulable", "find_assignments"),
    "priority": ("Band", "Credits", "effective_band", "parse_band"),
}
_MODULE_OF = {name: module for module, names in _HOMES.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
