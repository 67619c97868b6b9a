"""Resume on retry by declaration: `--retry-args` added to the script's command line after attempt 1.

Most training scripts resume from their own checkpoint when told so on the command line
(`--init_from=resume`, `--resume`, `--ckpt_path last`). The run declares those arguments once
(`#FRAY --retry-args ...`), and every attempt after the first gets them after the script's own, or
only when the file `--retry-args-if-exists` names exists (relative to the working directory): an
attempt that died before its first checkpoint starts afresh. started.json keeps what was decided
(schemas/started.json: retry_args), which `fray status` shows for each attempt. Pure but for one stat.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any


def decide(attempt: int, retry_args: Sequence[str], if_exists: str | None, cwd: str) -> tuple[list[str], dict[str, Any] | None]:
    """(the arguments to add, the record of the decision; None when the run declares none)."""
    if not retry_args:
        return [], None
    record: dict[str, Any] = {"args": list(retry_args), "if_exists": if_exists, "added": False}
    if attempt == 1:
        record["reason"] = "the first attempt starts afresh"
        return [], record
    if if_exists is not None:
        path = os.path.join(cwd, os.path.expanduser(if_exists))
        if not os.path.exists(path):
            record["reason"] = f"{if_exists} does not exist (in {cwd}): nothing to resume from"
            return [], record
        record["reason"] = f"attempt {attempt}, and {if_exists} exists"
    else:
        record["reason"] = f"attempt {attempt}"
    record["added"] = True
    return list(retry_args), record
