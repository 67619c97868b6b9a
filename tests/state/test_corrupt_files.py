"""Every state file can be corrupt: arbitrary bytes in each one, while a real daemon runs.

For each kind of file, hypothesis writes bytes (random, truncated or mutated
real documents, JSON of the wrong shape) over the real file of a running run.
Whoever reads it first (the daemon, or `fray list`/`fray status` through
`views`) must move an invalid JSON file aside as `<name>.corrupt-<ts>` and go on:
the daemon keeps cycling and keeps the run's attempt alive, the views never
raise. The daemon reads final.json only once exit.json is there (the wrapper writes it first),
and no reader looks at it before, so while the attempt runs a corrupt one is left where it is and
changes nothing; its reading at the attempt's end is tests/daemon/test_attempt_files.py's. A corrupt meta.json is read from its last good copy and put back by the
daemon: the run keeps its name and its status; a corrupt control.json is a run
with no request pending; either is listed in the run's corrupt_files. heartbeat and events.jsonl are not JSON documents: a bad
heartbeat is just an old one, a bad events line is skipped; neither is moved aside.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Iterator

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from conftest import _kill_everything_of, run_fray, schema_validate, wait_until
from fray.state import runs, store
from fray.core import validation
from fray.ops import views
from fray.state.layout import Home

pytestmark = pytest.mark.slow

EXAMPLES = 20  # per file type; each example is a few daemon cycles (50 ms each here)

# file name -> (schema, where it lives: "run", "attempt" or "home")
FILES = {
    "meta.json": ("meta", "run"),
    "control.json": ("control", "run"),
    "events.jsonl": (None, "run"),
    "started.json": ("started", "attempt"),
    "exit.json": ("exit", "attempt"),
    "progress.json": ("progress", "attempt"),
    "failure.json": ("failure", "attempt"),
    "final.json": ("final", "attempt"),
    "heartbeat": (None, "attempt"),
    "blacklist.json": ("blacklist", "home"),
    "daemon.json": ("daemon", "home"),
}
READ_AT_THE_END = {"final.json"}  # nobody reads it before exit.json

SERVES = """#!/bin/bash
#FRAY --heartbeat-interval 0.5 --heartbeat-timeout 1h --stop-grace 1
trap '' USR1
trap 'exit 0' TERM
python3 -m fray.wrapper.report progress --step 1 --loss 0.5
while true; do sleep 0.2; done
"""


@dataclass
class Served:
    home: Home
    daemon: subprocess.Popen[bytes]
    run_id: str
    counter: int = 0
    files: ClassVar[dict[str, tuple[str | None, str]]] = FILES  # the files it damages: their schema and place

    def path(self, name: str) -> Path:
        where = self.files[name][1]
        if where == "home":
            return self.home.root / name
        run = self.home.run(self.run_id)
        return run.dir / name if where == "run" else run.attempt(1).dir / name

    def lease(self) -> dict | None:
        try:
            return json.loads(self.home.daemon_lease.read_bytes())
        except (OSError, ValueError):
            return None  # being corrupted by the test, or moved aside

    def attempt(self) -> dict:
        return json.loads(self.home.run(self.run_id).meta.read_bytes())["attempts"][-1]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("corrupt")
    home = Home(base / "fray home's; dir")
    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 4, "gpus": 0, "poll_interval_sec": 0.05}}))
    daemon = subprocess.Popen([sys.executable, "-m", "fray.daemon", "--home", str(home.root)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        script = base / "serve.sh"
        script.write_text(SERVES)
        run_id = runs.create_run(home, runs.SubmitOptions(script=script, overrides={}, workdir=str(base))).run_id
        served = Served(home, daemon, run_id)
        wait_until(lambda: served.path("progress.json").exists() and served.attempt()["state"] == "running",
                   timeout=30, what="the run to be running and reporting progress")
        yield served
    finally:
        daemon.kill()
        daemon.wait()
        _kill_everything_of(home.root)


# Recipes for bytes that a crash, a full disk, a bad editor or a cosmic ray could leave in a
# file. They are drawn independently of the file (hypothesis needs that) and applied to it.
RECIPES = st.one_of(
    st.tuples(st.just("bytes"), st.binary(max_size=300)),
    st.tuples(st.just("bytes"), st.sampled_from([
        b"", b"\n", b"   ", b"null\n", b"[]\n", b"{}\n", b'{"schema_version": 1}\n', b"0\n", b"\xff\xfe\x00{",
        b"NaN\n", b'"just a string"\n', b"{" * 2000])),
    st.tuples(st.just("wrong shape"), st.text(max_size=80)),
    st.tuples(st.just("cut short"), st.floats(0, 1, exclude_max=True)),
    st.tuples(st.just("one byte changed"), st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255))),
)


def apply(recipe: tuple, good: bytes | None) -> bytes:
    kind, value = recipe
    if kind == "bytes":
        return value
    if kind == "wrong shape":
        return json.dumps({"run_id": value}).encode()
    if not good:
        return b""
    if kind == "cut short":
        return good[:int(value * len(good))]
    at = int(value[0] * len(good))
    return good[:at] + bytes([value[1]]) + good[at + 1:]


def is_valid(schema: str, blob: bytes) -> bool:
    """What store.read_json accepts."""
    if not blob.strip():
        return False
    try:
        document = orjson.loads(blob)
    except orjson.JSONDecodeError:
        return False
    return not validation.errors(schema, document)


def aside(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.corrupt-*"))


def readers_keep_working(served: Served) -> dict:
    """`fray list` and `fray status` (their views) never raise; the run's row as status shows it."""
    listed = views.list_view(served.home)
    assert [r["run_id"] for r in listed["runs"]].count(served.run_id) == 1
    return views.status_view(served.home, served.run_id)["run"]


