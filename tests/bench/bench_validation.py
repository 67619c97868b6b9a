"""Benchmark: fray's own schema compiler (fray.core.validation) against fastjsonschema, in one run.

Issue 11 asked whether the hand-written compiler earns its 470 lines. Three
figures, each for both validators, measured in the same run on the same machine:

1. import: a fresh `python -c` that imports the validator and compiles the meta
   schema (what `fray list` pays before its first run), beside `python -c pass`;
   fastjsonschema both compiling from the schema each time (cold) and loading
   its generated code from a file (warm, as a cache would);
2. validate: the meta, control and progress documents of 1,000 runs, in process;
3. end to end: `fray list --json` at 1,000 runs (the row cache off, so every run
   is read and validated), with fray's validator and with fastjsonschema swapped
   in for `fray.core.validation.errors` in the same process.

    python tests/bench/bench_validation.py [--runs 1000] [--repeats 11]

fastjsonschema is needed only here: `pip install fastjsonschema`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import env_for, report, time_interleaved  # noqa: E402
from bench_list import populate  # noqa: E402

import orjson  # noqa: E402

from fray.core import validation  # noqa: E402
from fray.state.layout import Home  # noqa: E402

# fastjsonschema, fed fray's schemas: `$ref` to another file ("meta.json#/...")
# resolves through a handler for the empty URI scheme.
FAST_SETUP = """
import fastjsonschema, orjson
from fray.core import validation

def _load(uri):
    return orjson.loads((validation.schema_dir() / uri.split("#")[0]).read_bytes())

_compiled = {}

def fast(name):
    check = _compiled.get(name)
    if check is None:
        check = _compiled[name] = fastjsonschema.compile(validation.load_schema(name), handlers={"": _load})
    return check

def errors(name, document):
    try:
        fast(name)(document)
    except fastjsonschema.JsonSchemaException as exc:
        return [exc.message]
    return []
"""

# The row cache is emptied first, so every run is read and validated (as on a first `fray list`).
FRAY_LIST = ("import glob, os, sys; [os.unlink(p) for p in glob.glob(os.environ['FRAY_HOME'] + '/cache/*')]\n"
             "from fray.cli.entry import main; sys.argv = ['fray', 'list', '--json']; main()")


def documents(home: Home) -> list[tuple[str, object]]:
    found: list[tuple[str, object]] = []
    for run_id in home.run_ids():
        paths = home.run(run_id)
        found.append(("meta", orjson.loads(paths.meta.read_bytes())))
        found.append(("control", orjson.loads(paths.control.read_bytes())))
        if paths.attempt(1).progress.exists():
            found.append(("progress", orjson.loads(paths.attempt(1).progress.read_bytes())))
    return found


def in_process(docs: list[tuple[str, object]], errors, repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for name, doc in docs:
            if errors(name, doc):
                raise SystemExit(f"a valid {name} document was rejected")
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=11)
    args = parser.parse_args()
    namespace: dict[str, object] = {}
    exec(FAST_SETUP, namespace)
    with tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp) / "fray")
        populate(home, args.runs)
        generated = Path(tmp) / "fast_meta.py"
        generated.write_text(__import__("fastjsonschema").compile_to_code(
            validation.load_schema("meta"), handlers={"": namespace["_load"]}))  # type: ignore[index]
        env = env_for(home.root)
        env["PYTHONPATH"] = tmp
        print(f"schema validation, fray's compiler vs fastjsonschema ({sys.version.split()[0]})")
        print("1. import and compile the meta schema, in a fresh process")
        for label, taken in time_interleaved({
            "baseline: python -c pass": [sys.executable, "-c", "pass"],
            "fray.core.validation (its code cache warm)":
                [sys.executable, "-c", "from fray.core import validation; validation.is_valid('meta')"],
            "fastjsonschema, compiled from the schema":
                [sys.executable, "-c", FAST_SETUP + "\nfast('meta')"],
            "fastjsonschema, its generated code loaded":
                [sys.executable, "-c", "import fast_meta"],
        }, env, args.repeats).items():
            report(label, taken)

        docs = documents(home)
        print(f"2. validate {len(docs)} documents of {args.runs} runs, in process (compiled once beforehand)")
        for name in {name for name, _ in docs}:
            validation.errors(name, {})
            namespace["errors"](name, {})  # type: ignore[operator]
        mine = in_process(docs, validation.errors, args.repeats)
        theirs = in_process(docs, namespace["errors"], args.repeats)  # type: ignore[arg-type]
        report("fray.core.validation.errors", mine)
        report("fastjsonschema", theirs)
        print(f"   per document: {statistics.median(mine) / len(docs) * 1e6:.2f} µs vs "
              f"{statistics.median(theirs) / len(docs) * 1e6:.2f} µs")

        print(f"3. fray list --json, {args.runs} runs, row cache off (every run read and validated)")
        swap = FAST_SETUP + "\nvalidation.errors = errors\n" + FRAY_LIST
        for label, taken in time_interleaved({
            "baseline: python -c pass": [sys.executable, "-c", "pass"],
            "fray list --json, fray.core.validation": [sys.executable, "-c", FRAY_LIST],
            "fray list --json, fastjsonschema swapped in": [sys.executable, "-c", swap],
        }, env, args.repeats).items():
            report(label, taken)


if __name__ == "__main__":
    main()
