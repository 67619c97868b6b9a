"""Finding the run a person named, for every front end: RUN (a run id, a unique prefix of one, or a run's name)
to its run id, and that run's meta and control as they are on disk.

A RUN that names no run, or more than one, is a RunLookupError saying which. The reading is
fray.state.run_lookup's, kept apart from creating runs so that the commands that only read one
run (`fray status`, `fray logs`) import none of the submission machinery; this is the door the
CLI and the dashboard use, since front ends reach the state only through ops.
"""

from __future__ import annotations

from fray.state.run_lookup import read_control, read_meta, resolve

__all__ = ["resolve", "read_meta", "read_control"]
