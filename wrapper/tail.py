"""The last lines of a log, read from its end: stderr.log can be gigabytes.

Lines are shown as a terminal would show them: of a line that a progress bar
rewrote with carriage returns, only the last text written survives.
"""

from __future__ import annotations

import os

BLOCK = 8192


def _as_displayed(raw: bytes) -> str:
    segments = [s for s in raw.split(b"\r") if s]
    return segments[-1].decode("utf-8", errors="replace") if segments else ""


def tail_lines(path: str | os.PathLike[str], count: int = 20, max_bytes: int = 64 * 1024) -> list[str]:
    """The last `count` lines of `path` ([] if it is missing), reading at most `max_bytes` from its end."""
    if count <= 0:
        return []
    try:
        handle = open(path, "rb")
    except OSError:
        return []
    with handle:
        end = handle.seek(0, os.SEEK_END)
        start = end
        chunks: list[bytes] = []
        newlines = 0
        # count + 1 line breaks guarantee `count` whole lines (the last one may end the file).
        while start > 0 and newlines <= count and end - start < max_bytes:
            step = min(BLOCK, start, max_bytes - (end - start))
            start -= step
            handle.seek(start)
            chunk = handle.read(step)
            chunks.append(chunk)
            newlines += chunk.count(b"\n")
    data = b"".join(reversed(chunks))
    if data.endswith(b"\n"):
        data = data[:-1]
    if not data:
        return []
    lines = data.split(b"\n")
    if start > 0 and len(lines) > count:
        lines = lines[1:]  # began mid-line
    return [_as_displayed(line) for line in lines[-count:]]
