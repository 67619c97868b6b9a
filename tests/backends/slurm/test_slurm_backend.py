"""The Slurm backend end to end: the real daemon, real sbatch/squeue/scancel, the real 4-node cluster.

The cluster is tests/slurm (fixture `slurm_cluster`): partitions cpu (n1-n4),
a100 (n1-n2, 2 x A100 each) and h100 (n3-n4, 4 x H100 each), SlurmdTimeout=5,
no accounting (so the backend falls back from sacct to scontrol).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_fray, schema_validate, wait_until
from fray.state import runs, store
from fray.backends import external
from fray.backends.slurm.backend import SlurmBackend
from fray.daemon.loop import Daemon
from fray.state.layout import Home
from tests.slurm.fixture import SlurmCluster
from fray.wrapper import contract

pytestmark = pytest.mark.slow

FAST = {"poll_interval_sec": 0.5, "min_snapshot_interval_sec": 0.3, "command_timeout_sec": 20, "sinfo_ttl_sec": 2}
HEADER = "#!/bin/bash\n#FRAY --backend slurm --heartbeat-interval 0.5 --stop-grace 2 --backoff-base 0\n"
SERVE = HEADER + """#SBATCH --time=5
trap 'echo got SIGTERM; exit 0' TERM
echo "up on $SLURMD_NODENAME"
while true; do sleep 0.1; done
"""


FAKES = Path(__file__).resolve().parents[2] / "fakes"


@pytest.fixture(autouse=True)
def slurm_home(slurm_cluster: SlurmCluster, home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A FRAY_HOME set up for the fast test cluster; its Slurm jobs are cancelled afterwards.

    The test cluster's GPUs are GRES entries over /dev/null, so the jobs' GPU
    probes ask the fake nvidia-smi (tests/fakes) for four H100s; the daemon's
    environment, and with it every job's (sbatch --export=ALL), carries it.
    """
    scenario = tmp_path / "gpus.json"
    scenario.write_text(json.dumps({"gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-fake-{i}"}
                                             for i in range(4)]}))
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_SCENARIO", str(scenario))
    store.ensure_home(home)
    home.config.write_text(json.dumps({"slurm": FAST}))
    yield home
    ours = {line.split("|")[0] for line in slurm_cluster.run("squeue", "-h", "-o", "%i|%j").stdout.splitlines()
            if any(f"fray-{run_id}-" in line for run_id in home.run_ids())}
    if ours:
        slurm_cluster.run("scancel", *sorted(ours), check=False)


def submit(home: Home, script: Path, *args: str, **overrides) -> str:
    options = runs.SubmitOptions(script=script, overrides=overrides, args=args, workdir=str(script.parent))
    return runs.create_run(home, options).run_id


