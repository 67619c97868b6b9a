"""FrayCluster end to end: a real daemon, the local backend, real wrappers, sockets and files.

Jobs launched from inside a fray job become its children; jobs launched from
the test process (outside any job) are top-level runs in a namespace of their
own. Every test waits on files and states with `wait_until`, never on sleeps.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from conftest import run_fray, schema_validate, start_daemon, stop_daemon, wait_until
from fray import (ClusterResolver, EnvironmentConfig, Entrypoint, FrayCluster, JobGroupConfig, JobRequest,
                  JobStatus, ReservationConfig, ResourceConfig, WorkerPool)
from fray.cluster.api import ClusterError
from fray.errors import UsageError
from fray.state import runs
from fray.state import endpoints
from fray.state.layout import Home

pytestmark = pytest.mark.slow

# The jobs cannot import this test module, so its functions travel by value (as a user's would from a
# module that only exists on the launching machine).
import cloudpickle  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture
def daemon(home):
    """A daemon whose local backend offers 32 CPUs: parents waiting for their children hold theirs."""
    from fray.state import store

    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 32}}))
    proc = start_daemon(home)
    yield proc
    stop_daemon(proc)


def meta_of(home: Home, run_id: str) -> dict:
    return json.loads(home.run(run_id).meta.read_text())


def children_of(home: Home, run_id: str) -> list[str]:
    return [i for i in home.run_ids() if meta_of(home, i).get("parent_run_id") == run_id]


def ended(home: Home, run_id: str) -> dict | None:
    meta = meta_of(home, run_id)
    return meta if meta["phase"] == "ended" else None


def submit(home: Home, path: Path) -> str:
    return runs.create_run(home, runs.SubmitOptions(script=path, overrides={}, workdir=str(path.parent))).run_id


PARENT = '''
import os, sys
from fray import current_cluster, JobRequest, Entrypoint, ResourceConfig

def square(x):
    return x * x, os.environ["FRAY_NAMESPACE"], os.environ["FRAY_PARENT_JOB_ID"]

def grandchild():
    from fray import current_cluster
    c = current_cluster()
    return c.wait(c.launch(JobRequest("leaf", Entrypoint.from_callable(os.getpid))), raise_on_failure=True).result > 0

def fails():
    raise RuntimeError("child failed on purpose")

cluster = current_cluster()
ids = [cluster.launch(JobRequest(f"sq-{i}", Entrypoint.from_callable(square, (i,)))) for i in range(2)]
ids.append(cluster.launch(JobRequest("nested", Entrypoint.from_callable(grandchild))))
infos = cluster.wait(ids, raise_on_failure=True, timeout=60)
print("results", [i.result for i in infos], flush=True)
bad = cluster.launch(JobRequest("bad", Entrypoint.from_callable(fails)))
try:
    cluster.wait(bad, raise_on_failure=True, timeout=60)
except Exception as exc:
    print("caught", type(exc).__name__, "child failed on purpose" in str(exc), "in fails" in str(exc), flush=True)
print("namespace", cluster.namespace == os.environ["FRAY_RUN_ID"], flush=True)
'''


def test_a_job_launches_children_that_inherit_its_namespace_and_show_as_a_family(home, daemon, tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    parent = submit(home, script)
    meta = wait_until(lambda: ended(home, parent), timeout=60, what="the parent to end")
    out = home.run(parent).attempt(1).stdout.read_text()
    assert meta["end"]["status"] == "completed_success", out + home.run(parent).attempt(1).stderr.read_text()
    assert f"results [(0, '{parent}', '{parent}'), (1, '{parent}', '{parent}'), True]" in out
    assert "caught JobFailed True True" in out and "namespace True" in out
    kids = children_of(home, parent)
    assert len(kids) == 4
    for kid in kids:
        child = meta_of(home, kid)
        schema_validate("meta", child)
        schema_validate("job", json.loads(home.run(kid).job.read_text()))
        assert child["parent_attempt"] == 1 and child["namespace"] == parent and child["spec"]["backend"] == "local"
    records = {meta_of(home, k)["name"]: json.loads(home.run(k).attempt(1).call_record.read_text()) for k in kids}
    for record in records.values():
        schema_validate("call-result", record)
    assert records["sq-1"]["outcome"] == "returned" and records["sq-1"]["value_file"] == "call-result.pkl"
    assert records["bad"]["outcome"] == "raised" and "in fails" in records["bad"]["traceback"]
    nested = next(k for k in kids if meta_of(home, k)["name"] == "nested")
    assert len(children_of(home, nested)) == 1  # the grandchild
    listing = json.loads(run_fray("list", "--tree", "--json", home=home.root, check=True).stdout)
    schema_validate("cli-list", listing)
    assert [(r["depth"], r["name"]) for r in listing["runs"]][:2] == [(0, "parent"), (1, "sq-0")]
    assert (2, "leaf") in [(r["depth"], r["name"]) for r in listing["runs"]]
    assert "└ sq-0" in run_fray("list", "--tree", home=home.root, check=True).stdout
    status = json.loads(run_fray("status", parent, "--json", home=home.root, check=True).stdout)
    schema_validate("cli-status", status)
    assert sorted(c["name"] for c in status["family"]["children"]) == ["bad", "nested", "sq-0", "sq-1"]
    child_status = run_fray("status", nested, home=home.root, check=True).stdout
    assert "Family" in child_status and parent in child_status and "leaf" in child_status


STOPPABLE = '''
import os, time
from fray import current_cluster, JobRequest, Entrypoint

cluster = current_cluster()
child = cluster.launch(JobRequest("sleeper", Entrypoint.from_callable(time.sleep, (600,))))
print("launched", child, flush=True)
time.sleep(600)
'''


def test_stopping_a_parent_stops_its_children(home, daemon, tmp_path):
    script = tmp_path / "stoppable.py"
    script.write_text(STOPPABLE)
    parent = submit(home, script)
    child = wait_until(lambda: children_of(home, parent), timeout=30, what="the child")[0]
    wait_until(lambda: meta_of(home, child)["attempts"] and meta_of(home, child)["attempts"][0]["state"] == "running",
               timeout=30, what="the child to run")
    FrayCluster(home.root).terminate(parent)  # what `fray control stop` does: control.json, audited
    assert wait_until(lambda: ended(home, parent), timeout=30, what="the parent to stop")["end"]["status"] \
        == "stopped_manual"
    child_meta = wait_until(lambda: ended(home, child), timeout=30, what="the child to stop")
    assert child_meta["end"]["status"] == "stopped_manual"
    reasons = [json.loads(line)["reason"] for line in home.run(child).events.read_text().splitlines()]
    assert any(f"parent run {parent}" in r for r in reasons), reasons
    assert not json.loads(home.run(child).control.read_text())["stop_requested"]  # decided by the daemon, not written


def test_a_group_starts_all_together_or_not_at_all(home, daemon):
    cluster = FrayCluster(home.root, namespace="groups")
    ok = JobRequest("member", Entrypoint.from_callable(os.getpid))
    impossible = JobRequest("giant", Entrypoint.from_callable(os.getpid), resources=ResourceConfig(cpus=100_000))
    def entries() -> set[Path]:
        """runs/ less the daemon's own probe of its file watch, which comes and goes while it starts."""
        return set(home.runs_dir.iterdir()) - {home.watch_probe}

    before = entries()
    # A member this machine can never run is refused at launch, as `fray submit` refuses it: none is written.
    with pytest.raises(ClusterError, match="(?s)job 'giant': .*it asks for 100000 CPUs"):
        cluster.launch_group(JobGroupConfig("doomed", [ok, impossible, ok]))
    assert entries() == before
    gang = cluster.launch_group(JobGroupConfig.replicas("gang", ok, 3))
    pids = [i.result for i in cluster.wait(gang, raise_on_failure=True, timeout=30)]
    assert len(set(pids)) == 3
    assert [meta_of(home, i)["group"]["index"] for i in gang] == [0, 1, 2]
    assert {i.job_id for i in cluster.list_jobs()} == set(gang)


