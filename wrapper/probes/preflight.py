"""Preflight: which probes run for an attempt, each under a deadline, and what a failure means.

Probes are chosen by what the run asked for - `node` always, the GPU probes
when it asked for GPUs, `tpu` when it expects TPU devices - unless `--probes`
names the set; `--skip-probes` takes some out. They run one at a time in the
order of `contract.PROBE_NAMES` and stop at the first failure (fail fast: the
node is unfit, and a CUDA test on a GPU nvidia-smi cannot see would only hang).

Each probe runs in a thread with a deadline. A probe that misses it, or whose
command hung, is a node fault (exit 42) whatever it was probing: a hung
driver call is the node's problem. A stop signal interrupts the probe under
way; the commands of an interrupted or hung probe are killed. Otherwise a failed probe exits with its
own code: trespassers 43, cuda 44, the others 42. A probe that crashes is a
bug in fray, not in the node: it is recorded as skipped, with the error.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any, Callable  # typing's Callable: subscripted at import, in a job's Python 3.8 too

from .. import contract
from . import cuda, gpu, node, runner, tpu
from .probe import FAILED, SKIPPED, TIMEOUT, Finding, ProbeContext

Probe = Callable[[ProbeContext, float], Finding]

PROBES: dict[str, Probe] = {
    contract.PROBE_NODE: node.basics,
    contract.PROBE_GPU: gpu.visibility,
    contract.PROBE_MIG: gpu.mig_match,
    contract.PROBE_TRESPASSERS: gpu.trespassers,
    contract.PROBE_CUDA: cuda.smoke_test,
    contract.PROBE_TPU: tpu.accelerators,
}
FAILURE_EXITS = {
    contract.PROBE_NODE: contract.EXIT_NODE_FAULT,
    contract.PROBE_GPU: contract.EXIT_NODE_FAULT,
    contract.PROBE_MIG: contract.EXIT_NODE_FAULT,
    contract.PROBE_TRESPASSERS: contract.EXIT_FOREIGN_GPU_PROCESSES,
    contract.PROBE_CUDA: contract.EXIT_CUDA_FAILURE,
    contract.PROBE_TPU: contract.EXIT_NODE_FAULT,
}
CAUSES = {
    contract.EXIT_NODE_FAULT: contract.CAUSE_NODE_FAULT,
    contract.EXIT_FOREIGN_GPU_PROCESSES: contract.CAUSE_FOREIGN_GPU_PROCESSES,
    contract.EXIT_CUDA_FAILURE: contract.CAUSE_CUDA_FAILURE,
}
JOIN_MARGIN_SEC = 2.0  # beyond the deadline, for a command's own kill-on-timeout to finish
STOP_POLL_SEC = 0.1  # how often a running probe checks for a stop signal


def plan(
    gpus: int, tpu_devices: int, probes: Sequence[str] | None, skip: Sequence[str]
) -> list[tuple[str, str | None]]:
    """Every probe in running order, with None (run it) or why it does not run."""
    chosen: list[tuple[str, str | None]] = []
    for name in contract.PROBE_NAMES:
        if name in skip:
            why: str | None = "skipped by --skip-probes"
        elif probes is not None:
            why = None if name in probes else "not named by --probes"
        elif name in contract.GPU_PROBES and gpus == 0:
            why = "the run asked for no GPUs"
        elif name == contract.PROBE_TPU and tpu_devices == 0:
            why = "the run expects no TPU devices"
        else:
            why = None
        chosen.append((name, why))
    return chosen


class Failure:
    """A failed preflight: the wrapper's exit code, the failure.json cause, and why."""

    __slots__ = ("exit_code", "cause", "message", "probe")

    def __init__(self, exit_code: int, cause: str, message: str, probe: str = "") -> None:
        self.exit_code = exit_code
        self.cause = cause
        self.message = message
        self.probe = probe  # which probe failed (failure.json `probe`): one that fails on every node blames the job


def _run_one(probe: Probe, ctx: ProbeContext, timeout: float, log: Callable[[str], None], name: str,
             should_stop: Callable[[], bool]) -> Finding:
    found: list[Finding] = []

    def target() -> None:
        try:
            found.append(probe(ctx, time.monotonic() + timeout))
        except Exception as exc:  # noqa: BLE001 - a bug in a probe must not fail the node
            import traceback

            log(f"probe {name} crashed (a bug in fray, not a node fault):\n{traceback.format_exc().rstrip()}")
            found.append(Finding(SKIPPED, f"the probe crashed (a bug in fray): {type(exc).__name__}: {exc}"))

    # A daemon thread: one stuck in the kernel (a dead NFS mount) must not keep the wrapper alive.
    thread = threading.Thread(target=target, name=f"fray-probe-{name}", daemon=True)
    thread.start()
    give_up = time.monotonic() + timeout + JOIN_MARGIN_SEC
    while thread.is_alive() and time.monotonic() < give_up:
        if should_stop():
            runner.kill_all()
            return Finding(SKIPPED, f"interrupted: the wrapper was told to stop during the {name} probe")
        thread.join(STOP_POLL_SEC)
    if not found:
        runner.kill_all()
        return Finding(TIMEOUT, f"the {name} probe did not finish within {timeout:g}s (hung)")
    return found[0]


def run(
    ctx: ProbeContext,
    selection: list[tuple[str, str | None]],
    timeout: float,
    log: Callable[[str], None],
    should_stop: Callable[[], bool] = lambda: False,
) -> tuple[list[dict[str, Any]], Failure | None]:
    """Run the selected probes; their probe.json entries and the failure, if any."""
    entries: list[dict[str, Any]] = []
    failure: Failure | None = None
    failed_probe = ""
    for name, why_not in selection:
        if why_not is None and failure is not None:
            why_not = f"not run: the {failed_probe} probe failed first"
        elif why_not is None and should_stop():
            why_not = "not run: the wrapper was told to stop"
        if why_not is not None:
            entries.append({"name": name, "status": SKIPPED, "seconds": 0.0, "detail": why_not})
            continue
        started = time.monotonic()
        finding = _run_one(PROBES[name], ctx, timeout, log, name, should_stop)
        seconds = round(time.monotonic() - started, 3)
        entries.append({"name": name, "status": finding.status, "seconds": seconds, "detail": finding.detail,
                        "data": finding.data})
        log(f"probe {name}: {finding.status} in {seconds:.2f}s: {finding.detail}")
        if finding.status in (FAILED, TIMEOUT):
            hung = finding.status == TIMEOUT
            code = contract.EXIT_NODE_FAULT if hung else FAILURE_EXITS[name]
            what = f"preflight probe {name} {'hung' if hung else 'failed'}: {finding.detail}"
            failure = Failure(code, CAUSES[code], what, name)
            failed_probe = name
    return entries, failure


def document(host: str, started_at: float, ended_at: float, entries: list[dict[str, Any]],
             failure: Failure | None, requested: dict[str, Any]) -> dict[str, Any]:
    """probe.json (schemas/probe.json)."""
    return {
        "host": host,
        "started_at": started_at,
        "ended_at": ended_at,
        "ok": failure is None,
        "exit_code": failure.exit_code if failure else None,
        "requested": requested,
        "probes": entries,
    }

