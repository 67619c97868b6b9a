"""What a job launched through the cluster API runs: `python -m fray.cluster.entry`.

The run's frozen script is a shim that calls `main()` (fray.cluster.launching.SHIM). It finds its
run from FRAY_HOME and FRAY_RUN_ID, reads job.json, and:

1. when the job asks for packages, makes sure their virtual environment exists
   (`environment.ensure`) and re-executes itself under that environment's Python;
2. for a callable: unpickles payload.pkl (only after `payloads.load` has checked
   that it is a private file of this user inside FRAY_HOME), or the call an
   earlier attempt checkpointed (`resuming`), calls it, and writes the return
   value (or the exception raised) to the attempt's call-result.pkl, then
   call-result.json (fray.cluster.call_records) for `wait`, `poll` and
   futures; a raised exception exits 1; a chunk of calls (`fray.map`)
   goes to `chunks.run`, which records its calls in batches (fray.cluster.call_book);
3. for a script: replaces itself with the script's interpreter (same pid, so the
   wrapper's signals reach it).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from fray.cluster import call_records, chunks, environment, resuming
from fray.state import store
from fray.state.layout import Home
from fray.wrapper import contract
from fray.wrapper import face as wrapper

# What a chunk of calls imports late (fray.cluster.chunks, call_book), loaded with this module: the local warm
# worker imports it once, as the launch shim does (fray.warm.worker.load_entry), for every function it forks.
from fray.cluster import call_book, call_times, payloads  # noqa: F401
from fray.state import commit_batch  # noqa: F401

IN_ENV = "FRAY_ENTRY_IN_ENV"


def main(argv: list[str] | None = None) -> int:
    home_dir = os.environ.get(contract.ENV_HOME)
    run_id = os.environ.get(contract.ENV_RUN_ID)
    if not home_dir or not run_id:
        print("fray entry: FRAY_HOME and FRAY_RUN_ID are not set; this runs only inside a fray job", file=sys.stderr)
        return 2
    home = Home(Path(home_dir))
    run = home.run(run_id)
    job = store.read_json(run.job, "job")
    if job is None:
        print(f"fray entry: {run.job} is missing", file=sys.stderr)
        return 2
    env = job["environment"]
    if env["key"] and os.environ.get(IN_ENV) != env["key"]:
        python = environment.ensure(home, env["key"], env["requirements"],
                                    log=lambda line: print(line, file=sys.stderr, flush=True))
        os.environ[IN_ENV] = env["key"]
        sys.stdout.flush()
        os.execv(str(python), [str(python), "-m", "fray.cluster.entry"])
    if job["kind"] == "script":
        script = str(run.script(job["script"]))
        argv_ = wrapper.launch_argv(script, wrapper.read_first_line(script), job["script_args"], python=sys.executable)
        sys.stdout.flush()
        os.execvp(argv_[0], argv_)
    # Like `python -m` in the launcher's directory (the job's workdir): its modules are importable.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    number = int(os.environ.get(contract.ENV_ATTEMPT) or 1)
    attempt = run.attempt(number)
    try:
        call, resumed_from = resuming.starting_call(run, number, home.root)
        if isinstance(call.fn, chunks.Calls):  # fray.map(chunk=N): its calls one after another, each recorded
            return chunks.run(call.fn, run, home.root, number)
        if resumed_from is not None:
            print(f"fray: resuming the call checkpointed by attempt {resumed_from}", file=sys.stderr, flush=True)
        guard = (resuming.Checkpointer(call, attempt.resume_call, lambda: wrapper.attempt_is_current(home_dir, run_id, number),
                                       resuming.announce_in_progress(attempt.progress))
                 if resuming.checkpointable(call) else contextlib.nullcontext())
        with guard:
            value = call()
    except BaseException as exc:  # the caller gets it back, with the traceback text
        if isinstance(exc, KeyboardInterrupt):
            raise
        return call_records.write_raised(exc, attempt.call_record, attempt.call_value)
    return call_records.write_returned(value, attempt.call_record, attempt.call_value)


if __name__ == "__main__":
    sys.exit(main())
