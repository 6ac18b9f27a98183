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

import contextlib
import json
import logging
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from models.precision import autocast, autocast_dtype
from models.training_data import TrainingError

logger = logging.getLogger(__name__)

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


@dataclass(frozen=True)
class Evaluation:
    """One held-out evaluation: `score` (higher is better) picks the best model; `metrics`
    (such as the held-out loss) are logged and recorded beside it."""

    score: float
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class TrainResult:
    steps: int  # the steps run in all: `config.steps`, or fewer when stopped early
    losses: list[float]
    seconds: float
    resumed_from: int
    evaluations: list[dict[str, float]] = field(default_factory=list)  # step, score, metrics
    best_step: int | None = None  # the step of the saved weights, when evaluated
    stopped_early: bool = False


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


def train(
    model: torch.nn.Module,
    config: TrainConfig,
    out: Path,
    *,
    draw_batch: Callable[[random.Random], Any],
    batch_loss: Callable[[torch.nn.Module, Any], dict[str, torch.Tensor]],
    save_encoder: Callable[[torch.nn.Module, Path], None],
    device: torch.device,
    evaluate: Callable[[torch.nn.Module], Evaluation] | None = None,
    resume: bool = False,
    show_progress: bool = True,
) -> TrainResult:
    """Run (or resume) `config.steps` optimisation steps and save the encoder to `out`.

    `batch_loss` returns named loss terms; their sum is optimised, and each is logged. With
    `evaluate`, the saved encoder is the best evaluated one (see the module docstring).
    """
    out.mkdir(parents=True, exist_ok=True)
    model.to(device).train()
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=config.learning_rate,
        weight_decay=config.weight_decay,
    )
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: min(1.0, (step + 1) / config.warmup_steps) if config.warmup_steps else 1.0,
    )
    start, losses, best = 0, [], BestModel(config.patience)
    checkpoint = out / CHECKPOINT
    _recover_checkpoint(checkpoint)
    if resume:
        start, losses, best = _load_checkpoint(model, optimizer, schedule, config, checkpoint)
        logger.info("Resuming %s training at step %d", config.kind, start)
    amp = autocast_dtype(config.precision, device)
    if evaluate is not None and start == 0:
        _evaluate(model, evaluate, 0, best, autocast(device, amp))
    started, step = time.perf_counter(), start
    with tqdm(
        total=config.steps, initial=start, desc=f"train {config.kind}", disable=not show_progress
    ) as bar:
        while step < config.steps and not best.exhausted:
            torch.manual_seed(config.seed + step)  # dropout, masking: the same after a resume
            batch = draw_batch(random.Random(config.seed * 1_000_003 + step))
            with autocast(device, amp):
                terms = batch_loss(model, batch)
            loss = sum(terms.values())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            losses.append(float(loss.detach()))
            step += 1
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.4f}")
            if step % max(1, config.checkpoint_every // 10) == 0 or step == start + 1:
                logger.info(
                    "step %d/%d loss %.4f (%s)",
                    step,
                    config.steps,
                    losses[-1],
                    ", ".join(f"{k} {float(v.detach()):.4f}" for k, v in terms.items()),
                )
            if evaluate is not None and (
                step == config.steps or (config.eval_every and step % config.eval_every == 0)
            ):
                _evaluate(model, evaluate, step, best, autocast(device, amp))
            if step % config.checkpoint_every == 0 or step == config.steps or best.exhausted:
                _save_checkpoint(model, optimizer, schedule, config, step, losses, best, checkpoint)
    stopped_early = best.exhausted and step < config.steps
    if stopped_early:
        logger.info(
            "Stopped early at step %d: %d evaluations without improvement", step, best.stale
        )
    if best.state is not None:
        model.load_state_dict(best.state)
        if best.best_step == 0:
            logger.warning("No step beat the untrained base: the output is the base itself")
        else:
            logger.info("Keeping the best evaluated model, from step %d", best.best_step)
    model.eval()
    save_encoder(model, out)
    result = TrainResult(
        steps=step,
        losses=losses,
        seconds=time.perf_counter() - started,
        resumed_from=start,
        evaluations=best.history,
        best_step=best.best_step,
        stopped_early=stopped_early,
    )
    _write_report(result, config, out / REPORT)
    logger.info("Saved the %s encoder to %s", config.kind, out)
    return result


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
        steps = [e["step"] for e in self.history]
        return len(steps) - 1 - steps.index(self.best_step) if steps else 0

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


def _evaluate(
    model: torch.nn.Module,
    evaluate: Callable[[torch.nn.Module], Evaluation],
    step: int,
    best: BestModel,
    context: contextlib.AbstractContextManager[Any],
) -> None:
    """Evaluate in eval mode without gradients, record it, and log it."""
    model.eval()
    with torch.no_grad(), context:
        evaluation = evaluate(model)
    model.train()
    improved = best.record(step, evaluation, model)
    logger.info(
        "step %d held-out score %.4f (%s)%s",
        step,
        evaluation.score,
        ", ".join(f"{k} {v:.4f}" for k, v in evaluation.metrics.items()),
        " best so far" if improved else f", {best.stale} without improvement",
    )


def _write_report(result: TrainResult, config: TrainConfig, path: Path) -> None:
    """`training.json`: what the run did, for a reader to see its effect."""
    report = {
        "kind": config.kind,
        "config": asdict(config),
        "steps": result.steps,
        "stopped_early": result.stopped_early,
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


def _save_checkpoint(  # noqa: ANN001
    model, optimizer, schedule, config, step, losses, best: BestModel, folder: Path
) -> None:
    """Write the checkpoint to a new folder, then swap it in (a kill never leaves half)."""
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    torch.save(model.state_dict(), partial / "model.pt")
    torch.save(optimizer.state_dict(), partial / "optimizer.pt")
    torch.save(schedule.state_dict(), partial / "schedule.pt")
    if best.state is not None:
        torch.save(best.state, partial / "best.pt")
    state = {
        "step": step,
        "config": config.comparable(),
        "losses": losses,
        "evaluations": best.history,
    }
    (partial / "state.json").write_text(json.dumps(state, indent=1))
    old = folder.with_name(folder.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        folder.rename(old)
    partial.rename(folder)
    shutil.rmtree(old, ignore_errors=True)


def _load_checkpoint(  # noqa: ANN001
    model, optimizer, schedule, config: TrainConfig, folder: Path
) -> tuple[int, list[float], BestModel]:
    """Restore a checkpoint's states; returns its step, losses and evaluations.

    Raises:
        TrainingError: the checkpoint was made with another configuration.
    """
    state = json.loads((folder / "state.json").read_text())
    if state["config"] != config.comparable():
        changed = sorted(
            k for k in config.comparable() if state["config"].get(k) != config.comparable()[k]
        )
        raise TrainingError(
            f"the checkpoint in {str(folder.parent)!r} was made with another configuration "
            f"(differs in: {', '.join(changed)}); use the same options, or --force"
        )
    device = next(model.parameters()).device
    model.load_state_dict(torch.load(folder / "model.pt", map_location=device))
    optimizer.load_state_dict(torch.load(folder / "optimizer.pt", map_location=device))
    schedule.load_state_dict(torch.load(folder / "schedule.pt"))
    best_file = folder / "best.pt"
    best = BestModel(
        config.patience,
        list(state.get("evaluations", [])),
        torch.load(best_file, map_location="cpu") if best_file.exists() else None,
    )
    return int(state["step"]), list(state["losses"]), best
