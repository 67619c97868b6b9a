"""Sweeps, the pure part: one module per job, all about a sweep's group of runs.

- `grid`: `--sweep NAME=VALUES` axes, their points, what each point passes to its script;
- `record`: a sweep's record (groups/<id>/group.json) and the member runs it stands for;
- `gate`: how many members of each sweep may start an attempt this cycle (`--max-parallel`);
- `folding`: a sweep folded into one row of a listing;
- `lookup`: which group a person means by `--group GROUP`.

The other layers' parts: fray.state.sweeps (the record on disk), fray.daemon.sweeps
(the record becomes runs; array folders removed), fray.ops.sweeps (`fray submit
--sweep`); Slurm's job arrays are fray.backends.slurm.arrays.
"""
