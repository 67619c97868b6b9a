"""The `cuda` probe: a CUDA smoke test in a child Python (wrapper/probes/cuda_smoke.py).

A child, not a thread: importing torch costs seconds and hundreds of MB the
wrapper must not keep, and a CUDA call that hangs can only be stopped by
killing its process. It runs under the wrapper's Python with the workload's
environment and working directory, so it finds the frameworks the workload
would. Its verdict is the last line it prints (JSON); a child that dies
without one (a segfault in the driver) has failed.
"""

from __future__ import annotations

import json
import os

from .probe import FAILED, PASSED, SKIPPED, TIMEOUT, Finding, ProbeContext

SMOKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cuda_smoke.py")


def smoke_test(ctx: ProbeContext, deadline: float) -> Finding:
    try:
        with open(SMOKE, encoding="utf-8") as handle:
            source = handle.read()
    except OSError as exc:
        return Finding(FAILED, f"cannot read the smoke test {SMOKE}: {exc}")
    # `-c`, not the file's path: running a file would put wrapper/probes first on sys.path.
    result = ctx.command([ctx.python, "-c", source], deadline)
    if result.timed_out:
        return Finding(TIMEOUT, f"the CUDA smoke test did not finish within {result.seconds:.1f}s (hung in CUDA?)")
    verdict = _verdict(result.stdout)
    if verdict is None:
        tail = (result.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]
        return Finding(FAILED, f"the CUDA smoke test died (exit code {result.exit_code}): {tail[:300]}",
                       {"exit_code": result.exit_code})
    status = {"passed": PASSED, "failed": FAILED, "skipped": SKIPPED}.get(str(verdict.get("status")), FAILED)
    data = {"framework": verdict.get("framework"), "devices": verdict.get("devices")}
    return Finding(status, str(verdict.get("detail", "")), data)


def _verdict(stdout: str) -> dict[str, object] | None:
    lines = stdout.strip().splitlines()
    if not lines:
        return None
    try:
        verdict = json.loads(lines[-1])
    except ValueError:
        return None
    return verdict if isinstance(verdict, dict) else None
