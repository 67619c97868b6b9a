"""LocalCluster: jobs as threads, with arguments and results still going through cloudpickle."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from conftest import wait_until
from fray import (ClusterError, Entrypoint, JobFailed, JobGroupConfig, JobRequest, JobStatus, LocalCluster,
                      ReservationConfig, ResourceConfig, current_cluster)


@pytest.fixture
def cluster():
    with LocalCluster() as c:
        yield c


def job(name: str, fn, *args, **kwargs) -> JobRequest:
    return JobRequest(name, Entrypoint.from_callable(fn, args, kwargs))


def test_a_callable_runs_and_its_result_comes_back(cluster):
    job_id = cluster.launch(job("add", lambda a, b=0: a + b, 2, b=3))
    info = cluster.wait(job_id, raise_on_failure=True, timeout=10)
    assert info.status is JobStatus.SUCCEEDED and info.result == 5
    assert cluster.poll(job_id).result == 5


def test_a_closure_over_something_unpicklable_fails_at_launch_as_it_would_on_a_cluster(cluster):
    lock = threading.Lock()
    with pytest.raises(ClusterError, match="cloudpickle"):
        cluster.launch(job("closure", lambda: lock.locked()))
    assert cluster.list_jobs() == []


def test_an_unpicklable_result_fails_the_job(cluster):
    info = cluster.wait(cluster.launch(job("bad-result", threading.Lock)), timeout=10)
    assert info.status is JobStatus.FAILED and "pickle" in info.error


def failing_step(x):
    raise ValueError(f"bad input {x}")


def test_a_failure_is_raised_with_the_job_traceback(cluster):
    job_id = cluster.launch(job("fails", failing_step, 7))
    with pytest.raises(JobFailed) as caught:
        cluster.wait([job_id], raise_on_failure=True, timeout=10)
    assert "bad input 7" in str(caught.value) and "failing_step" in caught.value.info.error


def wait_for_file(path: Path, timeout: float = 30.0) -> str:
    """A job body that blocks until `path` exists (threading.Event does not pickle, and must not)."""
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return "released"


def launch_child(release: Path):
    cluster = current_cluster()
    child = cluster.launch(job("child", lambda: (current_cluster().namespace, current_cluster().job_id)))
    grand = cluster.launch(job("waits", wait_for_file, release))
    return child, grand, cluster.wait(child, timeout=10).result


def test_children_inherit_the_namespace_and_record_their_parent(cluster, tmp_path):
    release = tmp_path / "release"
    parent = cluster.launch(job("parent", launch_child, release))
    child, grand, (namespace, child_job) = cluster.wait(parent, raise_on_failure=True, timeout=10).result
    assert namespace == cluster.namespace and child_job == child
    assert cluster.poll(child).parent_job_id == parent
    cluster.terminate(parent)  # an ended parent still takes its children along when terminated
    assert cluster.poll(grand).status is JobStatus.STOPPED
    release.touch()


def launch_and_block(release: Path, launched: Path):
    child = current_cluster().launch(job("blocked-child", wait_for_file, release))
    partial = launched.with_suffix(".tmp")
    partial.write_text(child)
    partial.replace(launched)  # whole or not at all: the test reads it as soon as it appears
    wait_for_file(release)


def test_terminate_stops_the_children_too(cluster, tmp_path):
    release, launched = tmp_path / "release", tmp_path / "launched"
    parent = cluster.launch(job("parent", launch_and_block, release, launched))
    wait_until(launched.exists, what="the child launch")
    cluster.terminate(parent)
    assert cluster.poll(parent).status is JobStatus.STOPPED
    assert cluster.poll(launched.read_text()).status is JobStatus.STOPPED
    release.touch()


def test_a_group_is_all_or_nothing(cluster):
    lock = threading.Lock()
    group = JobGroupConfig("pair", [job("ok", lambda: 1), job("unpicklable", lambda: lock)])
    with pytest.raises(ClusterError):
        cluster.launch_group(group)
    assert cluster.list_jobs() == []
    ids = cluster.launch_group(JobGroupConfig.replicas("gang", job("member", lambda: 2), 3))
    assert [i.result for i in cluster.wait(ids, raise_on_failure=True, timeout=10)] == [2, 2, 2]


def append_name(path: Path, name: str) -> str:
    with open(path, "a") as handle:
        handle.write(name + "\n")
    return name


def test_jobs_in_a_reservation_start_oldest_first_and_a_small_one_may_pass_a_big_one(cluster, tmp_path):
    reservation = cluster.create_reservation(ReservationConfig("r", max=ResourceConfig(cpus=2), ttl_sec=60))
    release, order = tmp_path / "release", tmp_path / "order"

    def launch(name: str, cpus: int, entry: Entrypoint) -> str:
        return cluster.launch(JobRequest(name, entry, resources=ResourceConfig(cpus=cpus), reservation=reservation))

    holder = launch("holder", 1, Entrypoint.from_callable(wait_for_file, (release,)))
    wait_until(lambda: cluster.poll(holder).status is JobStatus.RUNNING, what="the holder")
    big = launch("big", 2, Entrypoint.from_callable(append_name, (order, "big")))
    small = [launch(f"small-{i}", 1, Entrypoint.from_callable(append_name, (order, f"small-{i}"))) for i in range(4)]
    # Beside the holder there is room for one CPU: the smalls take it in launch order; big waits for both.
    cluster.wait(small, raise_on_failure=True, timeout=10)
    assert order.read_text().split() == ["small-0", "small-1", "small-2", "small-3"]
    assert cluster.poll(big).status is JobStatus.PENDING
    release.touch()
    assert cluster.wait(big, raise_on_failure=True, timeout=10).result == "big"


def test_jobs_in_a_reservation_wait_for_room_under_its_max(cluster, tmp_path):
    reservation = cluster.create_reservation(ReservationConfig("r", max=ResourceConfig(cpus=1), ttl_sec=60))
    release = tmp_path / "release"
    first = cluster.launch(JobRequest("first", Entrypoint.from_callable(wait_for_file, (release,)),
                                      resources=ResourceConfig(cpus=1), reservation=reservation))
    second = cluster.launch(JobRequest("second", Entrypoint.from_callable(lambda: "ran"),
                                       resources=ResourceConfig(cpus=1), reservation=reservation))
    wait_until(lambda: cluster.poll(first).status is JobStatus.RUNNING, what="the first job")
    assert cluster.poll(second).status is JobStatus.PENDING
    assert cluster.get_reservation(reservation).used.cpus == 1
    release.touch()
    assert cluster.wait(second, raise_on_failure=True, timeout=10).result == "ran"
    cluster.release_reservation(reservation)
    assert cluster.get_reservation(reservation) is None
    with pytest.raises(ClusterError, match="no reservation"):
        cluster.launch(JobRequest("late", Entrypoint.from_callable(print), reservation=reservation))


def test_a_script_entrypoint_runs_as_a_process(cluster, tmp_path):
    script = tmp_path / "hello.sh"
    script.write_text("#!/bin/bash\necho \"hello $1 from $FRAY_NAMESPACE\" > \"$2\"\n")
    out = tmp_path / "out.txt"
    job_id = cluster.launch(JobRequest("script", Entrypoint.from_script(script, ["there", str(out)])))
    assert cluster.wait(job_id, raise_on_failure=True, timeout=10).status is JobStatus.SUCCEEDED
    assert out.read_text() == "hello there from local\n"


def test_current_cluster_outside_a_job_is_the_process_local_cluster(monkeypatch):
    monkeypatch.delenv("FRAY_CLUSTER_SPEC", raising=False)
    assert current_cluster() is current_cluster()
    assert isinstance(current_cluster(), LocalCluster)
    monkeypatch.setenv("FRAY_CLUSTER_SPEC", "yarn")
    with pytest.raises(Exception, match="not known"):
        current_cluster()


def test_a_payload_is_unpickled_only_when_private_and_inside_fray_home(tmp_path):
    from fray.cluster import payloads
    from fray.errors import StateError

    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    inside = home / "payload.pkl"
    payloads.dump(inside, (len, ("abc",), {}))
    fn, args, _ = payloads.load(inside, home)
    assert fn(*args) == 3
    inside.chmod(0o644)
    with pytest.raises(StateError, match="others may read"):
        payloads.load(inside, home)
    outside = tmp_path / "elsewhere.pkl"
    payloads.dump(outside, 1)
    with pytest.raises(StateError, match="not inside FRAY_HOME"):
        payloads.load(outside, home)
    (home / "link.pkl").symlink_to(outside)
    with pytest.raises(StateError, match="not inside FRAY_HOME"):
        payloads.load(home / "link.pkl", home)


def test_actor_context_from_environment_describes_the_job_it_runs_in(cluster):
    from fray import ActorContext

    def describe():
        ctx = ActorContext.from_environment()
        return ctx.job_id, ctx.namespace, ctx.cluster.job_id

    job_id = cluster.launch(job("ctx", describe))
    assert cluster.wait(job_id, raise_on_failure=True, timeout=10).result == (job_id, "local", job_id)
    assert [i.job_id for i in cluster.list_jobs()] == [job_id]
