"""The dashboard's screens: runs (dashboard), run detail, logs, nodes, queue; new run and a live run's settings (`e`)."""
