"""Polling until a deadline, for the box's own code: tests/conftest.py's `wait_until`, without importing
pytest, so that `python -m tests.box status` answers at once (pytest alone costs a second on a busy
two-core machine)."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float = 15.0, interval: float = 0.05,
               what: str = "condition") -> T:
    """Poll `predicate` until it returns something truthy, and return that; AssertionError at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