def write(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def meta_of(home: Home, run_id: str) -> dict:
    return json.loads(home.run(run_id).meta.read_text())


def ended(home: Home, run_id: str) -> dict | None:
    meta = meta_of(home, run_id)
    return meta if meta["phase"] == "ended" else None


def attempt(home: Home, run_id: str, number: int, state: str = "running") -> dict | None:
    attempts = meta_of(home, run_id)["attempts"]
    found = attempts[number - 1] if len(attempts) >= number else None
    return found if found is not None and found["state"] == state else None


def events(home: Home, run_id: str) -> list[dict]:
    return [json.loads(line) for line in home.run(run_id).events.read_text().splitlines()]


def job_state(cluster: SlurmCluster, job_id: str) -> str:
    return cluster.job(job_id).get("JobState", "")


def test_a_run_succeeds_on_slurm_and_its_records_match_the_schemas(home, daemon, tmp_path):
    run_id = submit(home, write(tmp_path, "ok.sh", HEADER + 'echo "hello from $SLURMD_NODENAME"\n'))
    meta = wait_until(lambda: ended(home, run_id), timeout=30, what="the run to end")
    assert meta["end"]["status"] == "completed_success"
    first = meta["attempts"][0]
    assert first["backend"] == "slurm" and first["cause"] == "success"
    assert first["backend_ref"]["job_name"] == f"fray-{run_id}-1"
    assert first["node"] in ("n1", "n2", "n3", "n4")
    files = home.run(run_id).attempt(1)
    assert files.stdout.read_text() == f"hello from {first['node']}\n"
    # Slurm's own output lands in the attempt folder; the wrapper logs its exit just after writing exit.json
    wait_until(lambda: "exit 0" in files.slurm_log.read_text(), what="the wrapper's last line in Slurm's output")
    schema_validate("meta", meta)
    for event in events(home, run_id):
        schema_validate("event", event)
    schema_validate("cli-status", json.loads(run_fray("status", run_id, "--json", home=home.root, check=True).stdout))


NASTY = HEADER.replace("--stop-grace 2", "--stop-grace 2 --env 'WEIRD=a b $c \"d\" \\e'") + r"""#SBATCH --time=5
cat <<'EOF'
single 'quoted' "double" $HOME \n \\ `backticks` $(not run) %j %%
EOF
cat <<EOF
expanded: ${FRAY_ATTEMPT} \$literal
EOF
printf '%s\n' "tab	and \$dollar and \\backslash" 'it'"'"'s'
echo "weird=[$WEIRD]"
for a in "$@"; do echo "arg=[$a]"; done
"""
NASTY_ARGS = ("two words", "$HOME", "it's", "back\\slash", "--", "%j")


def test_a_hostile_script_and_its_arguments_survive_byte_for_byte(home, daemon, tmp_path):
    script = write(tmp_path, "nasty.sh", NASTY)
    run_id = submit(home, script, *NASTY_ARGS)
    meta = wait_until(lambda: ended(home, run_id), timeout=30, what="the run to end")
    assert meta["end"]["status"] == "completed_success", meta["attempts"]
    frozen = home.run(run_id).script(meta["script"]["frozen"])
    assert frozen.read_bytes() == script.read_bytes()
    # What bash prints running the same bytes here is what it must have printed there.
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/"), "FRAY_ATTEMPT": "1",
           "WEIRD": 'a b $c "d" \\e'}
    expected = subprocess.run(["bash", str(script), *NASTY_ARGS], capture_output=True, text=True, env=env).stdout
    assert home.run(run_id).attempt(1).stdout.read_text() == expected
    assert "arg=[two words]" in expected and "weird=[a b $c \"d\" \\e]" in expected


def test_a_failing_run_is_retried_until_it_succeeds(home, daemon, tmp_path):
    body = HEADER + 'if [ "$FRAY_ATTEMPT" = 1 ]; then echo "first try breaks" >&2; exit 3; fi\necho fixed\n'
    run_id = submit(home, write(tmp_path, "flaky.sh", body))
    meta = wait_until(lambda: ended(home, run_id), timeout=40, what="the run to end")
    assert meta["end"]["status"] == "completed_success"
    assert [a["cause"] for a in meta["attempts"]] == ["workload_failure", "success"]
    assert "first try breaks" in meta["attempts"][0]["detail"]
    assert meta["attempts"][0]["backend_ref"]["job_id"] != meta["attempts"][1]["backend_ref"]["job_id"]


def test_exit_42_on_a_node_blacklists_it_and_the_next_attempt_is_excluded_from_it(home, daemon, tmp_path,
                                                                                 slurm_cluster):
    body = HEADER + ('if [ "$FRAY_ATTEMPT" = 1 ]; then echo "ECC errors on $SLURMD_NODENAME" >&2; exit 42; fi\n'
                     'echo "fine on $SLURMD_NODENAME"\n')
    run_id = submit(home, write(tmp_path, "ecc.sh", body))
    meta = wait_until(lambda: ended(home, run_id), timeout=60, what="the run to end on another node")
    assert meta["end"]["status"] == "completed_success"
    first, second = meta["attempts"]
    assert first["cause"] == "node_fault" and "ECC errors" in first["detail"]
    assert meta["counters"] == {**meta["counters"], "node_failures": 1, "workload_failures": 0}
    banned = json.loads(home.blacklist.read_text())["nodes"]
    assert banned[first["node"]]["source_run"] == run_id
    submitted = [e for e in events(home, run_id) if e["kind"] == "submitted"]
    assert submitted[1]["data"]["exclude"] == [first["node"]]
    shown = slurm_cluster.run("scontrol", "show", "job", second["backend_ref"]["job_id"]).stdout
    assert f"ExcNodeList={first['node']}" in shown  # Slurm itself was told to keep off the node
    assert second["node"] != first["node"]
    assert home.run(run_id).attempt(2).stdout.read_text().strip() == f"fine on {second['node']}"


