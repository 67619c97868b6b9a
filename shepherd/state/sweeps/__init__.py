"""Sweeps on disk, before the daemon has written their runs: one module per side.

- `creating`: a sweep's group of runs comes to exist, written whole or not at all
  (`create_group`: every member's run folder; `publish_sweep`: only the sweep's record);
- `unwritten`: sweeps whose runs the daemon has not written yet, as readers see them, and
  what people ask of their points meanwhile.

Two modules, not one: `creating` writes runs (fray.state.runs), which look up their
upstreams (fray.state.upstreams), which read the unwritten sweeps; one module would make
that an import cycle.
"""
