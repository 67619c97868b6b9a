import sys
from pathlib import Path

# `tests` is a namespace package rooted at the repository: make it importable
# however pytest was started (plain `pytest` does not put the repo on sys.path).
_REPO = str(Path(__file__).resolve().parent.parent)
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

pytest_plugins = ["tests.slurm.plugin"]  # session fixture `slurm_cluster` (real Slurm)