def test_gpu_runs_land_on_the_partition_their_memory_needs(home, daemon, tmp_path, slurm_cluster):
    body = HEADER + 'echo "$SLURM_JOB_PARTITION $SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES"\n'
    big = submit(home, write(tmp_path, "big.sh", body), gpus=2, min_vram_gb=60.0)
    small = submit(home, write(tmp_path, "small.sh", body), gpus=1)  # --prefer min: the smallest GPUs that fit
    for run_id, partition, nodes in ((big, "h100", ("n3", "n4")), (small, "a100", ("n1", "n2"))):
        meta = wait_until(lambda: ended(home, run_id), timeout=30, what=f"the {partition} run")
        assert meta["end"]["status"] == "completed_success"
        assert meta["attempts"][0]["partition"] == partition
        where, node, gpus = home.run(run_id).attempt(1).stdout.read_text().split()
        assert where == partition and node in nodes
        assert len(gpus.removeprefix("gpus=").split(",")) == meta["spec"]["gpus"]
        probe = json.loads(home.run(run_id).attempt(1).probe.read_text())  # the node was probed before the workload
        assert probe["ok"] and {p["name"]: p["status"] for p in probe["probes"]}["gpu"] == "passed"


def test_partition_fallback_moves_on_and_resubmits_at_once(home, daemon, tmp_path):
    body = HEADER + 'echo "on $SLURM_JOB_PARTITION"\n'
    run_id = submit(home, write(tmp_path, "fallback.sh", body), partitions=["nosuch", "cpu"],
                    partition_fallback={"after_failures": 1, "retry_preferred_sec": 3600.0}, backoff_base_sec=60.0)
    meta = wait_until(lambda: ended(home, run_id), timeout=30, what="the run to end on the fallback partition")
    assert meta["end"]["status"] == "completed_success"
    assert [(a["partition"], a["cause"]) for a in meta["attempts"]] == [("nosuch", "submit_failed"), ("cpu", "success")]
    assert "invalid partition" in meta["attempts"][0]["detail"].lower()
    switch = next(e for e in events(home, run_id) if e["kind"] == "partition")
    assert "falling back to cpu" in switch["reason"]
    # A 60 s backoff was due after the failure; the switch did not wait for it.
    assert meta["attempts"][1]["submitted_at"] - meta["attempts"][0]["ended_at"] < 10


def test_fray_control_stop_cancels_the_job_and_the_workload_gets_its_sigterm(home, daemon, tmp_path, slurm_cluster):
    run_id = submit(home, write(tmp_path, "serve.sh", SERVE))
    running = wait_until(lambda: attempt(home, run_id, 1), timeout=30, what="the attempt to run")
    run_fray("control", "stop", run_id, home=home.root, check=True)
    meta = wait_until(lambda: ended(home, run_id), timeout=30, what="the stop")
    assert meta["end"]["status"] == "stopped_manual"
    assert "got SIGTERM" in home.run(run_id).attempt(1).stdout.read_text()
    job_id = running["backend_ref"]["job_id"]
    wait_until(lambda: job_state(slurm_cluster, job_id) in ("FAILED", "CANCELLED", "COMPLETED", ""),
               timeout=15, what="the Slurm job to end")
    assert len(meta["attempts"]) == 1


def test_scancel_by_hand_is_a_preemption_and_the_run_comes_back(home, daemon, tmp_path, slurm_cluster):
    run_id = submit(home, write(tmp_path, "serve.sh", SERVE))
    first = wait_until(lambda: attempt(home, run_id, 1), timeout=30, what="attempt 1")
    slurm_cluster.run("scancel", first["backend_ref"]["job_id"])
    wait_until(lambda: attempt(home, run_id, 2), timeout=30, what="attempt 2 to run")
    meta = meta_of(home, run_id)
    assert meta["attempts"][0]["cause"] == "preempted"
    assert meta["counters"] == {"workload_failures": 0, "node_failures": 1, "consecutive_fast_failures": 1, "since": None}


