"""A storm of 50 simultaneous preemptions through the real daemon against the gcloud simulator.

Fifty runs, each on its own slice with a real wrapper on it, are preempted in
one stroke (the simulator marks the slices PREEMPTED and powers their hosts
off). Every run must come back on a new slice and finish from its
checkpoint; the daemon's gcloud calls must stay within its pool; and nothing
may be left behind: no slice, no queued resource, no process on a "host".
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import start_daemon, stop_daemon, wait_until
from fray.backends.tpu.command_lines import slice_name
from fray.state import runs

FAKES = Path(__file__).parents[2] / "fakes" / "gcloud"
ZONE = "us-west4-a"
RUNS = 50
WORKERS = 6  # the daemon's gcloud pool: the most calls it may have in flight

RESUMING = """\
ckpt="$FRAY_CHECKPOINT_DIR/step"
if [ -f "$ckpt" ]; then echo "resumed from step $(cat "$ckpt")"; exit 0; fi
mkdir -p "$FRAY_CHECKPOINT_DIR"; echo 3 > "$ckpt"
exec sleep 300
"""


def host_processes(state: Path) -> list[int]:
    """Processes the simulator started on a host of this test's slices (tagged in their environment)."""
    tag = f"FRAY_SIM_VM={state}/".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and any(v.startswith(tag) for v in (entry / "environ").read_bytes().split(b"\0")):
                if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_fifty_preemptions_at_once_every_run_resumes_the_pool_stays_bounded_nothing_leaks(
        home, tmp_path, monkeypatch):
    state = tmp_path / "gcloud-state"
    state.mkdir()
    (state / "config.json").write_text(json.dumps({"ready_after_sec": 0.3, "count_calls": True}))
    monkeypatch.setenv("FRAY_GCLOUD_SIM", str(state))
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    home.root.mkdir(parents=True, exist_ok=True)
    home.config.write_text(json.dumps({"tpu": {"poll_interval_sec": 0.5, "zones": [ZONE], "workers": WORKERS}}))
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\n" + RESUMING)
    run_ids = [runs.create_run(home, runs.SubmitOptions(script=script, workdir=str(tmp_path), overrides={
        "backend": "tpu", "tpu": "v4-8", "zones": [ZONE], "runtime_version": "v", "spot": True,
        "heartbeat_interval_sec": 5.0, "heartbeat_timeout_sec": 120.0, "backoff_base_sec": 0.0,
        "max_retries_preemption": 3, "skip_probes": ["tpu"]})).run_id for _ in range(RUNS)]
    daemon = start_daemon(home)
    try:
        checkpoints = [home.run(r).checkpoints_dir / "step" for r in run_ids]
        wait_until(lambda: all(c.exists() for c in checkpoints), timeout=240, interval=0.5,
                   what=f"all {RUNS} workloads running and checkpointed")
        subprocess.run(["gcloud", "sim", "preempt", *(slice_name(r, 1) for r in run_ids), "--zone", ZONE],
                       check=True, capture_output=True, timeout=60)

        def metas() -> list[dict]:
            return [json.loads(home.run(r).meta.read_text()) for r in run_ids]

        wait_until(lambda: all(m["phase"] == "ended" for m in metas()), timeout=300, interval=0.5,
                   what=f"all {RUNS} runs to end")
        for run_id, meta in zip(run_ids, metas()):
            assert meta["end"]["status"] == "completed_success", (run_id, meta["end"], meta["attempts"])
            assert [a["cause"] for a in meta["attempts"]] == ["preempted", "success"], meta["attempts"]
            assert "resumed from step 3" in home.run(run_id).attempt(2).stdout.read_text()
        # Nothing left: every slice deleted (the finished attempts' included), no host process alive.
        wait_until(lambda: not list(state.glob("nodes/*/*.json")), timeout=60, what="every slice deleted")
        wait_until(lambda: not host_processes(state), timeout=30, what="no process left on any host")
        calls = [int(line) for line in (state / "calls.log").read_text().split()]
        # 100 creates, 100 deletes, 100 launches and the lists: never more than the pool at once.
        assert len(calls) >= 3 * RUNS * 2 and max(calls) <= WORKERS, (len(calls), max(calls))
    finally:
        stop_daemon(daemon)
        for name in {p.stem for p in state.glob("nodes/*/*.json")}:
            subprocess.run(["gcloud", "compute", "tpus", "tpu-vm", "delete", name, "--zone", ZONE, "--quiet"],
                           capture_output=True, timeout=30)
