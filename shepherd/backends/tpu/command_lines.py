"""The gcloud command lines of the TPU backend, built in one place (pure: argv lists only).

Every call that changes a slice is `--async`, so a slow cloud never holds a
daemon cycle; lists are one call per zone per cycle, filtered to fray's labels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LABEL_RUN = "fray-run"
LABEL_ATTEMPT = "fray-attempt"
LABEL_HOME = "fray-home"  # the FRAY_HOME that created the slice (fray.state.identity): only it may delete it


@dataclass(frozen=True)
class SliceRequest:
    run_id: str
    attempt: int
    zone: str
    accelerator_type: str
    runtime_version: str
    home: str  # the creating home's id (fray.state.identity): the `fray-home` label
    provisioning: str = "on-demand"  # "spot" | "preemptible" | "reserved" | "on-demand"
    queued: bool = False


def slice_name(run_id: str, attempt: int) -> str:
    """`fray-<run>-a<attempt>`: a valid node id (lowercase, digits, hyphens, <= 63, starts with a letter)."""
    clean = re.sub(r"[^a-z0-9-]+", "-", run_id.lower()).strip("-")
    suffix = f"-a{attempt}"
    return ("fray-" + clean)[: 63 - len(suffix)].rstrip("-") + suffix


def label_value(text: str) -> str:
    """A label value: lowercase letters, digits, `_` and `-`, at most 63 characters."""
    return re.sub(r"[^a-z0-9_-]+", "-", text.lower())[:63]


def create(request: SliceRequest) -> list[str]:
    name = slice_name(request.run_id, request.attempt)
    labels = (f"{LABEL_RUN}={label_value(request.run_id)},{LABEL_ATTEMPT}={request.attempt},"
              f"{LABEL_HOME}={label_value(request.home)}")
    mode = _provisioning_flags(request.provisioning)
    if request.queued:
        return ["gcloud", "compute", "tpus", "queued-resources", "create", name,
                "--node-id", name, "--zone", request.zone,
                "--accelerator-type", request.accelerator_type,
                "--runtime-version", request.runtime_version,
                *mode, "--labels", labels, "--async", "--format=json"]
    return ["gcloud", "compute", "tpus", "tpu-vm", "create", name, "--zone", request.zone,
            "--accelerator-type", request.accelerator_type, "--version", request.runtime_version,
            *mode, "--labels", labels, "--async", "--format=json"]


def _provisioning_flags(provisioning: str) -> list[str]:
    return {"spot": ["--spot"], "preemptible": ["--preemptible"], "reserved": ["--reserved"]}.get(provisioning, [])


def list_nodes(zone: str, home: str) -> list[str]:
    """This home's slices in `zone`: another home's in the same project are not even listed."""
    return ["gcloud", "compute", "tpus", "tpu-vm", "list", "--zone", zone, "--format=json",
            f"--filter=labels.{LABEL_HOME}={label_value(home)}"]


def list_queued(zone: str) -> list[str]:
    """A QueuedResource has no labels of its own (they go on the node it creates): read by node id."""
    return ["gcloud", "compute", "tpus", "queued-resources", "list", "--zone", zone, "--format=json"]


def delete(name: str, zone: str, queued: bool = False) -> list[str]:
    if queued:
        return ["gcloud", "compute", "tpus", "queued-resources", "delete", name, "--zone", zone,
                "--force", "--quiet", "--async"]
    return ["gcloud", "compute", "tpus", "tpu-vm", "delete", name, "--zone", zone, "--quiet", "--async"]


def ssh_all(name: str, zone: str, command: str) -> list[str]:
    """Run `command` on every host of the slice (gcloud runs one ssh per worker)."""
    return ["gcloud", "compute", "tpus", "tpu-vm", "ssh", name, "--zone", zone, "--worker=all",
            "--command", command]