def test_a_restarted_daemon_adopts_the_running_slurm_job(home, tmp_path, slurm_cluster):
    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-m", "fray.daemon", "--home", str(home.root)],
                                start_new_session=True)

    first = start()
    run_id = submit(home, write(tmp_path, "serve.sh", SERVE))
    running = wait_until(lambda: attempt(home, run_id, 1), timeout=30, what="the attempt to run")
    first.send_signal(signal.SIGKILL)  # crash-only: no chance to clean up
    first.wait()
    second = start()
    try:
        wait_until(lambda: any(e["kind"] == "adopted" for e in events(home, run_id)), timeout=20,
                   what="the adoption event")
        meta = meta_of(home, run_id)
        assert len(meta["attempts"]) == 1 and meta["attempts"][0]["state"] == "running"
        assert job_state(slurm_cluster, running["backend_ref"]["job_id"]) == "RUNNING"
        runs.request(home, run_id, "stop")
        assert wait_until(lambda: ended(home, run_id), timeout=30, what="the stop")["end"]["status"] == "stopped_manual"
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=10)


def test_a_dead_node_ends_the_attempt_and_the_run_resumes_elsewhere_excluding_it(home, daemon, tmp_path,
                                                                                  slurm_cluster):
    body = SERVE.replace("--backoff-base 0", "--backoff-base 0 --heartbeat-timeout 30")
    run_id = submit(home, write(tmp_path, "serve.sh", body), gpus=4)  # a whole h100 node
    first = wait_until(lambda: attempt(home, run_id, 1), timeout=30, what="attempt 1")
    node = first["node"]
    assert node in ("n3", "n4")
    slurm_cluster.kill_slurmd(node)
    try:
        second = wait_until(lambda: attempt(home, run_id, 2), timeout=60, what="attempt 2 on another node")
    finally:
        slurm_cluster.restart_slurmd(node)
    meta = meta_of(home, run_id)
    assert meta["attempts"][0]["cause"] in ("node_fault", "lost", "heartbeat_stall"), meta["attempts"][0]
    assert second["node"] != node and second["partition"] == "h100"
    assert second["backend_ref"]["exclude"] == [node]  # the blacklist's exclude reached sbatch
    assert node in json.loads(home.blacklist.read_text())["nodes"]
    slurm_cluster.wait_node(lambda s: s.usable, node, timeout=30)


def test_a_cut_off_attempt_is_fenced_its_workload_gone_and_its_files_untouched(home, daemon, tmp_path,
                                                                                 slurm_cluster):
    """Kill the slurmd of the node an attempt runs on: Slurm loses the job, but its processes keep running.
    Once the daemon has moved on, the old workload must be gone within a heartbeat interval and never write again."""
    body = HEADER.replace("--backoff-base 0", "--backoff-base 0 --heartbeat-timeout 30") + (
        "#SBATCH --time=5\n"
        'while true; do date +%s.%N >> "$FRAY_CHECKPOINT_DIR/written-by-$FRAY_ATTEMPT"; sleep 0.1; done\n')
    run_id = submit(home, write(tmp_path, "writer.sh", body), gpus=4)  # a whole h100 node
    first = wait_until(lambda: attempt(home, run_id, 1), timeout=30, what="attempt 1")
    paths = home.run(run_id)
    started = wait_until(lambda: paths.attempt(1).started.exists() and json.loads(paths.attempt(1).started.read_text()),
                         what="attempt 1's workload")
    node = first["node"]
    slurm_cluster.kill_slurmd(node)
    try:
        second = wait_until(lambda: attempt(home, run_id, 2), timeout=60, what="attempt 2 on another node")

        def gone() -> float | None:
            return None if os.path.exists(f"/proc/{started['workload_pid']}") else time.time()

        gone_at = wait_until(gone, timeout=10, interval=0.02, what="the old workload to be killed")
    finally:
        slurm_cluster.restart_slurmd(node)
    assert second["node"] != node
    assert gone_at <= second["started_at"] + 0.5 + 1.0  # a heartbeat interval (0.5 s) and a margin
    # Slurm's own output of the batch job is Slurm's to write: the restarted slurmd cancels the lost job and its
    # slurmstepd says so there ("*** JOB n ON node CANCELLED ... DUE TO NODE FAILURE ***"), whenever it gets to it.
    fray_files = lambda: {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in paths.attempt(1).dir.rglob("*")
                          if p.is_file() and p != paths.attempt(1).slurm_log}
    attempt_files = fray_files()
    written = paths.checkpoints_dir / "written-by-1"
    before = written.read_bytes()
    time.sleep(2)  # four heartbeat intervals
    assert written.read_bytes() == before
    assert fray_files() == attempt_files
    assert not paths.attempt(1).exit.exists()  # the fenced wrapper wrote nothing, not even its end
    assert (paths.checkpoints_dir / "written-by-2").exists()  # the new attempt writes on
    runs.request(home, run_id, "stop")
    wait_until(lambda: ended(home, run_id), timeout=30, what="the stop")
    slurm_cluster.wait_node(lambda s: s.usable, node, timeout=30)


