"""The run's own copy of its code snapshot, built by its first attempt from the stored tree.

`fray submit` stored the project by content (fray.state.snapshots): one
read-only object per file under <FRAY_HOME>/snapshots/objects and the tree,
which path is which object, in snapshots/trees/<tree>.json. Here the wrapper
lays that tree out as runs/<id>/code/ (hard links to the objects, copies where
the file system has none), once per run: a later attempt finds it made and runs
the same code, with whatever the job wrote beside it (outputs, a relative
checkpoint folder) still there. It is built under a temporary name and renamed
into place, so a copy that exists is whole, whichever host of a slice made it.

Where FRAY_HOME has no atomic rename (FRAY_RECORDS=write-once, gcsfuse) the
copy is made on the node's own disk instead, one per host.
"""

from __future__ import annotations

import json
import os
import shutil

from . import contract, jobside, records


class CodeError(Exception):
    """The run's code could not be laid out; the message says what is missing."""


def python_path(code_dir: str) -> list[str]:
    """The folders a job's imports search first: the project's top, and its src/ in a src layout."""
    paths = [code_dir]
    src = os.path.join(code_dir, "src")
    if os.path.isdir(src) and not os.path.exists(os.path.join(src, "__init__.py")):
        paths.append(src)
    return paths


def node_local_dir(run_id: str) -> str:
    """Where a host keeps a run's copy when FRAY_HOME cannot take one (write-once records)."""
    return os.path.join(jobside.private_tmp(), contract.CODE_DIR, run_id)


def materialize(home: str, tree: str, target: str) -> str:
    """`target` holding the snapshot `tree`, made now unless an earlier attempt made it; CodeError if the
    stored snapshot is gone or damaged."""
    if os.path.isdir(target):
        return target
    manifest_path = contract.snapshot_tree(home, tree)
    try:
        with open(manifest_path, "rb") as handle:
            manifest = json.loads(handle.read())
        files, links, executable = manifest["files"], manifest["links"], set(manifest["executable"])
    except FileNotFoundError:
        raise CodeError(f"the code snapshot {tree[:12]} is gone from {os.path.dirname(manifest_path)}; "
                        "submit the run again") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CodeError(f"the code snapshot {manifest_path} cannot be read: {exc}") from None
    records.make_private_dir(os.path.dirname(target))
    with records.built_folder(target, f".{os.path.basename(target)}.") as staging:  # another host may win
        for rel, sha in files.items():
            path = _inside(staging, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            source = contract.snapshot_object(home, sha, rel in executable)
            try:
                os.link(source, path)
            except FileNotFoundError:
                raise CodeError(f"the code snapshot {tree[:12]} lost {rel} ({source}); submit the run again") from None
            except OSError:
                shutil.copy2(source, path)  # no hard links here (another file system, gcsfuse)
        for rel, link in links.items():
            path = _inside(staging, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.symlink(link, path)
    return target


def _inside(root: str, rel: str) -> str:
    path = os.path.normpath(os.path.join(root, rel))
    if not path.startswith(root + os.sep):
        raise CodeError(f"the code snapshot names {rel!r}, outside its folder")
    return path
