"""The CUDA smoke test, run by `fray.wrapper.probes.cuda` in a child Python (never imported by the wrapper).

With the first of torch, cupy and numba that is importable and built for
CUDA: on every visible device, allocate, run a kernel, synchronize and check
the answer. Prints one JSON line: {"status", "framework", "devices", "detail"}.

    passed   every device computed the right answer
    failed   a CUDA runtime error, or a wrong answer: the node's fault (exit 44)
    skipped  none of them is usable here (not installed, or a CPU-only build):
             the environment's business, not the node's

Standard library only at the top: the frameworks are imported one by one.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

N = 1 << 20


class Unusable(Exception):
    """This framework cannot be tried here: not installed, or not built for CUDA."""


def _torch() -> int:
    try:
        import torch
    except ImportError as exc:
        raise Unusable(f"torch: {exc}") from None
    if getattr(torch.version, "cuda", None) is None:
        raise Unusable("torch: a CPU-only build")
    if not torch.cuda.is_available():
        # A CUDA build that cannot reach the GPUs nvidia-smi showed: the driver's fault.
        raise RuntimeError("torch.cuda.is_available() is False on a node whose GPUs nvidia-smi shows")
    count = torch.cuda.device_count()
    for index in range(count):
        device = f"cuda:{index}"
        total = (torch.ones(N, device=device) * 2).sum()
        torch.cuda.synchronize(device)
        _check(index, float(total.item()))
    return count


def _cupy() -> int:
    try:
        import cupy
    except ImportError as exc:
        raise Unusable(f"cupy: {exc}") from None
    count = cupy.cuda.runtime.getDeviceCount()
    for index in range(count):
        with cupy.cuda.Device(index) as device:
            total = (cupy.ones(N, dtype=cupy.float32) * 2).sum()
            device.synchronize()
            _check(index, float(total))
    return count


def _numba() -> int:
    try:
        from numba import cuda
    except ImportError as exc:
        raise Unusable(f"numba: {exc}") from None
    if not cuda.is_available():
        raise Unusable("numba: no CUDA driver or toolkit found by numba")

    @cuda.jit
    def double(values: Any) -> None:
        i = cuda.grid(1)
        if i < values.size:
            values[i] = 2.0

    import numpy

    count = len(cuda.gpus)
    for index in range(count):
        cuda.select_device(index)
        values = cuda.to_device(numpy.zeros(N, dtype=numpy.float32))
        double[(N + 255) // 256, 256](values)
        cuda.synchronize()
        _check(index, float(values.copy_to_host().sum()))
    return count


def _check(index: int, total: float) -> None:
    if total != 2.0 * N:
        raise RuntimeError(f"device {index} computed {total}, not {2.0 * N}: silent data corruption")


FRAMEWORKS: tuple[tuple[str, Callable[[], int]], ...] = (("torch", _torch), ("cupy", _cupy), ("numba", _numba))


def main() -> dict[str, Any]:
    unusable: list[str] = []
    for name, smoke in FRAMEWORKS:
        try:
            devices = smoke()
        except Unusable as exc:
            unusable.append(str(exc))
            continue
        except Exception as exc:  # noqa: BLE001 - any error from the framework is the verdict
            detail = f"{name}: {type(exc).__name__}: {exc}"
            return {"status": "failed", "framework": name, "devices": None, "detail": detail}
        if devices == 0:
            return {"status": "failed", "framework": name, "devices": 0, "detail": f"{name} sees no CUDA device"}
        return {"status": "passed", "framework": name, "devices": devices,
                "detail": f"{name}: allocated, ran a kernel and synchronized on {devices} device(s)"}
    return {"status": "skipped", "framework": None, "devices": None,
            "detail": "no CUDA framework to test with: " + "; ".join(unusable)}


if __name__ == "__main__":
    print(json.dumps(main()), flush=True)
    sys.exit(0)