def test_a_multi_node_run_starts_one_wrapper_per_node(home, daemon, tmp_path):
    body = HEADER + '#SBATCH --nodes=2\necho "$FRAY_TASK_INDEX/$FRAY_NUM_TASKS $SLURMD_NODENAME $FRAY_COORDINATOR_ADDRESS"\n'
    run_id = submit(home, write(tmp_path, "multi.sh", body))
    meta = wait_until(lambda: ended(home, run_id), timeout=30, what="the run to end")
    assert meta["end"]["status"] == "completed_success"
    first = home.run(run_id).attempt(1)
    # Task 0 speaks for the attempt, so the run may end before task 1 has written its records.
    wait_until((first.dir / "tasks" / "1" / contract.EXIT).exists, what="task 1 to finish")
    lines = [first.stdout.read_text(), (first.dir / "tasks" / "1" / "stdout.log").read_text()]
    (index0, node0, coord0), (index1, node1, coord1) = (line.split() for line in lines)
    assert (index0, index1) == ("0/2", "1/2") and node0 != node1
    assert coord0 == coord1 and coord0.startswith(node0 + ":")
    assert (first.dir / "tasks" / "1" / "heartbeat").exists()  # every node beats on its own

    # `fray logs` shows both tasks, each line marked; --task picks one.
    shown = run_fray("logs", run_id, check=True).stdout.splitlines()
    assert shown == [f"[task 0] {lines[0].strip()}", f"[task 1] {lines[1].strip()}"]
    data = json.loads(run_fray("logs", run_id, "--json", check=True).stdout)
    schema_validate("cli-logs", data)
    assert [t["task"] for t in data["tasks"]] == [0, 1]
    assert run_fray("logs", run_id, "--task", "1", check=True).stdout.strip() == lines[1].strip()
    followed = [json.loads(line) for line in run_fray("logs", run_id, "-f", "--json", check=True).stdout.splitlines()]
    assert sorted((item["task"], item["line"]) for item in followed) == [(0, lines[0].strip()), (1, lines[1].strip())]


def test_scontrol_requeue_is_refused_for_fray_jobs_so_the_attempt_runs_on(home, daemon, tmp_path, slurm_cluster):
    run_id = submit(home, write(tmp_path, "serve.sh", SERVE))
    first = wait_until(lambda: attempt(home, run_id, 1), timeout=30, what="attempt 1")
    job_id = first["backend_ref"]["job_id"]
    refused = slurm_cluster.run("scontrol", "requeue", job_id, check=False)
    # --no-requeue: restarts are the shepherd's, never Slurm's.
    assert refused.returncode != 0 and "disabled" in refused.stderr
    assert slurm_cluster.job(job_id)["Restarts"] == "0" and job_state(slurm_cluster, job_id) == "RUNNING"
    assert attempt(home, run_id, 1) is not None and len(meta_of(home, run_id)["attempts"]) == 1


