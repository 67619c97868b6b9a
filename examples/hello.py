#!/usr/bin/env python3
#FRAY --name hello
#FRAY --cpus 1 --heartbeat-interval 2
"""The smallest fray job: print, report a little progress, succeed.

    fray submit examples/hello.py --wait
"""

import os
import socket
import time

from fray import report

print(f"hello from {socket.gethostname()}, run {os.environ.get('FRAY_RUN_ID', '(not under fray)')}"
      f", attempt {os.environ.get('FRAY_ATTEMPT', '-')}", flush=True)
loss = 1.0
for step in range(1, 6):
    loss *= 0.7
    report.progress(step=step, loss=round(loss, 4))
    print(f"step {step}: loss {loss:.4f}", flush=True)
    time.sleep(0.1)
report.final(loss=round(loss, 4), steps=5)
print("done", flush=True)
