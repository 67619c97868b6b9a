"""The gcloud simulator's hosts see FRAY_HOME as a Cloud Storage bucket through gcsfuse.

Imported at the start of every Python process a simulated host runs (the
simulator puts this folder first on its PYTHONPATH when its config.json names a
`bucket`). gcsfuse has no hard links, and its rename is a copy and a delete,
not atomic; here both are refused outright inside the bucket's folder, so that
code relying on them fails every time instead of tearing a record once in a
thousand reads. Everything else (create, O_EXCL, write, fsync, listing,
delete, append) works as on any folder. Each refusal is also appended to
$FRAY_GCLOUD_SIM/bucket-refusals.log, so a test can show there were none.

An audit hook (PEP 578) rather than a mount: it needs no root, no FUSE and no
user namespaces, so it behaves the same on every CI machine; it sees only
Python's calls (os.rename, os.replace, os.link), which is where fray writes.
"""

import errno
import os
import sys

_BUCKET = os.path.realpath(os.environ["FRAY_SIM_BUCKET"]) + os.sep if os.environ.get("FRAY_SIM_BUCKET") else None


def _inside(path) -> bool:
    try:
        return os.path.realpath(os.fsdecode(path)).startswith(_BUCKET)
    except (TypeError, ValueError):
        return False  # a file descriptor or a path relative to one: not what fray writes with


def _refuse(event: str, args: tuple) -> None:
    if event not in ("os.rename", "os.link") or not any(_inside(p) for p in args[:2]):
        return
    what = f"{event} {os.fsdecode(args[0])} -> {os.fsdecode(args[1])}"
    try:
        with open(os.path.join(os.environ["FRAY_GCLOUD_SIM"], "bucket-refusals.log"), "a") as log:
            log.write(what + "\n")
    except (KeyError, OSError):
        pass
    raise OSError(errno.ENOTSUP, f"simulated gcsfuse bucket: no atomic rename or hard link ({what})")


if _BUCKET is not None:
    sys.addaudithook(_refuse)