@pytest.mark.parametrize("name", list(FILES))
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(recipe=RECIPES)
def test_arbitrary_bytes_in_a_state_file_never_stop_the_daemon_or_the_readers(served, name, recipe):
    schema = FILES[name][0]
    target = served.path(name)
    good = target.read_bytes() if target.exists() else None
    blob = apply(recipe, good)
    if schema is not None:
        assume(not is_valid(schema, blob))  # a forged but valid record is another story
    cycles = wait_until(served.lease, what="a readable lease")["cycles"]
    before = set(aside(target))

    store.write_bytes_atomic(target, blob)
    try:
        corrupt_file_is_handled(served, name, target, blob, cycles, before)
    finally:
        restore(served, name, good)
    assert served.attempt()["number"] == 1 and served.attempt()["state"] == "running"
    row = wait_until(lambda: (r := readers_keep_working(served))["status"] == "healthy_running" and r,
                     what="the run to look healthy again once its files are good")
    assert row["attempt"] == 1


def corrupt_file_is_handled(served: Served, name: str, target: Path, blob: bytes, cycles: int,
                            before: set[Path]) -> None:
    schema = FILES[name][0]
    readers_keep_working(served)  # possibly the first reader of the corrupt file

    if name in READ_AT_THE_END:
        wait_until(lambda: (lease := served.lease()) is not None and lease["cycles"] > cycles + 2,
                   what="the daemon to cycle with the corrupt file there")
        assert set(aside(target)) == before and target.read_bytes() == blob, f"{name} was read before exit.json"
    elif schema is not None:
        # Moved aside by whoever read it first; the running daemon may instead have replaced its own lease.
        replaced = (lambda: (lease := served.lease()) is not None and lease["cycles"] > cycles) if name == "daemon.json" else None
        wait_until(lambda: set(aside(target)) - before or (replaced and replaced()), timeout=15,
                   what=f"the corrupt {name} to be moved aside")
        for moved in set(aside(target)) - before:
            assert moved.read_bytes() == blob
    if name in ("meta.json", "control.json", "started.json"):
        shown = views.status_view(served.home, served.run_id)
        assert shown["run"]["status"] != "error_unknown" and shown["run"]["name"] == "serve", shown["run"]
        assert any(Path(p).name.startswith(name + ".corrupt-") for p in shown["corrupt_files"]), shown["corrupt_files"]
    if name == "meta.json":  # put back by its writer from the last good copy
        wait_until(lambda: is_valid("meta", target.read_bytes()) if target.exists() else False,
                   what="the daemon to restore meta.json: " + restore_diagnosis(served))

    # The daemon lives on and keeps cycling; the workload was not touched.
    assert served.daemon.poll() is None
    wait_until(lambda: (lease := served.lease()) is not None and lease["cycles"] > cycles + 1,
               what="the daemon to keep cycling")


