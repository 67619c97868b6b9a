"""Benchmark: `--remote` against a real sshd on 127.0.0.1 (targets from issue 13).

    fray list --json --remote HOST, cold (a fresh connection each time) and warm
    (the background master left by the previous command), beside a plain
    `ssh HOST fray list --json` (OpenSSH client) in the same run.
        target: warm <= 1.2 x plain ssh
    fray sync of a 2,000-file project with one file changed (warm, through
    the master; and without one), beside `rsync -a` over ssh to another copy
    (when rsync is installed: `apt-get install rsync`).
        target: incremental sync <= 2 x rsync
    bootstrap: fray missing on the remote (any fray on its PATH taken for older,
    as the tests do), installed into a fresh remote FRAY_HOME: first with an empty
    local wheel cache, then with it filled (the usual case: one laptop, many
    clusters or homes), then once more with the remote's wheels already there;
    beside the baseline, what bootstrap did before issue 20 (an isolated `pip
    wheel` of fray, `python3 -m venv` with pip, `pip install` of the wheel with its
    dependencies from the package index), timed in the same run.
        target: bootstrap with the local wheel cache filled <= 20 s (issue 20)

    python tests/bench/bench_remote.py [--repeats 11] [--only bootstrap|list-sync]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from _common import FRAY, REPO, report, time_interleaved  # noqa: E402

from tests.conftest import _kill_everything_of  # noqa: E402
from tests.remote_support import start_sshd, write_ssh_config  # noqa: E402

ALIAS = "fray-bench"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--only", choices=("bootstrap", "list-sync"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fray-bench-remote-") as tmp:
        root = Path(tmp)
        (root / "sshd").mkdir()
        server, proc = start_sshd(root / "sshd")
        try:
            if args.only != "bootstrap":
                run(root, server, args.repeats)
            if args.only != "list-sync":
                bootstrap(root, server, max(1, min(args.repeats, 3)))
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            _kill_everything_of(root / "remote home")  # the remote daemon and master, if any


def run(root: Path, server, repeats: int) -> None:  # noqa: ANN001
    known_hosts, config, remote_home = root / "known_hosts", root / "ssh_config", root / "remote home"
    known_hosts.write_text(server.known_hosts_line())
    write_ssh_config(config, server, known_hosts, alias=ALIAS)
    (root / "run").mkdir()
    env = {**os.environ, "FRAY_SSH_CONFIG": str(config), "FRAY_REMOTE_HOME": str(remote_home),
           "XDG_RUNTIME_DIR": str(root / "run"), "NO_COLOR": "1"}
    env.pop("SSH_AUTH_SOCK", None)
    fray_list = [FRAY, "list", "--json", "--remote", ALIAS]
    subprocess.run(fray_list, env={**env, "FRAY_REMOTE_NO_MASTER": "1"}, check=True, stdout=subprocess.DEVNULL)  # installs
    remote_fray = _remote_executable(env)  # the fray the command above found or installed there
    plain = ["ssh", "-F", str(config), ALIAS, f"env FRAY_HOME={shlex.quote(str(remote_home))} "
             f"{shlex.quote(str(remote_fray))} list --json"]
    subprocess.run(fray_list, env=env, check=True, stdout=subprocess.DEVNULL)  # leaves a master
    sockets = root / "run" / f"fray-ssh-{os.getuid()}"
    deadline = time.monotonic() + 60
    while not (sockets.exists() and any(sockets.iterdir())):
        if time.monotonic() > deadline:
            raise TimeoutError("no master came up")
        time.sleep(0.05)
    cold = time_interleaved({"cold": fray_list}, {**env, "FRAY_REMOTE_NO_MASTER": "1"}, repeats)["cold"]
    both = time_interleaved({"warm": fray_list, "ssh": plain}, env, repeats)
    report("fray list --json --remote (cold: new connection)", cold)
    ssh_ms = report("ssh HOST fray list --json (OpenSSH)", both["ssh"])
    report("fray list --json --remote (warm: master)", both["warm"], target_ms=1.2 * ssh_ms)

    project = root / "project"
    for i in range(2000):
        path = project / f"pkg{i % 40}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"VALUE = {i}\n" * 20)
    sync = [FRAY, "sync", "--remote", ALIAS]
    subprocess.run(sync, env=env, cwd=project, check=True, stdout=subprocess.DEVNULL)  # the first, full copy
    commands = {"sync": sync, "sync cold": sync}  # warm: through the master; cold: a connection of its own
    rsync = shutil.which("rsync")
    if rsync:
        commands["rsync"] = [rsync, "-a", "-e", f"ssh -F {shlex.quote(str(config))}", f"{project}/",
                             f"{ALIAS}:{root / 'rsync copy'}/"]  # rsync >= 3.2.4 passes it unsplit
        subprocess.run(commands["rsync"], env=env, check=True)
    samples: dict[str, list[float]] = {label: [] for label in commands}
    for i in range(repeats):
        (project / "pkg7" / "mod7.py").write_text(f"VALUE = {i}  # changed\n")
        for label, argv in commands.items():
            start = time.perf_counter()
            subprocess.run(argv, env={**env, "FRAY_REMOTE_NO_MASTER": "1"} if label == "sync cold" else env,
                           cwd=project, check=True, stdout=subprocess.DEVNULL)
            samples[label].append(time.perf_counter() - start)
    if rsync:
        rsync_ms = report("rsync -a (2,000 files, one changed)", samples["rsync"])
        report("fray sync (2,000 files, one changed)", samples["sync"], target_ms=2 * rsync_ms)
        report("fray sync, no master (2,000 files, one changed)", samples["sync cold"])
    else:
        report("fray sync (2,000 files, one changed)", samples["sync"])
        report("fray sync, no master (2,000 files, one changed)", samples["sync cold"])
        print("rsync is not installed here: the comparison was skipped")
    print(f"(medians: cold {statistics.median(cold) * 1000:.0f} ms)")


def bootstrap(root: Path, server, repeats: int) -> None:  # noqa: ANN001
    from fray.remote import bootstrap as remote_bootstrap, connection

    config, known_hosts = root / "boot_ssh_config", root / "known_hosts"
    known_hosts.write_text(server.known_hosts_line())
    write_ssh_config(config, server, known_hosts, alias=ALIAS)
    os.environ["FRAY_SSH_CONFIG"] = str(config)
    real_version = remote_bootstrap.local_version()
    remote_bootstrap.local_version = lambda: real_version + ".1"  # any fray on the remote's PATH is "older"
    homes = iter(range(10_000))

    def install(cache: Path, home: Path | None = None) -> tuple[float, Path]:
        home = home or root / f"boot home {next(homes)}"
        os.environ["FRAY_WHEEL_CACHE"] = str(cache)
        start = time.perf_counter()
        remote_bootstrap.ensure(connection.connect(ALIAS), str(home))
        took = time.perf_counter() - start
        connection.close_all()
        return took, home

    cold, _ = install(root / "empty wheel cache")
    warm, again, baseline = [], [], []
    for _ in range(repeats):
        took, home = install(root / "wheel cache")
        warm.append(took)
        shutil.rmtree(home / "venv")  # an install that never finished: the wheels are there already
        again.append(install(root / "wheel cache", home)[0])
        baseline.append(_old_bootstrap(root, config, root / f"baseline home {len(baseline)}"))
    report("bootstrap, empty local wheel cache", [cold])
    report("bootstrap, local wheel cache filled", warm, target_ms=20_000)
    report("bootstrap, remote wheels already there", again)
    report("baseline: bootstrap before issue 20", baseline)


def _old_bootstrap(root: Path, config: Path, home: Path) -> float:
    """What bootstrap did before: build a wheel (isolated), send it, venv with pip, pip install from the index."""
    ssh = ["ssh", "-F", str(config), ALIAS]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp, str(REPO)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wheel = next(Path(tmp).glob("fray-*.whl"))
        target = shlex.quote(str(home / "wheels" / wheel.name))
        with wheel.open("rb") as f:
            subprocess.run([*ssh, f"mkdir -p {shlex.quote(str(home / 'wheels'))} && cat > {target}"], stdin=f,
                           check=True)
    venv = shlex.quote(str(home / "venv"))
    subprocess.run([*ssh, f"python3 -m venv {venv} && {venv}/bin/python -m pip install -q "
                          f"--disable-pip-version-check {target}"], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _remote_executable(env: dict[str, str]) -> str:
    from fray.remote import bootstrap, connection

    os.environ["FRAY_SSH_CONFIG"] = env["FRAY_SSH_CONFIG"]
    try:
        return bootstrap.ensure(connection.connect(ALIAS), env["FRAY_REMOTE_HOME"]).executable
    finally:
        connection.close_all()


if __name__ == "__main__":
    main()
