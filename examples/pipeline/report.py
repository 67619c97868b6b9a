#!/usr/bin/env python3
#FRAY --name report
#FRAY --after eval:any
"""Step 3: a report, whether eval succeeded or not (`--after eval:any`).

    fray submit examples/pipeline/report.py
"""

import json
import os
from pathlib import Path

from fray import report

folder = os.environ["FRAY_AFTER_EVAL_CHECKPOINT"]  # '' when eval left no checkpoint
found = json.loads((Path(folder) / "scores.json").read_text()) if folder else None
print(f"report: {found if found else 'eval left no scores'}", flush=True)
report.final(scores=found)
