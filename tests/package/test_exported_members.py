"""The public API is one curated list in shepherd/__init__.py (the `fray` package), loaded lazily (as httpx tests its exports)."""

from __future__ import annotations

import json
import subprocess
import sys

import fray
from conftest import REPO

ISSUE_NAMES = {"current_cluster", "JobRequest", "ResourceConfig", "Entrypoint", "EnvironmentConfig", "JobGroupConfig",
               "ReservationConfig", "ActorServer", "ActorContext", "ClusterResolver", "FixedResolver", "ActorPool",
               "ActorFuture", "WorkerPool", "report"}


def test_exported_members_are_the_real_ones():
    assert ISSUE_NAMES <= set(fray.__all__)
    for name in fray.__all__:
        if name == "__version__":
            continue
        member = getattr(fray, name)
        module = fray._EXPORTS[name]
        assert member is (sys.modules[module] if module.endswith(f".{name}") else getattr(sys.modules[module], name))
        assert getattr(member, "__module__", module).startswith("fray."), name
        assert not name.startswith("_")
    assert sorted(fray.__all__) == sorted(set(fray.__all__))
    assert set(dir(fray)) >= set(fray.__all__)


def test_an_unknown_name_is_an_attribute_error():
    try:
        fray.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


PROBE = """
import json, sys
import fray
import fray.cli.main
sys.argv = ["fray"] + sys.argv[1:]
try:
    fray.cli.main.main(sys.argv[1:])
except SystemExit:
    pass
print("MODULES=" + json.dumps(sorted(sys.modules)))
"""


def test_importing_fray_and_fray_list_import_no_cloudpickle(home):
    proc = subprocess.run([sys.executable, "-c", PROBE, "list"], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    modules = set(json.loads(next(line for line in proc.stdout.splitlines()
                                  if line.startswith("MODULES="))[len("MODULES="):]))
    assert "cloudpickle" not in modules
    assert not {m for m in modules if m.startswith(("fray.cluster", "fray.actors", "fray.warm"))}
