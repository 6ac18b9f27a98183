"""Early stopping: the held-out evaluations of a run and the best model's weights.

The caller's evaluation scores the model (higher is better); after `patience` evaluations
without a better score the run stops, and the saved encoder is the best evaluated one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class Evaluation:
    """One held-out evaluation: `score` (higher is better) picks the best model; `metrics`
    (such as the held-out loss) are logged and recorded beside it."""

    score: float
    metrics: dict[str, float] = field(default_factory=dict)


class BestModel:
    """The evaluations of a run so far, and a CPU copy of the best-scoring model's weights."""

    def __init__(
        self,
        patience: int,
        history: list[dict[str, float]] | None = None,
        state: dict[str, torch.Tensor] | None = None,
    ) -> None:
        self.patience = patience
        self.history = history or []  # {"step", "score", **metrics} per evaluation
        self.state = state

    @property
    def best_step(self) -> int | None:
        """The step of the best evaluation (the earliest among equals), or None."""
        if not self.history:
            return None
        return int(max(self.history, key=lambda e: e["score"])["step"])

    @property
    def stale(self) -> int:
        """Evaluations since the best one."""
        best = self.best_step
        if best is None:
            return 0
        steps = [e["step"] for e in self.history]
        return len(steps) - 1 - steps.index(best)

    @property
    def exhausted(self) -> bool:
        return self.patience > 0 and self.stale >= self.patience

    def record(self, step: int, evaluation: Evaluation, model: torch.nn.Module) -> bool:
        """Add an evaluation; keep the model's weights when it is the best so far."""
        self.history.append({"step": step, "score": evaluation.score, **evaluation.metrics})
        improved = self.stale == 0
        if improved:
            self.state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        return improved