def test_the_time_limit_warning_reaches_the_workload_as_sigusr1(home, daemon, tmp_path, slurm_cluster):
    body = SERVE.replace("trap 'echo got SIGTERM; exit 0' TERM", "trap 'echo got SIGTERM; exit 0' TERM\n"
                         "trap 'echo checkpoint now' USR1")
    run_id = submit(home, write(tmp_path, "serve.sh", body))
    job_id = wait_until(lambda: attempt(home, run_id, 1), timeout=30, what="attempt 1")["backend_ref"]["job_id"]
    sbatch = home.run(run_id).attempt(1).slurm_script.read_text()
    assert "exec " in sbatch  # the wrapper is the batch shell, so --signal=B:USR1@... reaches it
    stdout = home.run(run_id).attempt(1).stdout
    # The wrapper forwards USR1 only to a workload that catches it: wait until the trap is set.
    wait_until(lambda: "up on" in stdout.read_text(), timeout=30, what="the workload's traps")
    # What Slurm does --signal=B:USR1@120 before the limit (a real one is minutes away):
    slurm_cluster.run("scancel", "--signal=USR1", "--batch", job_id)
    wait_until(lambda: "checkpoint now" in stdout.read_text(), timeout=10, what="the workload's USR1 trap")
    assert attempt(home, run_id, 1) is not None  # a warning, not a stop


def lease(home: Home) -> dict:
    return json.loads(home.daemon_lease.read_text())


def stop_controller(cluster: SlurmCluster) -> None:
    pid = int((cluster.root / "run" / "slurmctld.pid").read_text())
    os.kill(pid, signal.SIGTERM)  # it saves its state; the jobs keep running on their nodes
    wait_until(lambda: not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2],
               timeout=20, what="slurmctld to exit")


def start_controller(cluster: SlurmCluster) -> None:
    """Start slurmctld again on its saved state (cluster.sh start would begin afresh)."""
    slurmctld = shutil.which("slurmctld", path=os.environ["PATH"] + ":/usr/sbin:/sbin")
    assert slurmctld is not None
    subprocess.run(["env", f"FRAY_SLURM_DIR={cluster.root}", f"SLURM_CONF={cluster.conf}", slurmctld, "-f",
                    str(cluster.conf)], check=True, capture_output=True, timeout=30)
    for node in cluster.nodes:
        cluster.wait_node(lambda s: s.usable or s.base == "ALLOCATED" or s.base == "MIXED", node, timeout=30)


OUTAGE_SEC = 10  # many of the daemon's 0.5 s cycles, each with squeue failing: no longer wait proves more


def test_the_daemon_rides_out_a_stopped_slurmctld_and_no_run_is_lost(home, daemon, tmp_path, slurm_cluster):
    script = write(tmp_path, "serve.sh", SERVE)
    run_ids = [submit(home, script) for _ in range(2)]
    jobs = [wait_until(lambda: attempt(home, r, 1), timeout=30, what="attempt 1")["backend_ref"]["job_id"]
            for r in run_ids]
    stop_controller(slurm_cluster)
    try:
        down_at = time.time()
        wait_until(lambda: lease(home)["last_cycle_at"] > down_at + OUTAGE_SEC, timeout=OUTAGE_SEC + 20,
                   interval=0.5, what=f"the daemon to keep cycling for {OUTAGE_SEC}s without Slurm")
        assert "Unable to contact slurm controller" in (lease(home)["last_error"] or "")
        for run_id in run_ids:
            assert attempt(home, run_id, 1) is not None and len(meta_of(home, run_id)["attempts"]) == 1
    finally:
        start_controller(slurm_cluster)
    assert [job_state(slurm_cluster, job) for job in jobs] == ["RUNNING", "RUNNING"]
    for run_id in run_ids:
        runs.request(home, run_id, "stop")
    for run_id in run_ids:
        meta = wait_until(lambda: ended(home, run_id), timeout=30, what="the stop after the outage")
        assert meta["end"]["status"] == "stopped_manual" and len(meta["attempts"]) == 1


def test_fray_partitions_shows_the_gpus_and_the_order_a_run_would_try(home):
    listing = json.loads(run_fray("partitions", "--json", home=home.root, check=True).stdout)
    schema_validate("cli-partitions", listing)
    gpus = {p["name"]: p["gpus"] for p in listing["partitions"]}
    assert gpus["a100"] == [{"type": "a100", "per_node": 2, "nodes": 2, "vram_gb": 40.0}]
    assert gpus["h100"] == [{"type": "h100", "per_node": 4, "nodes": 2, "vram_gb": 80.0}]
    assert listing["order"] is None
    ordered = json.loads(run_fray("partitions", "--json", "--gpus", "2", "--min-vram", "60G", home=home.root,
                                  check=True).stdout)
    schema_validate("cli-partitions", ordered)
    assert ordered["order"]["chain"] == ["h100", "cpu"]  # every h100 node has them, half of cpu's
    text = run_fray("partitions", "--gpus", "4", "--prefer", "max", home=home.root, check=True).stdout
    assert "h100 x4 80 GB (2 nodes)" in text and "tries: h100 -> cpu" in text


