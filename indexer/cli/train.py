"""`docsim train`: one of the papers' encoders, or the base adapted to the corpus (`adapt`),
on a corpus. Training code (torch's optimisers and friends) is imported when the command
runs, not at CLI startup."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from docsim.indexer.choices import CorpusFormat
from docsim.indexer.cli.common import FormatOption, cli, fail
from docsim.indexer.settings import get_settings

if TYPE_CHECKING:  # training code is imported when the command runs
    from docsim.models.training.loop import TrainConfig, TrainResult

# adapt nudges a good encoder towards the corpus: a low rate, a warmup, early stopping
DEFAULTS = {"learning_rate": 2e-5, "warmup": 0.0, "eval_every": 0}
ADAPT_DEFAULTS = {"learning_rate": 1e-5, "warmup": 0.1, "eval_every": 50}

# The options of `docsim train`, in the order `--help` lists them.
KindArgument = Annotated[str, typer.Argument(help="sdr, colde, graph, bregman or adapt.")]
CorpusOption = Annotated[Path, typer.Option(help="The corpus to train on (any docsim format).")]
OutOption = Annotated[Path, typer.Option(help="Where the trained encoder (and checkpoints) go.")]
BaseOption = Annotated[str, typer.Option(help="The starting encoder: minilm or a directory.")]
StepsOption = Annotated[int, typer.Option(min=1, help="Optimisation steps.")]
BatchSizeOption = Annotated[int, typer.Option(min=2)]
LearningRateOption = Annotated[
    float | None, typer.Option(min=0.0, help="Default: 1e-5 for adapt, 2e-5 otherwise.")
]
WarmupOption = Annotated[
    float | None,
    typer.Option(
        min=0.0,
        max=1.0,
        help="Share of the steps with a linear learning-rate warmup (default: 0.1 for "
        "adapt, 0 otherwise).",
    ),
]
EvalEveryOption = Annotated[
    int | None,
    typer.Option(
        min=0,
        help="sdr, bregman, adapt: hold a few documents out, score the model on their "
        "pairs every N steps and save the best one; 0: no held-out evaluation (default: "
        "50 for adapt, 0 otherwise).",
    ),
]
PatienceOption = Annotated[
    int, typer.Option(min=0, help="Stop after N evaluations without improvement; 0: never.")
]
MaxTokensOption = Annotated[int, typer.Option(min=8, help="Tokens per text / chunk.")]
CheckpointEveryOption = Annotated[int, typer.Option(min=1)]
PositivesOption = Annotated[
    str, typer.Option(help="sdr: positive pairs from the same paragraph or document.")
]
MlmWeightOption = Annotated[
    float, typer.Option(min=0.0, help="sdr: weight of the MLM term; 0 leaves it out.")
]
PairsOption = Annotated[
    str,
    typer.Option(
        help="adapt: positive pairs of neighbours (consecutive sentence windows of a "
        "paragraph), halves (of a section), or query-shaped: opening (a document's opening "
        "against passages of the rest, for judgments) or excerpt (a run of sentences against "
        "the rest, for abstracts)."
    ),
]
TemperatureOption = Annotated[float, typer.Option(min=1e-4, help="adapt: InfoNCE temperature.")]
ViewsOption = Annotated[int, typer.Option(min=2, max=5, help="colde: sections per document.")]
LabelFieldOption = Annotated[
    str | None, typer.Option(help="colde: metadata field with class labels.")
]
EdgesOption = Annotated[str, typer.Option(help="graph: neighbours or full.")]
BregmanWeightOption = Annotated[float, typer.Option(help="bregman: lambda.")]
SubnetworksOption = Annotated[int, typer.Option(min=1, help="bregman: k.")]
SigmaOption = Annotated[float, typer.Option(help="bregman: Gaussian kernel width.")]
MaxMinutesOption = Annotated[
    float | None,
    typer.Option(
        min=0.0,
        help="Stop after this many minutes of training (checkpointed: --resume continues), "
        "keeping the best evaluated model so far.",
    ),
]
ResumeOption = Annotated[bool, typer.Option(help="Continue the checkpoint in --out.")]
ForceOption = Annotated[bool, typer.Option(help="Replace what --out holds.")]
ProgressBarOption = Annotated[bool, typer.Option(help="Show a progress bar.")]


@cli.command()
def train(
    kind: KindArgument,
    corpus: CorpusOption,
    out: OutOption,
    base: BaseOption = "minilm",
    steps: StepsOption = 1000,
    batch_size: BatchSizeOption = 16,
    learning_rate: LearningRateOption = None,
    warmup: WarmupOption = None,
    eval_every: EvalEveryOption = None,
    patience: PatienceOption = 5,
    max_tokens: MaxTokensOption = 128,
    seed: int = 0,
    checkpoint_every: CheckpointEveryOption = 100,
    fmt: FormatOption = CorpusFormat.auto,
    positives: PositivesOption = "paragraph",
    mlm_weight: MlmWeightOption = 1.0,
    pairs: PairsOption = "neighbours",
    temperature: TemperatureOption = 0.05,
    views: ViewsOption = 2,
    label_field: LabelFieldOption = None,
    edges: EdgesOption = "neighbours",
    bregman_weight: BregmanWeightOption = 1.0,
    subnetworks: SubnetworksOption = 8,
    sigma: SigmaOption = 2.0,
    max_minutes: MaxMinutesOption = None,
    resume: ResumeOption = False,
    force: ForceOption = False,
    progress: ProgressBarOption = True,
) -> None:
    """Train an encoder on a corpus; `docsim index --encoder OUT` uses it."""
    from docsim.models.training.loop import TrainConfig

    settings = get_settings()
    per_kind: dict[str, dict[str, Any]] = {
        "sdr": {"positives": positives, "mlm_weight": mlm_weight},
        "adapt": {"pairs": pairs, "temperature": temperature},
        "colde": {"views": views, "use_labels": label_field is not None},
        "graph": {"edges": edges},
        "bregman": {"weight": bregman_weight, "k": subnetworks, "sigma": sigma},
    }
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
        options=per_kind.get(kind, {}),
    )
    result = train_on_corpus(
        config,
        corpus,
        fmt,
        label_field,
        out,
        resume=resume,
        force=force,
        progress=progress,
        max_seconds=None if max_minutes is None else 60 * max_minutes,
    )
    typer.echo(json.dumps(training_summary(kind, out, result)))


def train_on_corpus(
    config: TrainConfig,
    corpus: Path,
    fmt: CorpusFormat,
    label_field: str | None,
    out: Path,
    *,
    resume: bool,
    force: bool,
    progress: bool,
    max_seconds: float | None = None,
) -> TrainResult:
    """Read and split `corpus`, then train `config` on it into `out` (checkpoints, then the
    encoder). A user's error (a bad corpus, option or output folder) or an interrupt ends
    the command with its message."""
    from docsim.indexer.errors import CorpusError
    from docsim.indexer.text.sentences import load_splitter
    from docsim.indexer.train import run_training, training_documents
    from docsim.models.errors import TrainingError
    from docsim.models.inference.precision import resolve_device

    settings = get_settings()
    try:
        if not corpus.exists():
            raise CorpusError(f"corpus path {str(corpus)!r} does not exist")
        docs = training_documents(corpus, fmt, load_splitter(settings.punkt_params), label_field)
        return run_training(
            config.kind,
            docs,
            out,
            config,
            device=resolve_device(settings.encoder.device),
            resume=resume,
            force=force,
            show_progress=progress,
            max_seconds=max_seconds,
        )
    except (TrainingError, CorpusError, ValueError) as error:
        fail(str(error))
    except KeyboardInterrupt:
        fail(
            f"interrupted: `docsim train {config.kind} ... --resume` continues from the checkpoint",
            130,
        )


def training_summary(kind: str, out: Path, result: TrainResult) -> dict[str, Any]:
    """What `docsim train` prints: the run, its loss over the first and the last ten steps,
    and the held-out scores when there were any."""
    first = sum(result.losses[:10]) / max(1, len(result.losses[:10]))
    last = sum(result.losses[-10:]) / max(1, len(result.losses[-10:]))
    return {
        "kind": kind,
        "out": str(out),
        "steps": result.steps,
        "resumed_from": result.resumed_from,
        "seconds": round(result.seconds, 1),
        "loss_first_10": round(first, 4),
        "loss_last_10": round(last, 4),
        **_held_out_summary(result.evaluations, result.best_step, result.stopped_early),
    }


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
