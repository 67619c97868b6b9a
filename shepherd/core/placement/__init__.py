"""Placement of pending tasks on workers: constraints, attributes, posting lists, priority, groups.

The pure scheduler of the controller and coscheduling designs. Public names:
`find_assignments` and its records (`placement`), `parse`/`Constraint`
(`constraints`), `Worker`/`Resources` and the attribute builders
(`attributes`), `Band`/`Credits` (`priority`), `TaskEnd`/`reporting_task`
(`reporting`: which task a failed group is reported by).
"""

from fray.core.placement.attributes import Resources, Worker
from fray.core.placement.constraints import Constraint, ConstraintSyntaxError, ConstraintTypeError, Op, parse
from fray.core.placement.reporting import TaskEnd, reporting_task, siblings_finishing
from fray.core.placement.placement import Assignment, Job, SchedulingResult, Task, Unschedulable, find_assignments
from fray.core.placement.priority import Band, Credits, effective_band, parse_band

__all__ = [
    "Assignment", "Band", "Constraint", "ConstraintSyntaxError", "ConstraintTypeError", "Credits",
    "Job", "Op", "Resources", "SchedulingResult", "Task", "TaskEnd", "Unschedulable", "Worker", "effective_band",
    "find_assignments", "parse", "parse_band", "reporting_task", "siblings_finishing",
]