def wait_for_file(path: str) -> str:
    import time

    while not os.path.exists(path):
        time.sleep(0.02)
    return "released"


def test_reservations_hold_their_min_and_cap_their_jobs_at_max(home, tmp_path):
    from fray.state import store

    store.ensure_home(home)
    home.config.write_text(json.dumps({"local": {"cpus": 4}}))
    proc = start_daemon(home, wait=False)
    try:
        cluster = FrayCluster(home.root, namespace="reserved")
        reservation = cluster.create_reservation(ReservationConfig("pool", min=ResourceConfig(cpus=2),
                                                                   max=ResourceConfig(cpus=2), ttl_sec=120))
        schema_validate("reservation", json.loads(home.reservation(reservation).read_text()))
        outsider = cluster.launch(JobRequest("outsider", Entrypoint.from_callable(os.getpid),
                                             resources=ResourceConfig(cpus=3)))
        wait_until(lambda: "2 of 4 free" in (meta_of(home, outsider)["wait_reason"] or ""), timeout=15,
                   what="the outsider to wait for the CPUs the reservation holds")
        release = tmp_path / "release"
        inside = [cluster.launch(JobRequest(f"in-{i}", Entrypoint.from_callable(wait_for_file, (str(release),)),
                                            reservation=reservation)) for i in range(3)]
        wait_until(lambda: sum(cluster.poll(i).status is JobStatus.RUNNING for i in inside) == 2, timeout=20,
                   what="two jobs of the reservation to run")
        waiting = next(i for i in inside if cluster.poll(i).status is JobStatus.PENDING)
        assert "at its max" in meta_of(home, waiting)["wait_reason"]
        assert cluster.get_reservation(reservation).used.cpus == 2
        release.touch()
        assert [i.result for i in cluster.wait(inside, raise_on_failure=True, timeout=30)] == ["released"] * 3
        assert cluster.poll(outsider).status is JobStatus.PENDING, meta_of(home, outsider)  # min is still held
        cluster.release_reservation(reservation)
        assert cluster.wait(outsider, raise_on_failure=True, timeout=30).status is JobStatus.SUCCEEDED
    finally:
        stop_daemon(proc)


