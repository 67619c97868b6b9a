"""Which cluster a LocalCluster job thread sees as current: a thread-local set around each job."""

from __future__ import annotations

import threading

job_view = threading.local()  # .cluster: that job's LocalCluster, or absent outside job threads
