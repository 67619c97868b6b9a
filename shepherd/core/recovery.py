"""What to type next for a run that has stopped making progress: one pure function, shown by `fray status`
under the run and mirrored by the table of docs/failures.md ("What to type").

    next_steps(status, reason, run_id, spec, daemon_state, prefix="fray", started=True, *, end=None,
               last_cause=None) -> list[str]

Each step is a command line, with why after `#`. A spent retry budget is read
from the run's end record (`end["budget"]`, `end["budget_limit"]`, written by
fray.core.budgets), a hang from the last attempt's cause; the few reason
prefixes matched here are the policy's own (its `plan.end` calls, in
fray.core.policy; fray.core.status), so a new way to end needs a line here and
a row in docs/failures.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fray.core.budgets import NODE_BUDGET, WORKLOAD_BUDGET
from fray.core.model import Cause

# The last failure was a hang (the wrapper's watch) or a progress stall: its stacks say where, not its stderr.
_HUNG = frozenset({Cause.HANG_STOPPED, Cause.HANG_IDLE, Cause.PROGRESS_STALL})
_ACTIVE = frozenset({"pending", "restarting", "crash_loop", "healthy_running", "running_degraded", "unresponsive"})


def next_steps(status: str, reason: str, run_id: str, spec: Mapping[str, Any] | None, daemon_state: str | None,
               prefix: str = "fray", started: bool = True, *, end: Mapping[str, Any] | None = None,
               last_cause: str | None = None) -> list[str]:
    """The commands that move this run on, most likely first; [] for a run that needs nothing. `started`: some
    attempt of the run started (it has output to read); `end`: its end record (meta.json's), `last_cause`: why
    its last attempt ended."""
    run = f"{prefix} control"
    if status in _ACTIVE and daemon_state == "stopped":
        return [f"{prefix} daemon start  # no daemon watches FRAY_HOME: nothing moves until one runs"]
    if status == "crash_loop" and not started:
        return [f"{prefix} status {run_id}  # no attempt started, so there is no output: its attempts say why each ended",
                f"{prefix} nodes  # the nodes its attempts were refused or failed on; banned ones are marked",
                f"{run} stop {run_id}  # if it cannot start as it is: fix it, then submit again"]
    if status == "crash_loop":
        return [f"{prefix} logs {run_id} --stderr  # why each attempt fails fast",
                f"{run} stop {run_id}  # if it cannot succeed as it is: fix it, then submit again"]
    if status == "failed":
        budget, limit = (end or {}).get("budget"), (end or {}).get("budget_limit") or 0
        if budget == WORKLOAD_BUDGET:
            more = max(1, 2 * limit)
            why = (f"{prefix} logs {run_id} --stacks  # where it hung: every thread's stack" if last_cause in _HUNG
                   else f"{prefix} logs {run_id} --stderr  # why the workload failed" if started
                   else f"{prefix} status {run_id}  # no attempt started: the last one's end says why")
            return [why,
                    f"{run} config-set {run_id} max-retries={more}  # a larger budget, if retrying can help",
                    f"{run} start {run_id}  # start it again (budgets counted afresh)"]
        if budget == NODE_BUDGET:
            more = max(1, 2 * limit)
            return [f"{prefix} nodes  # the nodes it failed on; banned ones are marked",
                    f"{prefix} nodes unban NODE  # a node you know is fixed",
                    f"{run} config-set {run_id} max-retries-preemption={more}  # a larger budget for node failures",
                    f"{run} start {run_id}  # start it again (budgets counted afresh)"]
        if reason.startswith("unschedulable"):
            return [f"{prefix} nodes  # what the workers offer: no worker meets what it asks",
                    f"{prefix} submit SCRIPT ...  # with constraints or resources some worker meets"]
        return [f"{prefix} status {run_id}  # the last failure and events say what happened",
                f"{run} start {run_id}  # start it again"]
    if status == "failed_config" and reason.startswith("preflight probe "):
        probe = reason.split()[2]
        return [f"{prefix} nodes  # none is banned for it: the probe fails for this run on every node it tried",
                f"{prefix} submit SCRIPT ...  # after the fix the reason names (or with --skip-probes {probe} where "
                "the probe does not apply)",
                f"{run} start {run_id}  # the same run again, once the nodes or its environment have changed"]
    if status == "failed_config":
        backend = (spec or {}).get("backend", "its")
        return [f"{prefix} submit SCRIPT ...  # fix what the {backend} backend refused (the reason above) and "
                "submit again: retrying the same submission gets the same answer",
                f"{run} start {run_id}  # the same submission again, once the cluster itself has changed"]
    if status == "failed_dependency":
        return [f"{prefix} status {run_id}  # which run it waited for (--after), and how that one ended",
                f"{run} start UPSTREAM  # run what it waits for again; then start this one",
                f"{run} start {run_id}  # waits again for what it names (--after), then runs"]
    if status == "stopped_manual":
        return [f"{run} start {run_id}  # start it again"]
    if status == "ended_expired":
        return [f"{run} start {run_id}  # another --keep-alive window"]
    if status == "error_unknown":
        return [f"{prefix} status {run_id}  # which state file is damaged (moved aside, see Corrupt files)",
                f"{run} stop {run_id}  # stop reaches its live attempt whatever file is damaged"]
    return []
