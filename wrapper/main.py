"""`python -m fray.wrapper run ...`: one attempt of a run on this node, from first heartbeat to exit.json.

The order is the contract with the shepherd:

1. the attempt folder and wrapper.log, then the first heartbeat, before
   anything slow: the shepherd measures submit -> first heartbeat. So this
   module imports only what that needs; `fray.wrapper.attempt` (subprocess, socket,
   dataclasses...) is imported after the first beat;
2. signal handlers, subreaper, launch, started.json;
3. wait for the workload, or for a stop signal and then --stop-grace;
4. kill whatever the workload left running, then final.json or failure.json;
5. stop the heartbeat and write exit.json, the very last act.

Right after the first beat (written by this thread, as the guardian's fork costs a wrapper forked from a
large warm worker milliseconds) and before the heartbeat's thread starts, the guardian
(fray.wrapper.guardian) is forked: it must be forked while this process has no thread yet, and it kills
the attempt's processes if this one is SIGKILLed (there are none before the launch, step 2).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence

from . import contract, fence, guardian, options as cli, records
from .heartbeat import Heartbeat
from .log import DiagnosticLog
from .options import Options


def run(options: Options) -> int:
    """Run one attempt; the wrapper's exit code."""
    started_at = time.time()
    try:
        records.make_private_dir(options.attempt_dir)
    except OSError as exc:
        # Nowhere to report to: most likely the shared filesystem is missing on this node.
        print(
            f"fray wrapper: cannot create the attempt folder {options.attempt_dir}: {exc.strerror or exc}. "
            "Is FRAY_HOME's filesystem mounted on this node?",
            file=sys.stderr,
        )
        return contract.EXIT_NODE_FAULT
    # An attempt superseded before it started (a job the scheduler started late) writes not even a beat.
    fence.bind(fence.Writer(options.home, options.run_id, options.attempt) if options.home is not None else None,
               _fenced_before_launch)
    log = DiagnosticLog(os.path.join(options.attempt_dir, contract.WRAPPER_LOG))
    heartbeat = Heartbeat(os.path.join(options.attempt_dir, contract.HEARTBEAT), options.heartbeat_interval, log.write)
    heartbeat.beat()
    if options.home is not None:
        guardian.start(options.run_id, options.attempt, options.home, options.attempt_dir)  # before any thread: it forks
    heartbeat.start(beat=False)

    from .attempt import run_attempt  # after the first beat, see the module docstring

    return run_attempt(options, log, heartbeat, started_at)


def _fenced_before_launch(_reason: str) -> None:
    os._exit(contract.EXIT_FENCED)  # nothing started yet, nothing to kill


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line (exit 2 on bad arguments) and run the attempt."""
    return run(cli.parse(sys.argv[1:] if argv is None else argv))
