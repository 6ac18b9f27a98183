"""`docsim train`: one of the papers' encoders on a corpus. Training code (torch's
optimisers and friends) is imported when the command runs, not at CLI startup."""

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


@cli.command()
def train(
    kind: Annotated[str, typer.Argument(help="sdr, colde, graph or bregman.")],
    corpus: Annotated[Path, typer.Option(help="The corpus to train on (any docsim format).")],
    out: Annotated[Path, typer.Option(help="Where the trained encoder (and checkpoints) go.")],
    base: Annotated[str, typer.Option(help="The starting encoder: minilm or a directory.")] = (
        "minilm"
    ),
    steps: Annotated[int, typer.Option(min=1, help="Optimisation steps.")] = 1000,
    batch_size: Annotated[int, typer.Option(min=2)] = 16,
    learning_rate: Annotated[float, typer.Option(min=0.0)] = 2e-5,
    max_tokens: Annotated[int, typer.Option(min=8, help="Tokens per text / chunk.")] = 128,
    seed: int = 0,
    checkpoint_every: Annotated[int, typer.Option(min=1)] = 100,
    fmt: Annotated[
        CorpusFormat, typer.Option("--format", help="Corpus format.")
    ] = CorpusFormat.auto,
    positives: Annotated[
        str, typer.Option(help="sdr: positive pairs from the same paragraph or document.")
    ] = "paragraph",
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
    """Train one of the papers' encoders on a corpus; `docsim index --encoder OUT` uses it."""
    from indexer.train import run_training, training_documents
    from models.training import TrainConfig, TrainingError

    settings = get_settings()
    options: dict[str, Any] = {
        "sdr": {"positives": positives},
        "colde": {"views": views, "use_labels": label_field is not None},
        "graph": {"edges": edges},
        "bregman": {"weight": bregman_weight, "k": subnetworks, "sigma": sigma},
    }.get(kind, {})
    config = TrainConfig(
        kind=kind,
        base=base,
        steps=steps,
        batch_size=batch_size,
        learning_rate=learning_rate,
        seed=seed,
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
            }
        )
    )
