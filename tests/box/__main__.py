"""The cluster in a box by hand: `python -m tests.box start|stop|status|env|shell HOST|run HOST -- CMD`.

`start` leaves a keeper process in the background, the parent of everything the box runs (so it reaps
them), until `stop` asks it to stop the box. The folder is $FRAY_BOX_DIR (default /tmp/fray-box), or --dir.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from tests.box import procs
from tests.box.box import Box, BoxConfig, attach, default_root, load, start_box
from tests.box.polling import wait_until
from tests.box.share import Cache


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.box", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=None,
                        help="the box's folder (default: $FRAY_BOX_DIR or /tmp/fray-box)")
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start a box in the background (a no-op if one runs)")
    start.add_argument("--cache", type=float, default=Cache().names,
                       help="seconds each host's client caches names, missing names and listings (default %(default)s)")
    sub.add_parser("stop", help="stop the box and everything it runs")
    sub.add_parser("status", help="what runs: hosts, their processes, the Slurm nodes")
    sub.add_parser("env", help="print `export` lines for the box's Slurm and folder")
    shell = sub.add_parser("shell", help="an interactive shell inside a host")
    shell.add_argument("host")
    run = sub.add_parser("run", help="one command inside a host: run HOST -- CMD [ARG...]")
    run.add_argument("host")
    run.add_argument("argv", nargs=argparse.REMAINDER)
    keep = sub.add_parser("_keep", help=argparse.SUPPRESS)  # the keeper `start` leaves behind
    keep.add_argument("--cache", type=float, required=True)
    args = parser.parse_args(argv)
    root = (args.dir or default_root()).resolve()
    if args.command == "start":
        return _start(root, args.cache)
    if args.command == "_keep":
        return _keep(root, args.cache)
    if args.command == "stop":
        return _stop(root)
    box = attach(root)
    if box is None:
        print(f"no box runs in {root}: python -m tests.box start", file=sys.stderr)
        return 1
    if args.command == "status":
        _status(box)
        return 0
    if args.command == "env":
        print(f"export SLURM_CONF={box.slurm.conf}\nexport FRAY_BOX_DIR={root}")
        return 0
    if args.command == "shell":
        argv = ["bash", "-i"]
    else:
        argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
        if not argv:
            parser.error("run HOST -- CMD [ARG...]")
    host = box.host(args.host)
    os.execve(str(box.tools.enter), host.command(argv), host.environ())  # the terminal is the command's


def _start(root: Path, cache: float) -> int:
    if attach(root) is not None:
        print(f"a box already runs in {root}")
        return 0
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "keeper.log", "wb") as log:
        argv = [sys.executable, "-m", "tests.box", "--dir", str(root), "_keep", "--cache", str(cache)]
        keeper = subprocess.Popen(argv,
                                  stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                  cwd=Path(__file__).resolve().parents[2])
    try:
        box = wait_until(lambda: keeper.poll() is not None or attach(root), timeout=180, interval=0.2,
                         what="the box to start")
    except AssertionError:
        keeper.terminate()
        raise
    if keeper.poll() is not None or not isinstance(box, Box):
        print(f"the box did not start:\n{(root / 'keeper.log').read_text()[-4000:]}", file=sys.stderr)
        return 1
    print((root / "keeper.log").read_text().strip())
    _status(box)
    print("\n  eval \"$(python3 -m tests.box env)\"   # then sinfo, sbatch ...\n"
          "  python3 -m tests.box shell login-a\n  python3 -m tests.box stop")
    return 0


def _keep(root: Path, cache: float) -> int:
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stopping.set())
    box = start_box(BoxConfig(root=root, cache=Cache(names=cache, missing_names=cache, listings=cache)))
    print(f"box started in {box.timings['total']:.2f}s: {box.timings}", flush=True)
    stopping.wait()
    box.stop()
    print("box stopped", flush=True)
    return 0


def _stop(root: Path) -> int:
    box = load(root)
    if box is None:
        print(f"no box in {root}")
        return 0
    keeper = box._pids.get("keeper", 0)
    if procs.alive(keeper):
        procs.send([keeper], signal.SIGTERM)  # it holds the processes' handles: it stops and reaps them
        wait_until(lambda: not procs.alive(keeper), timeout=60, what="the box's keeper to stop it")
    else:
        box.stop()
    print(f"stopped the box in {root}")
    return 0


def _status(box: Box) -> None:
    print(f"box {box.root}: shared folder {box.shared} (server) mounted at {box.mount} on every host")
    print(f"{'host':10} {'role':6} {'init pid':>8} {'procs':>5} {'clock':>7} flock")
    for host in box.hosts.values():
        flock = "ENOSYS" if str(box.tools.noflock) in host.overlay().get("LD_PRELOAD", "") else "local"
        offset = f"{host.clock_offset():+g}s"
        print(f"{host.name:10} {host.role:6} {host.init_pid:>8} {len(host.pids()):>5} {offset:>7} {flock}")
    print(f"\nSLURM_CONF={box.slurm.conf}")
    print(box.slurm.run("sinfo", check=False).stdout)


if __name__ == "__main__":
    sys.exit(main())
