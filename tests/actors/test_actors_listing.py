"""`fray actors list` reads endpoints through a cache of the records it validated (fray.actors.listing):
it must show exactly the endpoint files there are, whatever the cache holds."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

from fray.actors import listing
from fray.state import endpoints
from fray.state.endpoints import Endpoint


def register(home, namespace: str, name: str, actor_id: str, port: int = 5000) -> None:
    """What ActorServer.register writes."""
    endpoints.write(home, Endpoint(actor_id=actor_id, name=name, namespace=namespace, host="127.0.0.1", port=port,
                                   pid=os.getpid(), node="vm", run_id=None, attempt=None, registered_at=time.time(),
                                   metadata={}))


def shown(home) -> list[tuple[str, str, str, str]]:
    out = subprocess.run([sys.executable, "-m", "fray.cli.entry", "actors", "list", "--json"], capture_output=True,
                         text=True, check=True, env={**os.environ, "FRAY_HOME": str(home.root)}).stdout
    return [(e["namespace"], e["name"], e["actor_id"], e["address"]) for e in json.loads(out)["endpoints"]]


def test_the_listing_follows_endpoints_registered_and_removed_after_it_was_cached(home):
    register(home, "ns", "trainer", "a" * 16)
    register(home, "ns", "trainer", "b" * 16, port=5001)
    register(home, "other", "ps", "c" * 16)
    assert shown(home) == [("ns", "trainer", "a" * 16, "127.0.0.1:5000"), ("ns", "trainer", "b" * 16, "127.0.0.1:5001"),
                           ("other", "ps", "c" * 16, "127.0.0.1:5000")]
    assert (home.cache_dir / listing.CACHE_NAME).is_file()
    endpoints.remove(home, "ns", "trainer", "a" * 16)
    register(home, "ns", "eval", "d" * 16, port=5002)
    assert shown(home) == [("ns", "eval", "d" * 16, "127.0.0.1:5002"), ("ns", "trainer", "b" * 16, "127.0.0.1:5001"),
                           ("other", "ps", "c" * 16, "127.0.0.1:5000")]


def test_a_cache_that_is_damaged_or_lies_about_a_replaced_file_changes_nothing_shown(home):
    register(home, "ns", "trainer", "a" * 16)
    expected = shown(home)
    cache = home.cache_dir / listing.CACHE_NAME
    cache.write_bytes(b'{"version": 1, "files": ')  # a torn write (a writer killed before its rename cannot leave one)
    assert shown(home) == expected
    path = home.endpoint("ns", "trainer", "a" * 16)
    document = json.loads(path.read_text())
    fresh = path.with_name(".fresh")  # written beside it, then renamed over it: a new inode while the old lives
    fresh.write_text(json.dumps({**document, "port": 6000}))
    os.replace(fresh, path)
    assert shown(home) == [("ns", "trainer", "a" * 16, "127.0.0.1:6000")]


WRITER = """
import os, sys, time
from fray.actors import listing
from fray.state import endpoints
from fray.state.endpoints import Endpoint
from fray.state.layout import Home
home, n = Home(sys.argv[1]), 0
print("ready", flush=True)
while True:
    n += 1
    actor_id = f"{os.getpid():08x}{n:08x}"
    endpoints.write(home, Endpoint(actor_id, f"name-{n % 7}", "ns", "127.0.0.1", 5000, os.getpid(), "vm", None, None,
                                   time.time(), {}))
    listing.records(home)  # rewrites the cache: a new file was read
    if n % 2:
        endpoints.remove(home, "ns", f"name-{n % 7}", actor_id)
        listing.records(home)  # and again: a file is gone
"""


def test_listings_killed_while_writing_the_cache_leave_nothing_hidden_or_invented(home):
    """SIGKILL a process that keeps registering endpoints, removing some and rewriting the cache, 30 times at
    random moments; after each, `fray actors list --json` shows exactly the endpoint files on disk."""
    register(home, "ns", "first", "f" * 16)
    rng = random.Random(23)
    for kill in range(30):
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(home.root)], stdout=subprocess.PIPE, text=True)
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.2))  # the moment of the kill is the point, not a synchronization
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        if kill % 3 == 0:  # one appears and one goes while no listing runs
            register(home, "ns", "late", f"{kill:016x}")
            endpoints.remove(home, "ns", "first", "f" * 16)
        on_disk = {(p.parent.name, p.stem) for p in home.namespaces_dir.glob("ns/actors/*/*.json")}
        assert {(name, actor_id) for _, name, actor_id, _ in shown(home)} == on_disk, f"after kill {kill}"


CLICK_ONLY = "import sys; from fray.cli.main import cli; cli.main(sys.argv[1:], prog_name='fray')"
WITH_MODULES = ("import atexit, json, sys; "
                "atexit.register(lambda: print('MODULES=' + json.dumps(sorted(sys.modules)), file=sys.stderr)); "
                "from fray.cli.entry import main; main(sys.argv[1:])")


def test_actors_list_json_prints_the_same_document_without_click(home, tmp_path):
    """`fray actors list --json [--namespace NS]` skips click (fray.cli.entry) and must not differ from the click
    command, for every namespace, one namespace, a namespace with none, and an error (no such home)."""
    from tests.conftest import schema_validate

    register(home, "ns", "trainer", "a" * 16)
    register(home, "other", "ps", "c" * 16)
    env = {**os.environ, "FRAY_HOME": str(home.root), "NO_COLOR": "1"}
    for args in (["actors", "list", "--json"], ["actors", "list", "--namespace", "ns", "--json"],
                 ["actors", "list", "-n", "none", "--json"], ["actors", "list", "-n", "other", "--json"]):
        runs = [subprocess.run([sys.executable, "-c", program, *args], capture_output=True, text=True, timeout=60,
                               env=env) for program in (WITH_MODULES, CLICK_ONLY)]
        assert [r.returncode for r in runs] == [0, 0], runs[0].stderr + runs[1].stderr
        documents = [json.loads(r.stdout) for r in runs]
        for document in documents:
            schema_validate("cli-actors", document)
            document.pop("generated_at")
        assert documents[0] == documents[1], args
        assert "click" not in json.loads(runs[0].stderr.split("MODULES=", 1)[1]), args
    assert [e["name"] for e in documents[0]["endpoints"]] == ["ps"]
    unreadable = tmp_path / "not-a-home"
    unreadable.write_text("a file, not a folder")
    failed = subprocess.run([sys.executable, "-m", "fray", "--home", str(unreadable), "actors", "list", "--json"],
                            capture_output=True, text=True, timeout=60, env=env)
    error = json.loads(failed.stdout)["error"]  # as click's path reports it (fray.cli.failures)
    assert failed.returncode == error["exit_code"] == 2 and str(unreadable) in error["message"], failed.stdout
