"""pytest plugin: the session fixture `cluster_box` (the cluster in a box) and `box`, the same box put
back as it was after each test.

Registered from tests/conftest.py; its tests run on one xdist worker, in order (SHARED_GROUPS "box").
A box started by hand (`python -m tests.box start`) is reused and left running; one the session starts,
it stops at the end. On a machine that cannot run a box the fixture skips, except under CI (env CI set),
where it fails: nothing may skip in CI.
"""

from __future__ import annotations

import os
import sys
from typing import Iterator

import pytest

from tests.box.box import Box, attach, default_root, start_box
from tests.box.tools import missing

HINT = "apt-get install sshfs fuse3 slurm-wlm munge openssh-server gcc (.ci/run does)"


@pytest.fixture(scope="session")
def cluster_box(request: pytest.FixtureRequest) -> Iterator[Box]:
    lacking = missing()
    if lacking:
        why = f"the cluster in a box needs: {'; '.join(lacking)} -- {HINT}"
        if os.environ.get("CI"):
            pytest.fail(why + " -- CI is set, so this is a failure, not a skip", pytrace=False)
        pytest.skip(why)
    running = attach(default_root())
    if running is not None:
        box = running
        _say(request, f"cluster in a box: reusing the one running in {box.root}")
    else:
        try:
            box = start_box()
        except Exception as e:  # whatever it is, a failure: the tests that need a box cannot run
            pytest.fail(f"could not start the cluster in a box: {type(e).__name__}: {e}", pytrace=False)
        _say(request, f"cluster in a box: started in {box.timings['total']:.1f}s {box.timings}")
    try:
        yield box
    finally:
        if box.started_here:
            box.stop()


@pytest.fixture
def box(cluster_box: Box) -> Iterator[Box]:
    """The session's box, its hosts put right after the test (clocks, locks, frozen or cut-off hosts)."""
    yield cluster_box
    cluster_box.reset()


def _say(request: pytest.FixtureRequest, line: str) -> None:
    """A line on the terminal, past pytest's capture: how long the box took is worth seeing in CI logs."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if capture is None:
        print(line, file=sys.stderr)
        return
    with capture.global_and_fixture_disabled():
        print(f"\n{line}", file=sys.stderr)
