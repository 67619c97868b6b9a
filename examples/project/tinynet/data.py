"""The project's data, read relative to the code (as real projects do), not to the working directory."""

from __future__ import annotations

import csv
from pathlib import Path

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "points.csv"


def load_points() -> list[tuple[float, float]]:
    with open(DATA_FILE, newline="") as handle:
        return [(float(row["x"]), float(row["y"])) for row in csv.DictReader(handle)]
