"""A lemon node or a lemon job: a preflight probe that fails the same way on two nodes blames the job (pure).

    same_failure_elsewhere(meta, attempt) -> Lemon | None

A probe that fails on one node says the node is unfit, and the node is
banned for a while. The same probe failing the same way for the same run on a
second, distinct node says something else: what the two have in common is
the job (its request, its environment, a missing tool on every node), and
banning every node it touches would take the cluster out of service for
everyone's runs while fixing nothing. So the run stops there with a verdict
that names the probe, the nodes and the likely fix, and the bans its failures
laid are lifted (fray.core.run_plan.ClearSuspicion). Meta's lemon-node
detection judges a node by its failures across many jobs; the blacklist does
the same across the runs of a home (fray.state.blacklist: `runs`).

"The same way" is the probe's own message with the node names and numbers
taken out, so `nvidia-smi not found on PATH` on n3 and on n4 match, and a
GPU count of 0 and of 1 do too.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from fray.core.model import Attempt, AttemptState, Cause, Meta

# The likely fix, by probe (fray.wrapper.contract.PROBE_NAMES).
LIKELY_FIX = {
    "node": "check what the job needs of every node (FRAY_HOME and its working directory mounted there, free disk "
            "for --min-free-disk), or skip the probe with --skip-probes node",
    "gpu": "check that the nodes give the job the GPUs it asks for and that nvidia-smi is on their PATH (#SBATCH "
           "--gres/--gpus as the cluster names them), or skip the probe with --skip-probes gpu",
    "mig": "the MIG layout it expects is on none of them: check --gpus against the nodes' MIG instances, or "
           "--skip-probes mig",
    "trespassers": "other processes hold its GPUs on every node: its own earlier processes, or GPUs the scheduler "
                   "shares; --skip-probes trespassers where sharing is intended",
    "cuda": "CUDA fails on every node: the job's Python environment (a torch built for another CUDA than the nodes' "
            "driver), or skip the test with --skip-probes cuda",
    "tpu": "no TPU devices are visible on any host: check --tpu and the runtime version, or --skip-probes tpu",
}
_NUMBER = re.compile(r"\d+")


class Lemon(NamedTuple):
    """The verdict: the probe, the nodes it failed on the same way, what it said there, and the fix."""

    probe: str
    nodes: tuple[str, ...]
    said: str

    def verdict(self) -> str:
        nodes = ", ".join(self.nodes[:-1]) + f" and {self.nodes[-1]}"
        fix = LIKELY_FIX.get(self.probe, f"or skip it with --skip-probes {self.probe}")
        return (f"preflight probe {self.probe} failed the same way on {len(self.nodes)} nodes ({nodes}): {self.said}; "
                f"the job or its environment is at fault, not the nodes, so none is banned for it: {fix}")


def same_failure_elsewhere(meta: Meta, attempt: Attempt) -> Lemon | None:
    """The verdict when `attempt`'s failed probe failed the same way for this run on another node; else None."""
    if attempt.probe is None or attempt.node is None or attempt.cause != Cause.NODE_FAULT.value:
        return None
    way = _way(attempt)
    nodes = [attempt.node]
    for earlier in meta.attempts:
        if (earlier.number != attempt.number and earlier.state == AttemptState.ENDED.value
                and earlier.cause == Cause.NODE_FAULT.value and earlier.probe == attempt.probe
                and earlier.node is not None and earlier.node not in nodes and _way(earlier) == way):
            nodes.insert(0, earlier.node)
    if len(nodes) < 2:
        return None
    said = (attempt.detail or "").removeprefix(f"preflight probe {attempt.probe} failed: ")
    return Lemon(attempt.probe, tuple(nodes), said)


def _way(attempt: Attempt) -> str:
    """How it failed, without where: the detail with the node's name and every number taken out."""
    text = attempt.detail or ""
    if attempt.node:
        text = text.replace(attempt.node, "<node>")
    return _NUMBER.sub("#", text)
