"""`python -m fray.cluster.warm_worker --home HOME --slots N [--busy PID,...]`: the local backend's warm worker.

The program the local backend starts (fray.warm.daemon_side): it imports the
function entry point every function run's workload is (fray.cluster.entry, the
launch shim's main) and what that imports, then serves requests as
fray.warm.worker says. It lives here, beside the entry point, because it is
the one part of the warm worker that imports the cluster API: the rest of
fray.warm sits below the backends that use it.

`--home` is not read: it names the home in the command line, for whoever
scans /proc (fray.warm.daemon_side.forked_wrappers, the tests' clean-up); the name of
this module marks the worker's forks there too.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    from fray.cluster import call_book, call_records, call_times, chunks, entry, environment, payloads, resuming  # noqa: F401  the workload's imports
    from fray.state import commit_batch  # noqa: F401  a chunk run's batches are committed with it
    from fray.warm import worker

    def option(name: str, default: str) -> str:
        return argv[argv.index(name) + 1] if name in argv else default

    return worker.serve(int(option("--slots", str(os.cpu_count() or 1))),
                        [int(pid) for pid in option("--busy", "").split(",") if pid], entry.main)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
