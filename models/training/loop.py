"""The training loop every trained encoder shares: seeded, checkpointed, resumable.

A run writes `<out>/checkpoint/` every `checkpoint_every` steps (model and optimizer state,
the step, the config, the loss history and the evaluations) and the finished encoder into
`<out>/` itself, with `<out>/training.json` (the losses and evaluations). Batches are drawn
from `random.Random(seed + step)`, so a run resumed after a kill sees the same batches as one
that never stopped. The caller supplies the model, how to draw a batch, the loss of a batch
and how to save the encoder.

Early stopping (optional): the caller's `evaluate` scores the model on held-out data before
the first step, every `eval_every` steps and after the last; the run stops after `patience`
evaluations without a better score, and the saved encoder is the best evaluated one (the
untrained base when nothing beat it), not the last.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import torch
from tqdm import tqdm

from docsim.models.errors import TrainingError
from docsim.models.inference.precision import autocast, autocast_dtype
from docsim.models.inference.tokens import DeviceBatch
from docsim.models.training.early_stopping import BestModel, Evaluation

logger = logging.getLogger(__name__)

__all__ = [
    "CHECKPOINT",
    "REPORT",
    "Evaluation",
    "TrainConfig",
    "TrainResult",
    "TrainingError",
    "check_output",
    "train",
]

CHECKPOINT = "checkpoint"
REPORT = "training.json"


@dataclass
class TrainConfig:
    """Everything that defines a run; a resumed run must have the same (except `steps`)."""

    kind: str
    base: str
    steps: int = 1000
    batch_size: int = 16
    learning_rate: float = 2e-5
    weight_decay: float = 0.01
    warmup_steps: int = 0
    seed: int = 0
    checkpoint_every: int = 100
    max_tokens: int = 128
    precision: str = "auto"
    eval_every: int = 0  # 0: evaluate only before the first and after the last step
    patience: int = 0  # evaluations without improvement before stopping; 0: never stop early
    options: dict[str, Any] = field(default_factory=dict)

    def comparable(self) -> dict[str, Any]:
        values = asdict(self)
        values.pop("steps")  # a resumed run may be asked to go further
        values.pop("warmup_steps")  # the CLI derives it from the steps
        values.pop("patience")  # or to wait longer
        values.pop("checkpoint_every")
        return values


@dataclass
class TrainResult:
    steps: int  # the steps run in all: `config.steps`, or fewer when stopped early
    losses: list[float]
    seconds: float
    resumed_from: int
    evaluations: list[dict[str, float]] = field(default_factory=list)  # step, score, metrics
    best_step: int | None = None  # the step of the saved weights, when evaluated
    stopped_early: bool = False
    out_of_time: bool = False  # stopped by `max_seconds` before `config.steps`


def check_output(out: Path, kind: str, *, resume: bool, force: bool) -> None:
    """Refuse to overwrite what is not ours to overwrite.

    Raises:
        TrainingError: `out` holds another model, or a checkpoint while not resuming.
    """
    if not out.exists() or force:
        if force and out.exists():
            shutil.rmtree(out)
        return
    if not out.is_dir():
        raise TrainingError(f"output {str(out)!r} exists and is not a directory")
    config = out / "config.json"
    if config.exists():
        found = json.loads(config.read_text()).get("docsim_type")
        if found != kind:
            raise TrainingError(
                f"output {str(out)!r} holds a different model ({found or 'not a docsim encoder'});"
                " choose another --out, or pass --force to replace it"
            )
    _recover_checkpoint(out / CHECKPOINT)
    has_checkpoint = (out / CHECKPOINT / "state.json").exists()
    if has_checkpoint and not resume:
        raise TrainingError(
            f"output {str(out)!r} holds a checkpoint of an earlier run: pass --resume to "
            "continue it, or --force to start over"
        )
    if not has_checkpoint and resume:
        raise TrainingError(f"nothing to resume in {str(out)!r}: it has no checkpoint")
    if any(out.iterdir()) and not resume and not config.exists():
        raise TrainingError(f"output {str(out)!r} is not empty; pass --force to replace it")


ModelT = TypeVar("ModelT", bound=torch.nn.Module)
BatchT = TypeVar("BatchT", bound=DeviceBatch)


def train(
    model: ModelT,
    config: TrainConfig,
    out: Path,
    *,
    draw_batch: Callable[[random.Random], BatchT],
    batch_loss: Callable[[ModelT, BatchT], dict[str, torch.Tensor]],
    save_encoder: Callable[[ModelT, Path], None],
    device: torch.device,
    evaluate: Callable[[ModelT], Evaluation] | None = None,
    resume: bool = False,
    show_progress: bool = True,
    max_seconds: float | None = None,
) -> TrainResult:
    """Run (or resume) `config.steps` optimisation steps and save the encoder to `out`.

    `draw_batch` gives the batch of a step (moved to `device` here); `batch_loss` returns
    named loss terms; their sum is optimised, and each is logged. With `evaluate`, the saved
    encoder is the best evaluated one (see the module docstring). `max_seconds` bounds the
    steps' wall time (a lease, a time slot): past it, the run stops after its current step,
    checkpoints (so that `resume` continues it) and saves as it would at its end.
    """
    out.mkdir(parents=True, exist_ok=True)
    run = _Run(model, config, device, out / CHECKPOINT)
    if resume:
        run.restore()
        logger.info("Resuming %s training at step %d", config.kind, run.start)
    if evaluate is not None and run.start == 0:
        run.evaluate(evaluate)
    started = time.perf_counter()
    deadline = started + max_seconds if max_seconds is not None else float("inf")
    with tqdm(
        total=config.steps,
        initial=run.start,
        desc=f"train {config.kind}",
        disable=not show_progress,
    ) as bar:
        while run.step < config.steps and not run.best.exhausted and not run.out_of_time:
            run.optimise(draw_batch, batch_loss)
            run.out_of_time = time.perf_counter() > deadline and run.step < config.steps
            bar.update(1)
            bar.set_postfix(loss=f"{run.losses[-1]:.4f}")
            step = run.step
            if evaluate is not None and (
                step == config.steps or (config.eval_every and step % config.eval_every == 0)
            ):
                run.evaluate(evaluate)
            if (
                step % config.checkpoint_every == 0
                or step == config.steps
                or run.best.exhausted
                or run.out_of_time
            ):
                run.save_checkpoint()
    result = run.finish(save_encoder, out, started)
    _write_report(result, config, out / REPORT)
    logger.info("Saved the %s encoder to %s", config.kind, out)
    return result


class _Run(Generic[ModelT]):
    """One training run's state: the model, its optimizer and schedule, the step, the losses
    and the evaluations; it steps, evaluates, checkpoints and restores."""

    def __init__(
        self, model: ModelT, config: TrainConfig, device: torch.device, checkpoint: Path
    ) -> None:
        model.to(device).train()
        self.model, self.config, self.device, self.checkpoint = model, config, device, checkpoint
        self.optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad],
            lr=config.learning_rate,
            weight_decay=config.weight_decay,
        )
        warmup = config.warmup_steps
        self.schedule = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: min(1.0, (step + 1) / warmup) if warmup else 1.0
        )
        self.start = self.step = 0
        self.out_of_time = False
        self.losses: list[float] = []
        self.best = BestModel(config.patience)
        _recover_checkpoint(checkpoint)
        self.amp = autocast_dtype(config.precision, device)

    def optimise(
        self,
        draw_batch: Callable[[random.Random], BatchT],
        batch_loss: Callable[[ModelT, BatchT], dict[str, torch.Tensor]],
    ) -> None:
        """One optimisation step on the step's batch; logs the loss now and then."""
        seed, step = self.config.seed, self.step
        torch.manual_seed(seed + step)  # dropout, masking: the same after a resume
        batch = draw_batch(random.Random(seed * 1_000_003 + step)).to(self.device)
        with autocast(self.device, self.amp):
            terms = batch_loss(self.model, batch)
        loss = _total(terms)
        self.optimizer.zero_grad(set_to_none=True)
        torch.autograd.backward(loss)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.schedule.step()
        self.losses.append(float(loss.detach()))
        self.step += 1
        if (
            self.step % max(1, self.config.checkpoint_every // 10) == 0
            or self.step == self.start + 1
        ):
            logger.info(
                "step %d/%d loss %.4f (%s)",
                self.step,
                self.config.steps,
                self.losses[-1],
                ", ".join(f"{k} {float(v.detach()):.4f}" for k, v in terms.items()),
            )

    def evaluate(self, evaluate: Callable[[ModelT], Evaluation]) -> None:
        """Evaluate in eval mode without gradients, record it, and log it."""
        self.model.eval()
        with torch.no_grad(), autocast(self.device, self.amp):
            evaluation = evaluate(self.model)
        self.model.train()
        improved = self.best.record(self.step, evaluation, self.model)
        logger.info(
            "step %d held-out score %.4f (%s)%s",
            self.step,
            evaluation.score,
            ", ".join(f"{k} {v:.4f}" for k, v in evaluation.metrics.items()),
            " best so far" if improved else f", {self.best.stale} without improvement",
        )

    def finish(
        self, save_encoder: Callable[[ModelT, Path], None], out: Path, started: float
    ) -> TrainResult:
        """Keep the best evaluated weights (if evaluated), save the encoder to `out`."""
        best = self.best
        stopped_early = best.exhausted and self.step < self.config.steps
        if stopped_early:
            logger.info(
                "Stopped early at step %d: %d evaluations without improvement",
                self.step,
                best.stale,
            )
        if self.out_of_time:
            logger.info("Stopped at step %d of %d: out of time", self.step, self.config.steps)
        if best.state is not None:
            self.model.load_state_dict(best.state)
            if best.best_step == 0:
                logger.warning("No step beat the untrained base: the output is the base itself")
            else:
                logger.info("Keeping the best evaluated model, from step %d", best.best_step)
        self.model.eval()
        save_encoder(self.model, out)
        return TrainResult(
            steps=self.step,
            losses=self.losses,
            seconds=time.perf_counter() - started,
            resumed_from=self.start,
            evaluations=best.history,
            best_step=best.best_step,
            stopped_early=stopped_early,
            out_of_time=self.out_of_time,
        )

    def save_checkpoint(self) -> None:
        """Write the checkpoint to a new folder, then swap it in (a kill never leaves half)."""
        folder = self.checkpoint
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        torch.save(self.model.state_dict(), partial / "model.pt")
        torch.save(self.optimizer.state_dict(), partial / "optimizer.pt")
        torch.save(self.schedule.state_dict(), partial / "schedule.pt")
        if self.best.state is not None:
            torch.save(self.best.state, partial / "best.pt")
        state = {
            "step": self.step,
            "config": self.config.comparable(),
            "losses": self.losses,
            "evaluations": self.best.history,
        }
        (partial / "state.json").write_text(json.dumps(state, indent=1))
        old = folder.with_name(folder.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if folder.exists():
            folder.rename(old)
        partial.rename(folder)
        shutil.rmtree(old, ignore_errors=True)

    def restore(self) -> None:
        """Restore the checkpoint's states, step, losses and evaluations.

        Raises:
            TrainingError: the checkpoint was made with another configuration.
        """
        folder, config = self.checkpoint, self.config
        state = json.loads((folder / "state.json").read_text())
        if state["config"] != config.comparable():
            changed = sorted(
                k for k in config.comparable() if state["config"].get(k) != config.comparable()[k]
            )
            raise TrainingError(
                f"the checkpoint in {str(folder.parent)!r} was made with another configuration "
                f"(differs in: {', '.join(changed)}); use the same options, or --force"
            )
        device = next(self.model.parameters()).device
        self.model.load_state_dict(torch.load(folder / "model.pt", map_location=device))
        self.optimizer.load_state_dict(torch.load(folder / "optimizer.pt", map_location=device))
        self.schedule.load_state_dict(torch.load(folder / "schedule.pt"))
        best_file = folder / "best.pt"
        self.best = BestModel(
            config.patience,
            list(state.get("evaluations", [])),
            torch.load(best_file, map_location="cpu") if best_file.exists() else None,
        )
        self.start = self.step = int(state["step"])
        self.losses = list(state["losses"])


def _total(terms: dict[str, torch.Tensor]) -> torch.Tensor:
    """The sum of the loss terms, added in order (as `sum` would, without its leading 0)."""
    values = list(terms.values())
    total = values[0]
    for value in values[1:]:
        total = total + value
    return total


def _write_report(result: TrainResult, config: TrainConfig, path: Path) -> None:
    """`training.json`: what the run did, for a reader to see its effect."""
    report = {
        "kind": config.kind,
        "config": asdict(config),
        "steps": result.steps,
        "stopped_early": result.stopped_early,
        "out_of_time": result.out_of_time,
        "best_step": result.best_step,
        "evaluations": result.evaluations,
        "losses": result.losses,
    }
    path.write_text(json.dumps(report, indent=1))


def _recover_checkpoint(folder: Path) -> None:
    """A kill between the two renames of `_save_checkpoint` leaves only `.old`: restore it."""
    old = folder.with_name(folder.name + ".old")
    if not folder.exists() and old.exists():
        old.rename(folder)
