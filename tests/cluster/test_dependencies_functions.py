"""`fray.submit(fn, after=[future])` and the cluster API's `JobRequest(after=...)`: real daemon, local wrappers."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

import fray
from conftest import wait_until
from fray import JobFailed
from fray.cluster.api import ClusterError, Entrypoint, JobRequest
from fray.cluster.local import LocalCluster

import cloudpickle  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = pytest.mark.slow


def produce(gate: str) -> str:
    while not os.path.exists(gate):
        time.sleep(0.05)  # the job's own pace
    return Path(gate).read_text()


def consume() -> dict:
    return {k: v for k, v in os.environ.items() if k.startswith("FRAY_AFTER_")}


def test_a_function_waits_for_another_future_and_fails_with_it(home, daemon, tmp_path):
    gate = tmp_path / "gate"
    upstream = fray.submit(produce, str(gate), name="tokens")
    downstream = fray.submit(consume, after=[upstream], name="stats")
    wait_until(lambda: downstream.info().reason.startswith("waiting for tokens"), timeout=30, what="it to wait")
    gate.write_text("done")
    assert upstream.result(timeout=60) == "done"
    told = downstream.result(timeout=60)
    assert told["FRAY_AFTER_TOKENS"] == str(home.run(upstream.run_id).dir)
    assert told["FRAY_AFTER_TOKENS_CHECKPOINT"] == ""

    broken = fray.submit(produce, str(tmp_path / "never"), name="never")
    orphan = fray.submit(consume, after=[broken], name="orphan")
    broken.cancel()
    with pytest.raises(JobFailed, match="upstream never"):
        orphan.result(timeout=60)
    assert orphan.info().status.value == "failed"  # the cluster API's JobStatus: failed_dependency is a failure


def test_bad_after_in_the_api_is_refused_and_writes_nothing(home):
    with pytest.raises(ClusterError, match="no run matches 'nosuch'"):
        fray.submit(consume, after=["nosuch"])
    with pytest.raises(ClusterError, match="RUN\\[:ok\\|:fail\\|:any\\]"):
        fray.submit(consume, after=["x:later"])
    assert home.run_ids() == []
    request = JobRequest("j", Entrypoint.from_callable(consume, (), {}), after=["anything"])
    with pytest.raises(ClusterError, match="needs a FRAY_HOME cluster"):
        LocalCluster().launch(request)
