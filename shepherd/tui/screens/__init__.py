"""The dashboard's screens: runs (dashboard), run detail, logs, nodes, queue; new run and edit config."""
