"""Benchmark: code snapshots of a 2,000-file project, as `fray submit` takes them.

Prints, for a git work tree of 2,000 Python files (2 KB each), the in-process
snapshot (fray.state.snapshots.take) cold, unchanged and with one file changed,
and the whole `fray submit` command for a re-submit with one file changed,
beside `python -c pass` and `fray submit` of a one-file project measured in the
same run. Target: a re-submit with one changed file snapshots in <= 300 ms.

    python tests/bench/bench_snapshot.py [--files 2000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import FRAY, env_for, report, time_command, warm_up  # noqa: E402

from fray.state import snapshots  # noqa: E402
from fray.state.layout import Home  # noqa: E402

TARGET_MS = 300.0


def make_project(root: Path, files: int) -> None:
    for index in range(files):
        path = root / f"pkg{index // 100}" / f"module_{index}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# module {index}\n" + "VALUE = 'x' * 64  # padding to about 2 KB\n" * 45)
    (root / "train.py").write_text("#FRAY --name bench\nprint('hi')\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "b"],
                   check=True)


def timed(action) -> float:  # noqa: ANN001
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root, home = Path(tmp) / "project", Home(Path(tmp) / "fray")
        make_project(root, args.files)
        print(f"a git work tree of {args.files} files of 2 KB; FRAY_HOME on {tmp}")
        report("cold snapshot (every file hashed and stored)", [timed(lambda: snapshots.take(home, root))])
        report("unchanged project", [timed(lambda: snapshots.take(home, root)) for _ in range(args.repeats)])
        changed = []
        for turn in range(args.repeats):
            (root / "pkg0" / "module_0.py").write_text(f"VALUE = {turn}\n")
            changed.append(timed(lambda: snapshots.take(home, root)))
        report("one file changed (snapshot)", changed, TARGET_MS)

        env = {**env_for(home.root), "PWD": str(root)}
        warm_up([FRAY, "--help"], env)
        single = Path(tmp) / "single"
        single.mkdir()
        (single / "train.py").write_text("print('hi')\n")
        report("baseline: python -c pass", time_command([sys.executable, "-c", "pass"], env, args.repeats))
        subprocess.run([FRAY, "daemon", "start"], env=env, check=True, stdout=subprocess.DEVNULL)
        try:
            report("baseline: fray submit, a one-file project",
                   time_command([FRAY, "submit", str(single / "train.py")], env, args.repeats))
            whole = []
            for turn in range(args.repeats):
                (root / "pkg0" / "module_1.py").write_text(f"VALUE = {turn}\n")
                whole.append(time_command([FRAY, "submit", str(root / "train.py")], env, 1)[0])
            report("fray submit, 2,000 files, one changed", whole)
        finally:
            subprocess.run([FRAY, "daemon", "stop"], env=env, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
