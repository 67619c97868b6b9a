"""The wrapper's face to the login side: what the rest of fray uses of the wrapper, beside its contract.

The wrapper is standard-library only and runs on the node; fray's login side
(state, backends, daemon, cluster, ops) shares a few of its parts rather than
repeat them, and imports them from here, as `from fray.wrapper import face as
wrapper`, never from the module that holds them (tests/package/test_arrows.py
checks it). The names of the attempt's files, exit codes and environment are
the contract itself (fray.wrapper.contract); `fray.report`, the module a job
imports, is fray.wrapper.report. Everything else in the wrapper is its own.

    files, written atomically and read back (records, versions): one way for every writer
    the fence (fence): whether an attempt is still the run's, and the check before a job-side write
    processes (procs, tags): whose child a process is, what it catches, the tags that mark an attempt's,
        the children that ended
    a workload's command line (workload): `python script.py` as the wrapper would start it
    checkpoints (checkpoints, stopping): the newest one, the progress version a checkpoint bumps
    a hung job's stacks (faultsignal): armed by `import fray` inside a job
    a warm function host (hosted, forked, warm_imports, guardian): the wrapper of function attempts called in
        the host's own process (fray.warm.function_host), what it puts back between them, and the records of a
        host that died in one (fray.warm.host_pool)

Each name is loaded on first use (PEP 562), so that importing this face costs
a command only the parts it uses: `fray list` reads files, and never loads the
fence, the process tags or the workload's command line.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name here -> (module of the wrapper, its name there)
_NAMES: dict[str, tuple[str, str]] = {
    "latest_checkpoint": ("checkpoints", "latest_checkpoint"),
    "arm_stack_dump": ("faultsignal", "arm"),
    "attempt_is_current": ("fence", "current"),
    "guard_write": ("fence", "guard"),
    "catches": ("procs", "catches"),
    "parent_of": ("procs", "parent_of"),
    "FILE_MODE": ("versions", "FILE_MODE"),  # records has it too; versions is the lighter to load
    **{name: ("records", name) for name in ("create_bytes", "discard", "make_private_dir", "read_json",
                                            "temp_beside", "write_bytes")},
    "checkpoint_version": ("stopping", "checkpoint_version"),
    "Tag": ("tags", "Tag"),
    "kill_closed_attempts": ("tags", "reap"),
    "untagged": ("tags", "untagged"),
    **{name: ("versions", name) for name in ("complete", "newest_first", "read_newest", "versions_dir")},
    "launch_argv": ("workload", "launch_argv"),
    "read_first_line": ("workload", "read_first_line"),
    # a warm function host
    "run_hosted_attempt": ("hosted", "run"),
    "record_host_death": ("hosted", "record_death"),
    "Options": ("options", "Options"),
    "parse_wrapper_args": ("options", "parse"),
    "has_function_entry": ("forked", "has_entry"),
    "disarm_stack_dump": ("faultsignal", "disarm"),
    "become_subreaper": ("procs", "become_subreaper"),
    "ended_children": ("procs", "ended_children"),
    "start_host_guardian": ("guardian", "start_for_host"),
    "close_fds_from": ("forked", "close_from"),
    "function_entry": ("forked", "entry"),
    **{name: ("forked", name) for name in ("default_signals", "exit_with", "new_std_streams", "run_as_main")},
    "warm_imports_fd": ("warm_imports", "kept_fd"),
    "unshadow_imports": ("warm_imports", "unshadow"),
    "tell_imports": ("warm_imports", "tell"),
    "forget_imported": ("warm_imports", "forget_imported"),
}

__all__ = sorted(_NAMES)

if TYPE_CHECKING:  # for type checkers; at run time each name loads on first use
    from .checkpoints import latest_checkpoint
    from .faultsignal import arm as arm_stack_dump, disarm as disarm_stack_dump
    from .fence import current as attempt_is_current, guard as guard_write
    from .forked import close_from as close_fds_from, default_signals, entry as function_entry, exit_with
    from .forked import has_entry as has_function_entry, new_std_streams, run_as_main
    from .guardian import start_for_host as start_host_guardian
    from .hosted import record_death as record_host_death, run as run_hosted_attempt
    from .options import Options, parse as parse_wrapper_args
    from .procs import become_subreaper, catches, ended_children, parent_of
    from .records import create_bytes, discard, make_private_dir, read_json, temp_beside, write_bytes
    from .stopping import checkpoint_version
    from .tags import Tag, reap as kill_closed_attempts, untagged
    from .versions import FILE_MODE, complete, newest_first, read_newest, versions_dir
    from .warm_imports import forget_imported, kept_fd as warm_imports_fd, tell as tell_imports
    from .warm_imports import unshadow as unshadow_imports
    from .workload import launch_argv, read_first_line


def __getattr__(name: str) -> Any:
    where = _NAMES.get(name)
    if where is None:
        raise AttributeError(f"module 'fray.wrapper.face' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__package__}.{where[0]}"), where[1])
    globals()[name] = value  # later lookups skip this function
    return value
