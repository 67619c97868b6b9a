"""A submission the backend refuses for good ends the run `failed_config` with the backend's words; a
transient failure is retried. Real daemon, the TPU simulator (tests/fakes/gcloud), the real Slurm cluster.

The runs are written with runs.create_run, past the submit-time checks: what the backend refuses
here is what those checks cannot know (a runtime version the cloud does not have, a partition
removed after submit).
"""

from __future__ import annotations

import json
from pathlib import Path

from fray.core import policy
from fray.core.model import Attempt, AttemptState, Meta, RunSpec
from fray.core.status import Status, normalized_status
from fray.state import runs
from fray.state.layout import Home
from tests.conftest import run_fray, schema_validate, wait_until
from tests.backends.tpu.test_tpu_daemon import sim, submit as tpu_submit  # noqa: F401 - sim is a fixture

__all__ = ["sim"]


def meta_of(home: Home, run_id: str) -> dict:
    return json.loads(home.run(run_id).meta.read_text())


def ended(home: Home, run_id: str) -> dict | None:
    meta = meta_of(home, run_id)
    return meta if meta["phase"] == "ended" else None


def submitting(spec: RunSpec) -> Meta:
    meta = Meta(run_id="20261126-000000-r-abcd", name="r", created_at=0.0, submitted_by={}, script={}, spec=spec)
    meta.attempts.append(Attempt(number=1, state=AttemptState.SUBMITTING.value, backend=spec.backend, submitted_at=0.0))
    return meta


def test_a_final_refusal_ends_the_run_failed_config_and_a_temporary_one_retries() -> None:
    final = policy.record_submit_failure(submitting(RunSpec(backend="slurm")), 1, "sbatch: error: Invalid partition",
                                         10.0, 0.0, final=True)
    assert final.meta.end is not None and final.meta.end.status == "failed_config"
    assert final.meta.end.reason == "the slurm backend refused the submission: sbatch: error: Invalid partition"
    shown = normalized_status(final.meta, None, 11.0)
    assert shown.status is Status.FAILED_CONFIG and shown.icon == "⊘"
    again = policy.record_submit_failure(submitting(RunSpec(backend="slurm")), 1, "timed out", 10.0, 0.0)
    assert again.meta.end is None and again.meta.attempts[0].cause == "submit_failed"
    # With a chain of partitions the next one may take it: fall back, do not end.
    chain = policy.record_submit_failure(submitting(RunSpec(backend="slurm", partitions=["gone", "cpu"])), 1,
                                         "Invalid partition", 10.0, 0.0, final=True)
    assert chain.meta.end is None


def test_a_runtime_version_the_cloud_does_not_have_ends_the_run_failed_config_after_one_try(home, sim, daemon,
                                                                                          tmp_path: Path) -> None:
    config = json.loads((sim / "config.json").read_text())
    (sim / "config.json").write_text(json.dumps({**config, "unknown_versions": ["tpu-nope"]}))
    script = tmp_path / "t.sh"
    script.write_text("#!/bin/bash\necho hi\n")
    run_id = tpu_submit(home, script, runtime_version="tpu-nope")
    meta = wait_until(lambda: ended(home, run_id), timeout=60, what="the run to end")
    assert meta["end"]["status"] == "failed_config", meta["end"]
    assert "INVALID_ARGUMENT" in meta["end"]["reason"] and "tpu-nope" in meta["end"]["reason"]
    assert [a["cause"] for a in meta["attempts"]] == ["config_refused"]
    listed = json.loads(run_fray("list", "--json").stdout)
    schema_validate("cli-list", listed)
    assert listed["runs"][0]["status"] == "failed_config"


def test_a_tpu_run_without_a_zone_ends_failed_config_not_a_crash_loop(home, sim, daemon, tmp_path: Path) -> None:
    script = tmp_path / "t.sh"
    script.write_text("#!/bin/bash\necho hi\n")
    run_id = tpu_submit(home, script, zones=[])  # past the submit check, as a meta written by an older fray
    meta = wait_until(lambda: ended(home, run_id), timeout=60, what="the run to end")
    assert meta["end"]["status"] == "failed_config", meta["end"]
    assert "needs --tpu TYPE, --zone Z" in meta["end"]["reason"]
    assert len(meta["attempts"]) == 1