def serve_counter() -> None:
    """An actor job: counts calls and says which attempt answered."""
    import threading

    from fray import ActorServer, current_cluster

    class Counter:
        def __init__(self) -> None:
            self.calls = 0

        def hello(self, ctx):
            self.calls += 1
            return int(os.environ["FRAY_ATTEMPT"]), os.getpid(), ctx.job_id, ctx.namespace

    server = ActorServer(current_cluster())
    server.register("counter", Counter(), {"kind": "test"})
    server.serve_background()
    threading.Event().wait()


def test_an_actor_job_that_dies_is_restarted_and_callers_follow_it(home, daemon):
    cluster = FrayCluster(home.root, namespace="actors")
    job = cluster.launch(JobRequest("counter", Entrypoint.from_callable(serve_counter), max_retries=2))
    pool = ClusterResolver(cluster).lookup("counter")
    pool.wait_for_size(1, timeout=30)
    attempt, pid, job_id, namespace = pool.call().hello()
    assert (attempt, job_id, namespace) == (1, job, "actors")
    listing = json.loads(run_fray("actors", "list", "--json", home=home.root, check=True).stdout)
    schema_validate("cli-actors", listing)
    assert [(e["name"], e["run_id"], e["run_status"]) for e in listing["endpoints"]] == \
        [("counter", job, "healthy_running")]
    assert "counter" in run_fray("actors", "list", home=home.root, check=True).stdout
    os.killpg(pid, signal.SIGKILL)  # the job dies; the daemon restarts it
    assert pool.call(timeout=60).hello()[0] == 2  # the same call, answered by the new attempt
    found = wait_until(lambda: (e := list(endpoints.scan(home))) and len(e) == 1 and e, timeout=15,
                       what="the daemon to remove attempt 1's endpoint")
    assert found[0].attempt == 2
    cluster.terminate(job)
    wait_until(lambda: not list(endpoints.scan(home)), timeout=30, what="the ended job's endpoint to go")


