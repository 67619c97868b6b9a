"""fray's version: what `fray --version` prints and a daemon writes into daemon.json.

Its own module, beside errors.py, so that the daemon and the CLI read it without importing the
top-level `fray`, whose public names (PEP 562) point into the cluster API above the daemon.
"""

__version__ = "0.1.0"
