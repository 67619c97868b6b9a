"""Shared fixtures: a private FRAY_HOME with a hostile name, a real daemon, the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

REPO = Path(__file__).resolve().parent.parent
SCHEMAS = REPO / "schemas"

# `tests` is a namespace package rooted at the repository: make it importable
# however pytest was started (plain `pytest` does not put the repo on sys.path).
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# session fixtures `slurm_cluster` (real Slurm) and `cluster_box` (the cluster in a box: hosts as namespaces, tests/box)
pytest_plugins = ["tests.slurm.plugin", "tests.box.plugin"]

# The suite can run on two workers (pytest-xdist: `pytest -n 2 --dist loadgroup`): its tests mostly
# wait on real daemons, wrappers and schedulers, so two at a time nearly halve its wall time on CI's two
# cores. What shares one machine-wide thing runs on one worker, in order: the tests on the real Slurm
# cluster (one slurmctld for all: a test stops it, another drains a node or fills them all), and the
# tests through the real sshd (their far side is this machine's account, its fray bootstrapped once), and the
# tests on the cluster in a box (one box for all: a test freezes a host, skews a node's clock).
SHARED_GROUPS = {"slurm": {"slurm_cluster"}, "remote": {"sshd", "sshd_without_sftp"}, "box": {"cluster_box"}}
SLURM_PAGE = "<!-- needs the Slurm test cluster -->"  # a docs page whose examples run on the Slurm cluster


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the marks to group the tests
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        group = shared_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def shared_group(item: pytest.Item) -> str | None:
    """The group of tests `item` must run in order with, if it uses a machine-wide thing (SHARED_GROUPS)."""
    names = set(getattr(item, "fixturenames", ()))
    page = getattr(getattr(item, "callspec", None), "params", {}).get("page")
    if isinstance(page, str) and (REPO / "docs" / page).is_file() and SLURM_PAGE in (REPO / "docs" / page).read_text():
        return "slurm"  # its fixture is asked for inside the test (tests/e2e/test_docs.py)
    return next((group for group, fixtures in SHARED_GROUPS.items() if names & fixtures), None)


def wait_until(predicate: Callable[[], object], timeout: float = 15.0, interval: float = 0.05, what: str = "condition"):
    """Poll `predicate` until it returns something truthy; fail with `what` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def running(pid: int) -> bool:
    """Whether process `pid` runs: it exists and is not a zombie (one left for a parent that does not reap
    it, as PID 1 in some CI containers, still answers kill(pid, 0))."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def schema_validate(name: str, document: object) -> None:
    """Validate with the reference implementation (jsonschema), not fray's own validator."""
    reference_validator(name).validate(document)


def reference_validator(name: str):
    """jsonschema's validator for schema `name`.

    Every schema is registered under its $id, so `meta.json#/$defs/spec` style
    references between schemas resolve as they do in fray.core.validation.
    """
    import jsonschema
    from referencing import Registry, Resource

    schemas = {p.name: json.loads(p.read_text()) for p in SCHEMAS.glob("*.json")}
    registry = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in schemas.values())
    return jsonschema.Draft202012Validator(schemas[f"{name}.json"], registry=registry)


@pytest.fixture(scope="session")
def fray_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fray's wheel, built once a session (pip wheel, ~6 s) for the tests that install or read one; they only
    read it. Built from a copy of the checkout, so the build leaves nothing in it."""
    folder = tmp_path_factory.mktemp("wheel")
    source = folder / "src"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".git", ".venv", "*.egg-info", "build", "__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(folder), str(source)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-2000:]
    return next(folder.glob("fray-*.whl"))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A FRAY_HOME whose path has a space, a quote and a semicolon in it."""
    from fray.state.layout import Home

    root = tmp_path / "fray home's; dir"
    monkeypatch.setenv("FRAY_HOME", str(root))
    monkeypatch.delenv("NO_COLOR", raising=False)
    yield Home(root)
    _kill_everything_of(root)


def _kill_everything_of(root: Path) -> None:
    """Tests must not leak daemons or wrappers: kill every process whose command line names this home.

    Passes repeat until one finds nothing: a wrapper listed but not yet killed
    may start its workload after the listing of /proc was taken.
    """
    from fray.wrapper import tags

    deadline = time.monotonic() + 10
    while _kill_pass(str(root).encode()) and time.monotonic() < deadline:
        time.sleep(0.05)
    # What escaped a workload's group under a test that failed: tagged with one of this home's attempts.
    for pid, tag in tags.tagged(str(root)).items():
        tags.kill(pid, tag)


def _kill_pass(needle: bytes) -> int:
    """SIGKILL (the group of) every process whose command line contains `needle`; how many there were."""
    found = 0
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                cmdline = handle.read()
        except OSError:
            continue
        if needle in cmdline:
            found += 1
            try:
                os.killpg(int(name), signal.SIGKILL)
            except OSError:
                try:
                    os.kill(int(name), signal.SIGKILL)
                except OSError:
                    pass
    return found


def run_fray(*args: str, home: Path | None = None, timeout: float = 60, check: bool = False,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real `fray` command line, as a user runs it."""
    full_env = {**os.environ, **(env or {})}
    if home is not None:
        full_env["FRAY_HOME"] = str(home)
    proc = subprocess.run([sys.executable, "-m", "fray.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env)
    if check and proc.returncode != 0:
        raise AssertionError(f"fray {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def start_daemon(home, wait: bool = True) -> subprocess.Popen[bytes]:
    """A real `python -m fray.daemon` for `home`; with `wait`, once its lease names it."""
    from fray.state import store

    store.ensure_home(home)
    proc = subprocess.Popen([sys.executable, "-m", "fray.daemon", "--home", str(home.root)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    if wait:
        wait_until(lambda: home.daemon_lease.exists() and json.loads(home.daemon_lease.read_text())["pid"] == proc.pid,
                   what="the daemon's lease")
    return proc


def stop_daemon(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture
def daemon(home) -> Iterator[subprocess.Popen[bytes]]:
    """A real daemon serving `home`, stopped (and its leftovers killed) afterwards."""
    proc = start_daemon(home)
    yield proc
    stop_daemon(proc)