def restore_diagnosis(served: Served) -> str:
    """What the daemon logged and what the run's folder holds (a failure's message)."""
    folder = served.home.run(served.run_id).dir
    log = served.home.daemon_log.read_text()[-1500:] if served.home.daemon_log.exists() else ""
    return f"{sorted(p.name for p in folder.iterdir())}\n{log}"


def restore(served: Served, name: str, good: bytes | None) -> None:
    """Put back what the test broke, as its writer would (the wrapper's and the daemon's own files heal alone)."""
    if name == "control.json":
        runs.request(served.home, served.run_id, "unpause")  # the CLI rewrites it on the next request
    elif name in ("meta.json", "started.json", "progress.json") and good is not None:
        store.write_bytes_atomic(served.path(name), good)


def test_garbage_in_events_jsonl_does_not_swallow_the_events_after_it(served):
    events = served.path("events.jsonl")
    events.write_bytes(events.read_bytes() + b'{"at": 1, "kind": "cut short by a cr')  # no newline
    served.counter += 1
    runs.set_overrides(served.home, served.run_id, {"startup_grace_sec": 200.0 + served.counter})
    shown = wait_until(lambda: [e for e in views.status_view(served.home, served.run_id)["events"]
                                if e["kind"] == "config" and f"{200.0 + served.counter}" in e["reason"]],
                       what="the daemon's next event to be readable")
    assert len(shown) == 1


def test_the_cli_keeps_working_with_every_file_corrupt_at_once(served, tmp_path):
    """`fray list --json` and `fray status` as a person runs them (slow, so once, not per example)."""
    goods = {name: served.path(name).read_bytes() for name in ("meta.json", "started.json")}
    # meta.json's last good copy too, first: with both gone the run cannot be judged (a single loss is healed).
    store.write_bytes_atomic(served.home.run(served.run_id).meta_copy, b'{"broken": ')
    for name, (schema, _) in FILES.items():
        if name != "events.jsonl":
            store.write_bytes_atomic(served.path(name), b'{"broken": ')
    listed = run_fray("list", "--json", home=served.home.root)
    assert listed.returncode == 0, listed.stderr
    document = json.loads(listed.stdout)
    schema_validate("cli-list", document)
    (row,) = [r for r in document["runs"] if r["run_id"] == served.run_id]
    assert row["status"] == "error_unknown" and "meta.json" in row["reason"]

    shown = run_fray("status", served.run_id, "--json", home=served.home.root)
    assert shown.returncode == 2 and "meta.json" in shown.stdout and "corrupt" in shown.stdout
    assert json.loads(shown.stdout)["error"]["code"] == "corrupt_state"  # the state is damaged, not the command line
    store.write_bytes_atomic(served.path("meta.json"), goods["meta.json"])
    store.write_bytes_atomic(served.path("started.json"), goods["started.json"])
    shown = run_fray("status", served.run_id, "--json", home=served.home.root)
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    assert document["run"]["status"] != "error_unknown" and document["run"]["name"] == "serve"
    assert {Path(p).name.split(".corrupt-")[0] for p in document["corrupt_files"]} >= {"control.json", "meta.json"}

    # The daemon still does real work: a new run goes from submission to success.
    script = tmp_path / "quick.sh"
    script.write_text("#!/bin/bash\necho fine\n")
    quick = runs.create_run(served.home, runs.SubmitOptions(script=script, overrides={}, workdir=str(tmp_path))).run_id
    done = wait_until(lambda: (m := json.loads(served.home.run(quick).meta.read_bytes()))["phase"] == "ended" and m,
                      timeout=20, what="a new run to complete")
    assert done["end"]["status"] == "completed_success"
    assert served.daemon.poll() is None
    runs.request(served.home, served.run_id, "unpause")
    wait_until(lambda: readers_keep_working(served)["status"] == "healthy_running", what="the run to recover")
