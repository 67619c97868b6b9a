"""A one-feature linear model trained by gradient descent: the "model.py" beside a training script."""

from __future__ import annotations


class Linear:
    def __init__(self, slope: float = 0.0, bias: float = 0.0) -> None:
        self.slope, self.bias = slope, bias

    def train_step(self, points: list[tuple[float, float]], lr: float) -> float:
        """One step of gradient descent on the mean squared error; returns the loss before the step."""
        n = len(points)
        errors = [(self.slope * x + self.bias - y, x) for x, y in points]
        self.slope -= lr * 2 * sum(e * x for e, x in errors) / n
        self.bias -= lr * 2 * sum(e for e, _ in errors) / n
        return sum(e * e for e, _ in errors) / n

    def state(self) -> dict[str, float]:
        return {"slope": self.slope, "bias": self.bias}
