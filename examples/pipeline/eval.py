#!/usr/bin/env python3
#FRAY --name eval
#FRAY --after train
"""Step 2: evaluate train's latest checkpoint, once train has succeeded (whatever attempts it took).

    fray submit examples/pipeline/eval.py
"""

import json
import os
from pathlib import Path

from fray import report

checkpoint = Path(os.environ["FRAY_AFTER_TRAIN_CHECKPOINT"])
state = json.loads((checkpoint / "state.json").read_text())
score = round(sum(state["weights"]) / state["step"], 3)
print(f"evaluated {checkpoint.name} of {os.environ['FRAY_AFTER_TRAIN']}: score {score}", flush=True)
with report.checkpoint("scores") as folder:  # what report.py reads, through FRAY_AFTER_EVAL_CHECKPOINT
    (folder / "scores.json").write_text(json.dumps({"checkpoint": str(checkpoint), "step": state["step"],
                                                    "score": score}))
report.final(score=score)
