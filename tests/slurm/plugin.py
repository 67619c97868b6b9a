"""pytest plugin: the session fixture `slurm_cluster` (a real 4-node Slurm on this machine).

Registered from tests/conftest.py. Without Slurm installed the fixture skips,
except under CI (env CI set), where it fails: nothing may skip in CI.
While the session runs, os.environ["SLURM_CONF"] points at the test cluster,
so code under test that shells out to sbatch/squeue finds it.
"""

from __future__ import annotations

import os
from typing import Iterator

import pytest

from tests.slurm.fixture import (
    DEFAULT_DIR,
    SlurmCluster,
    SlurmClusterError,
    slurm_installed,
    start_cluster,
    stop_cluster,
)

INSTALL_HINT = "real Slurm not installed: run `bash tests/slurm/cluster.sh install` (CI does this)"


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    if not slurm_installed():
        if os.environ.get("CI"):
            pytest.fail(INSTALL_HINT + " -- CI is set, so this is a failure, not a skip", pytrace=False)
        pytest.skip(INSTALL_HINT)
    try:
        cluster = start_cluster(DEFAULT_DIR)
    except SlurmClusterError as e:
        pytest.fail(f"could not start the Slurm test cluster:\n{e}", pytrace=False)
    saved = os.environ.get("SLURM_CONF")
    os.environ.update(cluster.env)
    try:
        yield cluster
    finally:
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved
        if cluster.started_here:
            stop_cluster(cluster.root)