def pid_then_wait(marker: str) -> int:
    """Record the worker's pid; the first run then waits to be killed, a rerun returns at once."""
    import time

    with open(marker, "a") as handle:
        handle.write(f"{os.getpid()}\n")
    with open(marker) as handle:
        if len(handle.read().split()) == 1:
            time.sleep(120)  # longer than the test waits: only the kill ends it
    return os.getpid()


def test_a_task_on_a_worker_that_dies_runs_on_another(home, daemon, tmp_path):
    cluster = FrayCluster(home.root, namespace="workers")
    marker = tmp_path / "pids"
    with WorkerPool(cluster, num_workers=2, name="shards") as pool:
        assert pool.wait_for_workers(timeout=30) == 2
        assert sorted(pool.map(abs, [-1, -2, -3])) == [1, 2, 3]
        future = pool.submit(pid_then_wait, str(marker))
        first = int(wait_until(lambda: marker.exists() and marker.read_text().split(), timeout=20,
                               what="the task to start")[0])
        os.killpg(first, signal.SIGKILL)
        survivor = future.result(timeout=30)
        assert survivor != first
        assert marker.read_text().split() == [str(first), str(survivor)]
    wait_until(lambda: all(ended(home, j) for j in pool.job_ids), timeout=30, what="the worker jobs to end")


def test_the_retry_budgets_old_names_still_work_and_warn_naming_max_retries(home, daemon):
    """`JobRequest(max_retries_failure=)` and `WorkerPool(max_restarts=)` are the old names of `max_retries`."""
    import warnings

    cluster = FrayCluster(home.root, namespace="budget")
    with pytest.warns(DeprecationWarning, match=r"JobRequest\(max_retries_failure=\) is deprecated: use max_retries="):
        request = JobRequest("old", Entrypoint.from_callable(abs, (-1,)), max_retries_failure=4)
    assert request.max_retries == 4
    with pytest.warns(DeprecationWarning, match="read max_retries"):
        assert request.max_retries_failure == 4
    with pytest.raises(UsageError, match="give max_retries only"):
        JobRequest("both", Entrypoint.from_callable(abs, (-1,)), max_retries=1, max_retries_failure=2)
    job = cluster.launch(request)
    assert meta_of(home, job)["spec"]["max_retries"] == 4  # what `fray status` shows as its budget
    assert cluster.wait(job, raise_on_failure=True, timeout=60).result == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new name warns of nothing, nor do copies of a request
        fresh = JobRequest("new", Entrypoint.from_callable(abs, (-1,)), max_retries=4)
        assert [j.max_retries for j in JobGroupConfig.replicas("copies", fresh, 2).jobs] == [4, 4]
        assert [j.max_retries for j in JobGroupConfig.replicas("copies", request, 2).jobs] == [4, 4]
    with pytest.warns(DeprecationWarning, match=r"WorkerPool\(max_restarts=\) is deprecated: use max_retries="):
        pool = WorkerPool(cluster, num_workers=1, name="old", max_restarts=5)
    with pool:
        assert [meta_of(home, j)["spec"]["max_retries"] for j in pool.job_ids] == [5]
        assert pool.submit(abs, -7).result(timeout=60) == 7
    wait_until(lambda: all(ended(home, j) for j in pool.job_ids), timeout=30, what="the worker jobs to end")