def slurm_run(home: Home, tmp_path: Path, sbatch_line: str) -> str:
    home.config.write_text(json.dumps({"slurm": {"poll_interval_sec": 0.5, "min_snapshot_interval_sec": 0.3,
                                                 "sinfo_ttl_sec": 2}}))
    script = tmp_path / "s.sh"
    script.write_text(f"#!/bin/bash\n{sbatch_line}\necho hi\n")
    return runs.create_run(home, runs.SubmitOptions(script=script, overrides={"backend": "slurm"},
                                                    workdir=str(tmp_path))).run_id


def test_a_feature_sbatch_rejects_ends_the_run_failed_config_with_sbatchs_words(slurm_cluster, home: Home, daemon,
                                                                               tmp_path: Path) -> None:
    run_id = slurm_run(home, tmp_path, "#SBATCH --constraint=nosuch")
    found = wait_until(lambda: ended(home, run_id), timeout=60, what="the run to end")
    assert found["end"]["status"] == "failed_config", found["end"]
    assert "Invalid feature specification" in found["end"]["reason"]
    assert [a["cause"] for a in found["attempts"]] == ["config_refused"]
    schema_validate("ended", json.loads(home.run(run_id).ended.read_text()))


def test_the_daemon_checks_again_before_submitting_what_sinfo_says_no_node_has(slurm_cluster, home: Home, daemon,
                                                                              tmp_path: Path) -> None:
    # Past the submit check (a GRES type a node had when the run was submitted): the daemon's own look refuses it.
    run_id = slurm_run(home, tmp_path, "#SBATCH --gres=gpu:v100:1")
    found = wait_until(lambda: ended(home, run_id), timeout=60, what="the run to end")
    assert found["end"]["status"] == "failed_config", found["end"]
    assert "no Slurm node has GPUs of type 'v100' (the cluster has: a100, h100)" in found["end"]["reason"]
    assert "slurm_job_id" not in json.dumps(found["attempts"]) and found["attempts"][0]["backend_ref"] is None


def test_a_gcloud_that_fails_every_call_is_shown_in_daemon_status_list_and_the_dashboard(home, sim, daemon,
                                                                                        tmp_path: Path) -> None:
    from fray.daemon import lease
    from fray.tui.widgets.status_bar import banner_text

    config = json.loads((sim / "config.json").read_text())
    broken = "ModuleNotFoundError: No module named 'googlecloudsdk'"
    (sim / "config.json").write_text(json.dumps({**config, "broken": broken}))
    script = tmp_path / "t.sh"
    script.write_text("#!/bin/bash\necho hi\n")
    run_id = tpu_submit(home, script)
    shown = wait_until(lambda: "tpu: gcloud failing for" in (p := run_fray("daemon", "status")).stdout and p,
                       timeout=60, what="daemon status to show the failing gcloud")
    assert broken in shown.stdout
    document = json.loads(run_fray("daemon", "status", "--json").stdout)
    schema_validate("cli-daemon", document)
    assert document["lease"]["failing_commands"][0]["command"] == "gcloud"
    listing = run_fray("list")
    assert "tpu: gcloud failing for" in listing.stdout.splitlines()[0] and broken in listing.stdout.splitlines()[0]
    banner = banner_text({"pending": 1}, lease.view(home))
    assert banner is not None and banner.startswith("⚠ tpu: gcloud failing for") and broken in banner
    assert meta_of(home, run_id)["phase"] != "ended"  # transient as far as fray can tell: still retried
    (sim / "config.json").write_text(json.dumps(config))  # gcloud works again: the warning goes
    wait_until(lambda: "failing" not in run_fray("daemon", "status").stdout, timeout=60, what="the warning to clear")
