"""What a job launched through the cluster API runs: `python -m shepherd.cluster.entry`.

The run's frozen script is a two-line shim that calls `main()`. It finds its
run from FRAY_HOME and FRAY_RUN_ID, reads job.json, and:

1. when the job asks for packages, makes sure their virtual environment exists
   (`environment.ensure`) and re-executes itself under that environment's Python;
2. for a callable: unpickles payload.pkl (only after `payloads.load` has checked
   that it is a private file of this user inside FRAY_HOME), calls it, and writes
   the return value, or the exception with its traceback text, to the attempt's
   call-result.pkl for `wait` and `poll`; a raised exception exits 1;
3. for a script: replaces itself with the script's interpreter (same pid, so the
   wrapper's signals reach it).
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

from wrapper import contract, workload

SHIM = """\
# Written by fray's cluster API: runs the job described by job.json in this folder.
import sys
from shepherd.cluster.entry import main
sys.exit(main())
"""
IN_ENV = "FRAY_ENTRY_IN_ENV"


def main(argv: list[str] | None = None) -> int:
    from shepherd import store
    from shepherd.cluster import environment, payloads
    from shepherd.layout import Home

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
        os.execv(str(python), [str(python), "-m", "shepherd.cluster.entry"])
    if job["kind"] == "script":
        script = str(run.dir / job["script"])
        argv_ = workload.launch_argv(script, workload.read_first_line(script), job["script_args"], python=sys.executable)
        sys.stdout.flush()
        os.execvp(argv_[0], argv_)
    # Like `python -m` in the launcher's directory (the job's workdir): its modules are importable.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    attempt_dir = Path(os.environ.get(contract.ENV_ATTEMPT_DIR) or run.attempt(int(os.environ[contract.ENV_ATTEMPT])).dir)
    result_path = attempt_dir / "call-result.pkl"
    try:
        fn, args, kwargs = payloads.load(run.payload, home.root)
        value = fn(*args, **kwargs)
    except BaseException as exc:  # the caller gets it back, with the traceback text
        if isinstance(exc, KeyboardInterrupt):
            raise
        text = traceback.format_exc()
        sys.stderr.write(text)
        payloads.dump(result_path, ("error", _picklable(exc), f"{type(exc).__module__}.{type(exc).__qualname__}",
                                    str(exc), text))
        return 1
    try:
        payloads.dump(result_path, ("ok", value))
    except Exception as exc:
        text = f"the job's return value could not be pickled: {exc!r}\n"
        sys.stderr.write(text)
        payloads.dump(result_path, ("error", None, "TypeError", str(exc), text))
        return 1
    return 0


def _picklable(exc: BaseException) -> BaseException | None:
    try:
        payloads_dumps = __import__("shepherd.cluster.payloads", fromlist=["dumps"]).dumps
        payloads_dumps(exc)
        return exc
    except Exception:
        return None


if __name__ == "__main__":
    sys.exit(main())