def make_wheel(folder: Path) -> Path:
    """A tiny pure-Python wheel, so installing it needs no network and no build backend."""
    wheel = folder / "fraytiny-0.1-py3-none-any.whl"
    files = {"fraytiny/__init__.py": "VALUE = 42\n",
             "fraytiny-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: fraytiny\nVersion: 0.1\n",
             "fraytiny-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{name},,\n" for name in files) + "fraytiny-0.1.dist-info/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr("fraytiny-0.1.dist-info/RECORD", record)
    return wheel


def uses_package() -> tuple[int, str, str]:
    import sys

    import fraytiny

    return fraytiny.VALUE, sys.prefix, os.environ["GREETING"]


def test_an_environment_is_built_once_per_requirements_hash_and_reused(home, daemon, tmp_path):
    wheel = make_wheel(tmp_path)
    env = EnvironmentConfig(env_vars={"GREETING": "hi"}, pip_packages=[str(wheel)])
    cluster = FrayCluster(home.root, namespace="envs")
    first = cluster.wait(cluster.launch(JobRequest("env-1", Entrypoint.from_callable(uses_package),
                                                   environment=env)), raise_on_failure=True, timeout=120)
    value, prefix, greeting = first.result
    assert (value, greeting) == (42, "hi") and prefix == str(home.venv(env.key()))
    ready = json.loads(home.venv_ready(env.key()).read_text())
    schema_validate("venv", ready)
    second = cluster.wait(cluster.launch(JobRequest("env-2", Entrypoint.from_callable(uses_package),
                                                    environment=env)), raise_on_failure=True, timeout=60)
    assert second.result == first.result
    assert json.loads(home.venv_ready(env.key()).read_text()) == ready  # reused, not rebuilt
    logs = [home.run(i.job_id).attempt(1).stderr.read_text() for i in (first, second)]
    assert "building the environment" in logs[0] and "building the environment" not in logs[1]
    script = tmp_path / "script_job.py"
    script.write_text(textwrap.dedent('''
        import fraytiny, sys
        print("script sees", fraytiny.VALUE, sys.argv[1])
    '''))
    third = cluster.launch(JobRequest("env-3", Entrypoint.from_script(script, ["arg"]), environment=env))
    cluster.wait(third, raise_on_failure=True, timeout=60)
    assert "script sees 42 arg" in home.run(third).attempt(1).stdout.read_text()


WHEEL_DRIVER = """
import json, sys
from fray import EnvironmentConfig, Entrypoint, FrayCluster, JobRequest

def where():
    import fray, fraytiny, sys
    return fray.__file__, sys.prefix, fraytiny.VALUE

cluster = FrayCluster(sys.argv[1], namespace="wheel")
env = EnvironmentConfig(pip_packages=[sys.argv[2]])
info = cluster.wait(cluster.launch(JobRequest("from-wheel", Entrypoint.from_callable(where), environment=env)),
                    raise_on_failure=True, timeout=120)
print("RESULT=" + json.dumps(info.result))
"""


def test_a_job_environment_sees_fray_installed_from_a_wheel(home, tmp_path, fray_wheel):
    """fray installed from its wheel (not editable): a job's cached environment imports that same fray."""
    import sysconfig

    venv = tmp_path / "wheel-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    zipfile.ZipFile(fray_wheel).extractall(purelib)
    # fray's dependencies from this environment, as plain paths: its editable fray (an import hook run by a
    # .pth file) stays out, so the fray found is the wheel's.
    Path(purelib, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    proc = subprocess.run([str(python), "-c", WHEEL_DRIVER, str(home.root), str(make_wheel(tmp_path))],
                          capture_output=True, text=True, timeout=180, cwd=tmp_path,
                          env={**os.environ, "FRAY_HOME": str(home.root)})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    fray_file, prefix, value = json.loads(proc.stdout.split("RESULT=", 1)[1])
    assert fray_file.startswith(purelib) and value == 42
    assert prefix.startswith(str(home.root))  # the job ran in the cached environment, not the wheel venv
