"""The training loop every trained encoder shares: seeded, checkpointed, resumable.

A run writes `<out>/checkpoint/` every `checkpoint_every` steps (model and optimizer state,
the step, the config and the loss history) and the finished encoder into `<out>/` itself.
Batches are drawn from `random.Random(seed + step)`, so a run resumed after a kill sees the
same batches as one that never stopped. The caller supplies the model, how to draw a batch,
the loss of a batch and how to save the encoder.
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
from typing import Any

import torch
from tqdm import tqdm

from models.precision import autocast_dtype
from models.training_data import TrainingError

logger = logging.getLogger(__name__)

CHECKPOINT = "checkpoint"


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
    options: dict[str, Any] = field(default_factory=dict)

    def comparable(self) -> dict[str, Any]:
        values = asdict(self)
        values.pop("steps")  # a resumed run may be asked to go further
        values.pop("checkpoint_every")
        return values


@dataclass
class TrainResult:
    steps: int
    losses: list[float]
    seconds: float
    resumed_from: int


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
    resume: bool = False,
    show_progress: bool = True,
) -> TrainResult:
    """Run (or resume) `config.steps` optimisation steps and save the encoder to `out`.

    `batch_loss` returns named loss terms; their sum is optimised, and each is logged.
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
    start, losses = 0, []
    checkpoint = out / CHECKPOINT
    _recover_checkpoint(checkpoint)
    if resume:
        state = json.loads((checkpoint / "state.json").read_text())
        if state["config"] != config.comparable():
            changed = sorted(
                k for k in config.comparable() if state["config"].get(k) != config.comparable()[k]
            )
            raise TrainingError(
                f"the checkpoint in {str(out)!r} was made with another configuration "
                f"(differs in: {', '.join(changed)}); use the same options, or --force"
            )
        model.load_state_dict(torch.load(checkpoint / "model.pt", map_location=device))
        optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt", map_location=device))
        schedule.load_state_dict(torch.load(checkpoint / "schedule.pt"))
        start, losses = int(state["step"]), list(state["losses"])
        logger.info("Resuming %s training at step %d", config.kind, start)
    amp = autocast_dtype(config.precision, device)
    started = time.perf_counter()
    with tqdm(
        total=config.steps, initial=start, desc=f"train {config.kind}", disable=not show_progress
    ) as bar:
        for step in range(start, config.steps):
            torch.manual_seed(config.seed + step)  # dropout, masking: the same after a resume
            batch = draw_batch(random.Random(config.seed * 1_000_003 + step))
            context = (
                torch.autocast(device_type=device.type, dtype=amp) if amp is not None else _null()
            )
            with context:
                terms = batch_loss(model, batch)
            loss = sum(terms.values())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            losses.append(float(loss.detach()))
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.4f}")
            if (step + 1) % max(1, config.checkpoint_every // 10) == 0 or step == start:
                logger.info(
                    "step %d/%d loss %.4f (%s)",
                    step + 1,
                    config.steps,
                    losses[-1],
                    ", ".join(f"{k} {float(v.detach()):.4f}" for k, v in terms.items()),
                )
            if (step + 1) % config.checkpoint_every == 0 or step + 1 == config.steps:
                _save_checkpoint(model, optimizer, schedule, config, step + 1, losses, checkpoint)
    model.eval()
    save_encoder(model, out)
    logger.info("Saved the %s encoder to %s", config.kind, out)
    return TrainResult(
        steps=config.steps,
        losses=losses,
        seconds=time.perf_counter() - started,
        resumed_from=start,
    )


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *_: object) -> None:
        return None


def _recover_checkpoint(folder: Path) -> None:
    """A kill between the two renames of `_save_checkpoint` leaves only `.old`: restore it."""
    old = folder.with_name(folder.name + ".old")
    if not folder.exists() and old.exists():
        old.rename(folder)


def _save_checkpoint(model, optimizer, schedule, config, step, losses, folder: Path) -> None:  # noqa: ANN001
    """Write the checkpoint to a new folder, then swap it in (a kill never leaves half)."""
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    torch.save(model.state_dict(), partial / "model.pt")
    torch.save(optimizer.state_dict(), partial / "optimizer.pt")
    torch.save(schedule.state_dict(), partial / "schedule.pt")
    (partial / "state.json").write_text(
        json.dumps({"step": step, "config": config.comparable(), "losses": losses}, indent=1)
    )
    old = folder.with_name(folder.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        folder.rename(old)
    partial.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
