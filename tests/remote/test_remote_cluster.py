"""The cluster API over SSH: `current_cluster(remote=HOST)` against a real sshd and a remote FRAY_HOME.

The jobs cannot import this test module, so the functions below travel by
value (as a notebook's would).
"""

from __future__ import annotations

import json
import sys
import time

import cloudpickle
import pytest

from tests.conftest import _kill_everything_of, run_fray, wait_until
from fray import Entrypoint, JobGroupConfig, JobRequest, JobStatus, ReservationConfig, current_cluster
from fray.cluster.api import ClusterError
from tests.remote_support import remote_host, sshd  # noqa: F401

pytestmark = pytest.mark.slow
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def scaled(values: list[int], factor: int) -> dict[str, int]:
    return {str(v): v * factor for v in values}


def fails(reason: str) -> None:
    raise ValueError(f"bad shard: {reason}")


def test_launch_wait_and_stop_jobs_on_a_remote_fray_home(remote_host, tmp_path, monkeypatch):
    remote_home = tmp_path / "cluster home"
    monkeypatch.setenv("FRAY_REMOTE_HOME", str(remote_home))
    monkeypatch.setenv("FRAY_HOME", str(tmp_path / "laptop home"))  # the laptop's own: never used
    monkeypatch.delenv("FRAY_CLUSTER_SPEC", raising=False)
    monkeypatch.setenv("FRAY_REMOTE", remote_host.alias)  # as the CLI: a default host
    try:
        cluster = current_cluster()
        assert type(cluster).__name__ == "RemoteCluster" and cluster is current_cluster(remote_host.alias)

        job = cluster.launch(JobRequest("scale", Entrypoint.from_callable(scaled, ([1, 2, 3], 10))))
        info = cluster.wait(job, raise_on_failure=True, timeout=120)
        assert (info.status, info.result) == (JobStatus.SUCCEEDED, {"1": 10, "2": 20, "3": 30})

        bad = cluster.launch(JobRequest("bad", Entrypoint.from_callable(fails, ("shard 7",))))
        failed = cluster.wait(bad, timeout=120)
        assert failed.status is JobStatus.FAILED
        assert "ValueError: bad shard: shard 7" in failed.error and "in fails" in failed.error  # the remote traceback

        members = cluster.launch_group(JobGroupConfig("pair", [
            JobRequest(f"member-{i}", Entrypoint.from_callable(scaled, ([i], 2))) for i in range(2)]))
        assert [i.result for i in cluster.wait(members, raise_on_failure=True, timeout=120)] == [{"0": 0}, {"1": 2}]

        sleeper = cluster.launch(JobRequest("sleeper", Entrypoint.from_callable(time.sleep, (600,))))
        wait_until(lambda: cluster.poll(sleeper).status is JobStatus.RUNNING, timeout=60, what="the sleeper to run")
        cluster.terminate(sleeper)
        assert cluster.wait(sleeper, timeout=60).status is JobStatus.STOPPED

        # Ordinary runs of the remote FRAY_HOME: its own `fray list` shows them, the stop audited there.
        listed = json.loads(run_fray("list", "--json", home=remote_home, check=True).stdout)["runs"]
        assert {r["run_id"] for r in listed} == {job, bad, sleeper, *members}
        assert {j.job_id for j in cluster.list_jobs()} == {job, bad, sleeper, *members}
        assert "stop" in run_fray("audit", "show", home=remote_home, check=True).stdout

        with pytest.raises(ClusterError, match="not over SSH"):
            cluster.create_reservation(ReservationConfig("r"))
    finally:
        from fray.remote import connection

        connection.close_all()
        _kill_everything_of(remote_home)