class CountingRunner:
    """The real commands, counted by name."""

    def __init__(self, lie_about: str | None = None) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.lie_about = lie_about

    def __call__(self, argv, timeout) -> external.CommandResult:
        result = external.run(argv, timeout)
        self.calls.append(tuple(argv))
        if argv[0] == self.lie_about:
            self.lie_about = None
            # The command did its work, but its answer was lost (as when sbatch times out).
            return external.CommandResult(tuple(argv), None, "", "", True, timeout)
        return result

    def count(self, name: str) -> int:
        return sum(1 for argv in self.calls if argv[0] == name)


def in_process_daemon(home: Home, runner: CountingRunner, **settings) -> Daemon:
    backend = SlurmBackend(home, config={**FAST, **settings}, runner=runner)
    return Daemon(home, backends={"slurm": backend})


def test_one_squeue_per_cycle_for_many_runs_and_one_scancel_for_all(home, tmp_path):
    runner = CountingRunner()
    daemon = in_process_daemon(home, runner, min_snapshot_interval_sec=0.0)
    script = write(tmp_path, "serve.sh", SERVE)
    run_ids = [submit(home, script) for _ in range(6)]
    daemon.cycle()  # submits all six
    assert runner.count("sbatch") == 6
    wait_until(lambda: (daemon.cycle(), all(attempt(home, r, 1) for r in run_ids))[1], timeout=30, interval=0.2,
               what="all six to run")
    assert runner.count("squeue") == daemon.cycles - 1  # the first cycle had nothing in flight to look at
    for run_id in run_ids:
        runs.request(home, run_id, "stop")
    before = runner.count("scancel")
    daemon.cycle()
    assert runner.count("scancel") == before + 1
    scancel = next(argv for argv in reversed(runner.calls) if argv[0] == "scancel")
    assert len([a for a in scancel if a.isdigit()]) == 6
    wait_until(lambda: (daemon.cycle(), all(ended(home, r) for r in run_ids))[1], timeout=30, interval=0.2,
               what="all six to stop")


def test_squeue_is_not_run_more_often_than_the_minimum_interval(home, tmp_path):
    runner = CountingRunner()
    daemon = in_process_daemon(home, runner, min_snapshot_interval_sec=3600.0)
    run_id = submit(home, write(tmp_path, "serve.sh", SERVE))
    daemon.cycle()
    for _ in range(5):
        daemon.cycle()
    assert runner.count("squeue") == 1
    assert meta_of(home, run_id)["attempts"][0]["state"] in ("submitted", "running")  # served from the cached listing


def test_an_sbatch_whose_answer_is_lost_is_found_by_name_never_submitted_twice(home, tmp_path, slurm_cluster):
    runner = CountingRunner(lie_about="sbatch")
    daemon = in_process_daemon(home, runner, min_snapshot_interval_sec=0.0)
    run_id = submit(home, write(tmp_path, "serve.sh", SERVE))
    daemon.cycle()
    first = meta_of(home, run_id)["attempts"][0]
    assert first["state"] == "submitting" and first["backend_ref"] is None
    assert any(e["kind"] == "error" and "ambiguous" in e["reason"] for e in events(home, run_id))
    adopted = wait_until(lambda: (daemon.cycle(), attempt(home, run_id, 1, "submitted") or attempt(home, run_id, 1))[1],
                         timeout=20, interval=0.2, what="the lost job to be adopted")
    assert adopted["backend_ref"]["job_name"] == f"fray-{run_id}-1"
    assert runner.count("sbatch") == 1
    names = slurm_cluster.run("squeue", "-h", "-o", "%j").stdout.split()
    assert names.count(f"fray-{run_id}-1") == 1
    assert len(meta_of(home, run_id)["attempts"]) == 1
