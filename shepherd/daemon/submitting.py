"""Carrying out the policy's Submit decisions: held until the end of the cycle, after its group commit.

The loop has already staged the attempt as `submitting` in meta.json
(crash-only: a restarted daemon looks for it before submitting again), in the
cycle's group commit (fray.state.commit_batch). `flush` commits that batch
first, so every intent is durable before any backend is asked, by one barrier
for the cycle rather than an fsync per run. Then the backend is asked, and what
it answered is recorded (and committed together): `submitted` with its
reference, an ambiguous answer left `submitting` to be looked for, or a
failure handed to `policy.record_submit_failure`: a BackendError that is not
`temporary` (the backend refused what no retry changes) ends the run
`failed_config`; any other failure is retried with backoff. A crash before that
last commit leaves an attempt `submitting`: the next daemon looks for it, and
gives it up (its wrapper then fenced) if it cannot tell.

A run with `--after` is told where its upstreams' outputs are (FRAY_AFTER_*,
fray.state.upstreams) in every attempt's environment.

Attempts of sweep members whose backend submits groups (`GroupBackend`:
Slurm's job arrays) go to the backend together, one batch per sweep: a sweep's
first start is one `sbatch --array`, and its retries in one cycle one more.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from fray.backends import offers
from fray.backends.protocol import AttemptKey, Backend, GroupBackend, GroupSubmit, SubmitRequest
from fray.core import policy
from fray.core.model import AttemptState, Meta
from fray.daemon.cycle_state import CycleStats
from fray.errors import AmbiguousSubmission, BackendError
from fray.state import runs, upstreams
from fray.state.commit_batch import CommitBatch
from fray.state.layout import Home, RunPaths


@dataclass
class _Held:
    paths: RunPaths
    meta: Meta
    action: policy.Submit


class RunRecords(Protocol):
    """What the submitter writes through (fray.daemon.run_writes.RunWrites): the cycle's group commit, meta.json
    staged into it, ended.json, and events."""

    batch: CommitBatch

    def commit(self, paths: RunPaths, before: Meta, plan: policy.Plan) -> None: ...

    def finish(self, paths: RunPaths, meta: Meta, action: policy.Finish) -> None: ...

    def event(self, paths: RunPaths, kind: str, reason: str, attempt: int | None = None,
              data: dict[str, Any] | None = None, at: float | None = None) -> None: ...


class Submitter:
    def __init__(self, home: Home, backend: Callable[[str], Backend], records: RunRecords, seen: set[AttemptKey],
                 clock: Callable[[], float], jitter: Callable[[], float]) -> None:
        self.home = home
        self.backend = backend
        self.records = records
        self.seen = seen  # attempts the loop has in sight (no "adopted" event for them)
        self.clock = clock
        self.jitter = jitter
        self._held: list[_Held] = []

    def submits_together(self, name: str) -> bool:
        try:
            return isinstance(self.backend(name), GroupBackend)
        except Exception:  # a backend that cannot load fails its submissions with its own message
            return False

    def submit(self, paths: RunPaths, meta: Meta, action: policy.Submit, exclude: tuple[str, ...],
               stats: CycleStats) -> None:
        """Hold the attempt until `flush`, when its `submitting` record has been committed."""
        self._held.append(_Held(paths, meta, action))

    def flush(self, exclude: tuple[str, ...], stats: CycleStats, before_submitting: Callable[[], None]) -> None:
        """Commit the cycle's writes, call `before_submitting`, submit the held attempts (one batch per sweep
        where the backend submits groups), and commit what the backends answered."""
        held, self._held = self._held, []
        try:
            self.records.batch.commit()  # every `submitting` record durable before any backend is asked
            before_submitting()
            batches: dict[tuple[str, str], list[_Held]] = {}
            for item in held:
                sweep = item.meta.sweep
                if sweep is not None and self.submits_together(item.meta.spec.backend):
                    batches.setdefault((item.meta.spec.backend, sweep["id"]), []).append(item)
                else:
                    self._submit_one(item, exclude, stats)
            for (name, group_id), items in batches.items():
                self._submit_batch(name, group_id, items, exclude, stats)
        finally:
            self.records.batch.commit()

    def _submit_one(self, item: _Held, exclude: tuple[str, ...], stats: CycleStats) -> None:
        request = self.request(item.paths, item.meta, item.action, exclude)
        try:
            backend = self.backend(item.meta.spec.backend)
            changed = offers.recheck(backend, item.meta.spec)  # since submit: a partition removed, say
            if changed:
                raise BackendError("; ".join(changed), temporary=False)
            outcome: Any = backend.submit(request)
        except (BackendError, OSError) as exc:
            outcome = exc
        self._record(item.paths, item.meta, request, outcome, stats)

    def _submit_batch(self, name: str, group_id: str, items: list[_Held], exclude: tuple[str, ...],
                      stats: CycleStats) -> None:
        items.sort(key=lambda item: item.meta.sweep["index"] if item.meta.sweep else 0)
        requests = [self.request(i.paths, i.meta, i.action, exclude) for i in items]
        sweep = items[0].meta.sweep or {}
        batch = GroupSubmit(group_id, tuple(requests), sweep.get("max_parallel"))
        try:
            outcomes: dict[AttemptKey, Any] = self.backend(name).submit_group(batch)  # type: ignore[attr-defined]
        except (BackendError, OSError) as exc:
            outcomes = {request.key: exc for request in requests}
        for item, request in zip(items, requests):
            outcome = outcomes.get(request.key, BackendError(f"{name} gave no answer for this attempt"))
            self._record(item.paths, item.meta, request, outcome, stats)

    def request(self, paths: RunPaths, meta: Meta, action: policy.Submit, exclude: tuple[str, ...]) -> SubmitRequest:
        attempt = meta.attempts[action.attempt - 1]
        spec = meta.spec
        if spec.after:  # where its upstreams' outputs are, as they are now (fray.state.upstreams)
            spec = dataclasses.replace(spec, env={**spec.env, **upstreams.environment(self.home, meta)})
        return SubmitRequest(key=AttemptKey(meta.run_id, attempt.number), name=meta.name, spec=spec,
                             home=self.home.root, script=runs.entry_script(paths, meta),
                             attempt_dir=paths.attempt(attempt.number).dir,
                             checkpoint_dir=paths.checkpoints_dir, gpu_ids=action.gpu_ids,
                             exclude_nodes=exclude, partition=attempt.partition, namespace=meta.job_namespace)

    def _record(self, paths: RunPaths, meta: Meta, request: SubmitRequest, outcome: Any, stats: CycleStats) -> None:
        """What the backend answered for one attempt: a reference (dict), or the error it met."""
        number = request.key.attempt
        if isinstance(outcome, AmbiguousSubmission):
            # Left `submitting`: the next snapshots look for it, and policy gives it up only
            # after SUBMIT_RESOLVE_SEC without a trace.
            self.records.event(paths, "error", f"submission of attempt {number} is ambiguous ({outcome}); "
                       "looking for it before submitting again", number)
            return
        if isinstance(outcome, Exception):
            final = isinstance(outcome, BackendError) and not outcome.temporary
            plan = policy.record_submit_failure(meta, number, str(outcome), self.clock(), self.jitter(), final)
            for action in plan.actions:
                if isinstance(action, policy.Finish):
                    self.records.finish(paths, plan.meta, action)
            self.records.commit(paths, meta, plan)
            return
        self.seen.add(request.key)
        before = meta.copy()
        attempt = meta.attempts[number - 1]
        attempt.state = AttemptState.SUBMITTED.value
        attempt.backend_ref = outcome
        done = policy.Plan(meta, self.clock())
        done.log("submitted", f"attempt {number} submitted to {meta.spec.backend}", number,
                 ref={k: v for k, v in outcome.items() if isinstance(v, (str, int))},
                 exclude=list(request.exclude_nodes))
        self.records.commit(paths, before, done)
        stats.submitted += 1
