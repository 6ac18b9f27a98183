"""`docsim train`: read and split a corpus, then train one of the encoders on it (the four
papers' recipes, or `adapt`: contrastive domain adaptation of the base encoder)."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from docsim.indexer.choices import CorpusFormat
from docsim.indexer.errors import EmptyDocumentError
from docsim.indexer.text.corpus import Skipped, read_corpus
from docsim.indexer.text.documents import Document
from docsim.indexer.text.sentences import SentenceSplitter
from docsim.indexer.text.split import split_document
from docsim.models.encoders import adapt, bregman, colde, graph, sdr
from docsim.models.encoders.backbone import base_directory, load_tokenizer
from docsim.models.inference.tokens import TextTokenizer
from docsim.models.training.data import TrainingDocument, held_out_split
from docsim.models.training.early_stopping import Evaluation
from docsim.models.training.held_out import HeldOutPairs, held_out_pair_documents
from docsim.models.training.loop import (
    BatchT,
    ModelT,
    TrainConfig,
    TrainingError,
    TrainResult,
    check_output,
    train,
)

logger = logging.getLogger(__name__)

KINDS = ("sdr", "colde", "graph", "bregman", "adapt")
EVALUATED = ("sdr", "bregman", "adapt")  # a pooled backbone: held-out pairs can score it


def training_documents(
    corpus: Path, fmt: CorpusFormat, splitter: SentenceSplitter, label_field: str | None
) -> list[TrainingDocument]:
    docs = []
    for item in read_corpus(corpus, fmt):
        if isinstance(item, Skipped):
            continue
        try:
            doc: Document = split_document(item, splitter)
        except EmptyDocumentError:
            continue
        text = doc.text
        label = item.metadata.get(label_field) if label_field else None
        docs.append(
            TrainingDocument(
                doc_id=doc.doc_id,
                sections=[
                    [[text[s.start : s.end] for s in p.sentences] for p in section.paragraphs]
                    for section in doc.sections
                ],
                label=str(label) if label is not None else None,
                section_titles=[s.title for s in doc.sections],
            )
        )
    if not docs:
        raise TrainingError(f"no usable documents in {str(corpus)!r}")
    return docs


def run_training(
    kind: str,
    docs: list[TrainingDocument],
    out: Path,
    config: TrainConfig,
    *,
    device: Any,
    resume: bool,
    force: bool,
    show_progress: bool = True,
    max_seconds: float | None = None,
) -> TrainResult:
    """Build the model and sampler of `kind` and train it (see `models.training.loop.train`, which
    `max_seconds` bounds).

    With `config.eval_every`, a seeded share of the documents is held out of training, and
    the run keeps the model that best finds each held-out pair's partner (early stopping).
    """
    if kind not in KINDS:
        raise TrainingError(f"unknown encoder kind {kind!r}; choose one of {', '.join(KINDS)}")
    if config.eval_every and kind not in EVALUATED:
        raise TrainingError(
            f"--eval-every applies to {', '.join(EVALUATED)}, not {kind}; use --eval-every 0"
        )
    base = base_directory(config.base)
    check_output(out, kind, resume=resume, force=force)
    tokenizer = load_tokenizer(base)
    options = config.options
    details: dict[str, Any] = {"base": str(config.base), "steps": config.steps}
    evaluate = None
    if config.eval_every:
        docs, held = held_out_split(docs, config.seed)
        pairs, documents = held_out_pair_documents(held, options.get("pairs", "neighbours"))
        evaluate = HeldOutPairs(
            pairs,
            TextTokenizer(tokenizer, config.max_tokens),
            float(options.get("temperature", adapt.TEMPERATURE)),
            documents=documents,
        )
        logger.info("Holding out %d documents (%d pairs) for early stopping", len(held), len(pairs))
        details["held_out_documents"] = len(held)
    details["documents"] = len(docs)
    torch.manual_seed(config.seed)  # new heads start the same in every run of this config
    job = _TrainingJob(
        base=base,
        tokenizer=tokenizer,
        config=config,
        details=details,
        out=out,
        device=device,
        evaluate=evaluate,
        resume=resume,
        show_progress=show_progress,
        max_seconds=max_seconds,
    )
    return RECIPES[kind](docs, job)


@dataclass(frozen=True)
class _TrainingJob:
    """What every recipe shares: the base encoder and its tokenizer, the configuration, the
    details saved with the encoder, and how `models.training.loop.train` runs (the held-out
    evaluation goes to the kinds in `EVALUATED` only)."""

    base: Path
    tokenizer: PreTrainedTokenizerBase
    config: TrainConfig
    details: dict[str, Any]
    out: Path
    device: torch.device
    evaluate: HeldOutPairs | None
    resume: bool
    show_progress: bool
    max_seconds: float | None = None

    @property
    def tokens(self) -> TextTokenizer:
        return TextTokenizer(self.tokenizer, self.config.max_tokens)

    def train(
        self,
        model: ModelT,
        sampler: Callable[[random.Random], BatchT],
        loss: Callable[[ModelT, BatchT], dict[str, torch.Tensor]],
        save: Callable[[ModelT, Path], None],
        evaluate: Callable[[ModelT], Evaluation] | None = None,
    ) -> TrainResult:
        """`models.training.loop.train` on `model`, drawing batches from `sampler`."""
        return train(
            model,
            self.config,
            self.out,
            draw_batch=sampler,
            batch_loss=loss,
            save_encoder=save,
            device=self.device,
            evaluate=evaluate,
            resume=self.resume,
            show_progress=self.show_progress,
            max_seconds=self.max_seconds,
        )


def _train_sdr(docs: list[TrainingDocument], job: _TrainingJob) -> TrainResult:
    options = job.config.options
    positives = options.get("positives", "paragraph")
    sampler = sdr.SdrSampler(docs, job.config.batch_size, positives, job.tokens)
    model = sdr.SdrModel.from_base(
        job.base,
        job.tokenizer,
        sdr.SdrConfig.from_options(options),
    )
    return job.train(
        model,
        sampler,
        sdr.SdrModel.loss,
        lambda m, o: m.save(o, job.tokenizer, job.base, job.details),
        job.evaluate,
    )


def _train_adapt(docs: list[TrainingDocument], job: _TrainingJob) -> TrainResult:
    options = job.config.options
    pairs = options.get("pairs", "neighbours")
    sampler = adapt.PairSampler(docs, job.config.batch_size, pairs, job.tokens)
    model = adapt.AdaptModel.from_base(job.base, adapt.AdaptConfig.from_options(options))
    return job.train(
        model,
        sampler,
        adapt.AdaptModel.loss,
        lambda m, o: m.save(o, job.tokenizer, job.base, job.details),
        job.evaluate,
    )


def _train_bregman(docs: list[TrainingDocument], job: _TrainingJob) -> TrainResult:
    options = job.config.options
    unit = options.get("unit", "paragraph")
    sampler = bregman.TextSampler(docs, job.config.batch_size, unit, job.tokens)
    model = bregman.BregmanModel.from_base(
        job.base,
        bregman.BregmanConfig.from_options(options),
    )
    return job.train(
        model,
        sampler,
        bregman.BregmanModel.loss,
        lambda m, o: m.save(o, job.tokenizer, job.base, job.details),
        job.evaluate,
    )


def _train_graph(docs: list[TrainingDocument], job: _TrainingJob) -> TrainResult:
    options = job.config.options
    model = graph.from_base(
        job.base,
        graph.GraphConfig.from_options(options, max_tokens=job.config.max_tokens),
    )
    sampler = graph.SubDocumentSampler.from_corpus(
        docs,
        job.tokens,
        job.config.batch_size,
        model.config.passage_words,
        int(options.get("max_passages", 16)),
    )
    return job.train(
        model,
        sampler,
        graph.GraphDocumentModel.loss,
        lambda m, o: m.save(o, job.tokenizer, job.details),
    )


def _train_colde(docs: list[TrainingDocument], job: _TrainingJob) -> TrainResult:
    options = job.config.options
    model = colde.from_base(
        job.base,
        colde.ColdeConfig.from_options(options, max_tokens=job.config.max_tokens),
    )
    sampler = colde.SectionSampler.from_corpus(
        docs,
        colde.ChunkTokenizer(job.tokenizer, model.config),
        job.config.batch_size,
        int(options.get("views", 2)),
        use_labels=bool(options.get("use_labels", False)),
    )
    return job.train(
        model,
        sampler,
        colde.ColdeModel.loss,
        lambda m, o: m.save(o, job.tokenizer, job.details),
    )


# Each kind's recipe: its model, batch sampler, loss and saver, trained (the papers' defaults
# where `config.options` gives no value).
RECIPES: dict[str, Callable[[list[TrainingDocument], _TrainingJob], TrainResult]] = {
    "sdr": _train_sdr,
    "adapt": _train_adapt,
    "bregman": _train_bregman,
    "graph": _train_graph,
    "colde": _train_colde,
}
