"""`docsim train`: one of the papers' encoders, or the base adapted to the corpus (`adapt`),
on a corpus. Training code (torch's optimisers and friends) is imported when the command
runs, not at CLI startup."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from indexer.cli.common import cli, fail
from indexer.config import get_settings
from indexer.text.corpus import CorpusError, CorpusFormat
from indexer.text.sentences import load_splitter
from models.precision import resolve_device

# adapt nudges a good encoder towards the corpus: a low rate, a warmup, early stopping
DEFAULTS = {"learning_rate": 2e-5, "warmup": 0.0, "eval_every": 0}
ADAPT_DEFAULTS = {"learning_rate": 1e-5, "warmup": 0.1, "eval_every": 50}


@cli.command()
def train(
    kind: Annotated[str, typer.Argument(help="sdr, colde, graph, bregman or adapt.")],
    corpus: Annotated[Path, typer.Option(help="The corpus to train on (any docsim format).")],
    out: Annotated[Path, typer.Option(help="Where the trained encoder (and checkpoints) go.")],
    base: Annotated[str, typer.Option(help="The starting encoder: minilm or a directory.")] = (
        "minilm"
    ),
    steps: Annotated[int, typer.Option(min=1, help="Optimisation steps.")] = 1000,
    batch_size: Annotated[int, typer.Option(min=2)] = 16,
    learning_rate: Annotated[
        float | None, typer.Option(min=0.0, help="Default: 1e-5 for adapt, 2e-5 otherwise.")
    ] = None,
    warmup: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Share of the steps with a linear learning-rate warmup (default: 0.1 for "
            "adapt, 0 otherwise).",
        ),
    ] = None,
    eval_every: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="sdr, bregman, adapt: hold a few documents out, score the model on their "
            "pairs every N steps and save the best one; 0: no held-out evaluation (default: "
            "50 for adapt, 0 otherwise).",
        ),
    ] = None,
    patience: Annotated[
        int, typer.Option(min=0, help="Stop after N evaluations without improvement; 0: never.")
    ] = 5,
    max_tokens: Annotated[int, typer.Option(min=8, help="Tokens per text / chunk.")] = 128,
    seed: int = 0,
    checkpoint_every: Annotated[int, typer.Option(min=1)] = 100,
    fmt: Annotated[
        CorpusFormat, typer.Option("--format", help="Corpus format.")
    ] = CorpusFormat.auto,
    positives: Annotated[
        str, typer.Option(help="sdr: positive pairs from the same paragraph or document.")
    ] = "paragraph",
    mlm_weight: Annotated[
        float, typer.Option(min=0.0, help="sdr: weight of the MLM term; 0 leaves it out.")
    ] = 1.0,
    pairs: Annotated[
        str,
        typer.Option(
            help="adapt: positive pairs of neighbours (consecutive sentence windows of a "
            "paragraph) or halves (of a section)."
        ),
    ] = "neighbours",
    temperature: Annotated[
        float, typer.Option(min=1e-4, help="adapt: InfoNCE temperature.")
    ] = 0.05,
    views: Annotated[int, typer.Option(min=2, max=5, help="colde: sections per document.")] = 2,
    label_field: Annotated[
        str | None, typer.Option(help="colde: metadata field with class labels.")
    ] = None,
    edges: Annotated[str, typer.Option(help="graph: neighbours or full.")] = "neighbours",
    bregman_weight: Annotated[float, typer.Option(help="bregman: lambda.")] = 1.0,
    subnetworks: Annotated[int, typer.Option(min=1, help="bregman: k.")] = 8,
    sigma: Annotated[float, typer.Option(help="bregman: Gaussian kernel width.")] = 2.0,
    resume: Annotated[bool, typer.Option(help="Continue the checkpoint in --out.")] = False,
    force: Annotated[bool, typer.Option(help="Replace what --out holds.")] = False,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """Train an encoder on a corpus; `docsim index --encoder OUT` uses it."""
    from indexer.train import run_training, training_documents
    from models.training import TrainConfig, TrainingError

    settings = get_settings()
    options: dict[str, Any] = {
        "sdr": {"positives": positives, "mlm_weight": mlm_weight},
        "adapt": {"pairs": pairs, "temperature": temperature},
        "colde": {"views": views, "use_labels": label_field is not None},
        "graph": {"edges": edges},
        "bregman": {"weight": bregman_weight, "k": subnetworks, "sigma": sigma},
    }.get(kind, {})
    defaults = ADAPT_DEFAULTS if kind == "adapt" else DEFAULTS
    warmup = defaults["warmup"] if warmup is None else warmup
    config = TrainConfig(
        kind=kind,
        base=base,
        steps=steps,
        batch_size=batch_size,
        learning_rate=defaults["learning_rate"] if learning_rate is None else learning_rate,
        warmup_steps=round(warmup * steps),
        seed=seed,
        eval_every=int(defaults["eval_every"] if eval_every is None else eval_every),
        patience=patience,
        checkpoint_every=checkpoint_every,
        max_tokens=max_tokens,
        precision=settings.encoder.precision,
        options=options,
    )
    try:
        if not corpus.exists():
            raise CorpusError(f"corpus path {str(corpus)!r} does not exist")
        docs = training_documents(corpus, fmt, load_splitter(settings.punkt_params), label_field)
        result = run_training(
            kind,
            docs,
            out,
            config,
            device=resolve_device(settings.encoder.device),
            resume=resume,
            force=force,
            show_progress=progress,
        )
    except (TrainingError, CorpusError, ValueError) as error:
        fail(str(error))
    except KeyboardInterrupt:
        fail(f"interrupted: `docsim train {kind} ... --resume` continues from the checkpoint", 130)
    first = sum(result.losses[:10]) / max(1, len(result.losses[:10]))
    last = sum(result.losses[-10:]) / max(1, len(result.losses[-10:]))
    typer.echo(
        json.dumps(
            {
                "kind": kind,
                "out": str(out),
                "steps": result.steps,
                "resumed_from": result.resumed_from,
                "seconds": round(result.seconds, 1),
                "loss_first_10": round(first, 4),
                "loss_last_10": round(last, 4),
                **_held_out_summary(result.evaluations, result.best_step, result.stopped_early),
            }
        )
    )


def _held_out_summary(
    evaluations: list[dict[str, float]], best_step: int | None, stopped_early: bool
) -> dict[str, Any]:
    """The held-out score before training and of the saved model, when there were any."""
    if not evaluations:
        return {}
    best = next(e for e in evaluations if e["step"] == best_step)
    return {
        "held_out_score_first": round(evaluations[0]["score"], 4),
        "held_out_score_best": round(best["score"], 4),
        "best_step": best_step,
        "stopped_early": stopped_early,
    }
