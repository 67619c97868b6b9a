"""fray's login side: the shepherd that keeps runs progressing, its CLI and TUI.

The public Python API used inside jobs is exported here (more arrives with the
cluster API); everything else lives in modules named for what they own.
"""

__version__ = "0.1.0"
