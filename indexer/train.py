"""`docsim train`: read and split a corpus, then train one of the encoders on it (the four
papers' recipes, or `adapt`: contrastive domain adaptation of the base encoder)."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from indexer.text.corpus import CorpusFormat, Skipped, read_corpus
from indexer.text.documents import Document
from indexer.text.sentences import SentenceSplitter
from indexer.text.split import EmptyDocumentError, split_document
from models import adapt, bregman, colde, graph, sdr
from models.backbone import base_directory, load_tokenizer
from models.held_out import HeldOutPairs, held_out_pairs
from models.tokens import TextTokenizer
from models.training import TrainConfig, TrainingError, TrainResult, check_output, train
from models.training_data import TrainingDocument, held_out_split

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
) -> TrainResult:
    """Build the model and sampler of `kind` and train it (see `models.training.train`).

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
        pairs = held_out_pairs(held, options.get("pairs", "neighbours"))
        evaluate = HeldOutPairs(
            pairs,
            TextTokenizer(tokenizer, config.max_tokens),
            float(options.get("temperature", adapt.TEMPERATURE)),
        )
        logger.info("Holding out %d documents (%d pairs) for early stopping", len(held), len(pairs))
        details["held_out_documents"] = len(held)
    details["documents"] = len(docs)
    torch.manual_seed(config.seed)  # new heads start the same in every run of this config
    model, sampler, save = _recipe(kind, docs, base, tokenizer, config, details)
    return train(
        model,
        config,
        out,
        draw_batch=sampler,
        batch_loss=lambda m, batch: m.loss(batch),
        save_encoder=save,
        device=device,
        evaluate=evaluate,
        resume=resume,
        show_progress=show_progress,
    )


def _recipe(
    kind: str,
    docs: list[TrainingDocument],
    base: Path,
    tokenizer: PreTrainedTokenizerBase,
    config: TrainConfig,
    details: dict[str, Any],
) -> tuple[torch.nn.Module, Callable[[random.Random], Any], Callable[[Any, Path], None]]:
    """The model, batch sampler and encoder saver of `kind`; the samplers tokenize."""
    options = config.options
    tokens = TextTokenizer(tokenizer, config.max_tokens)
    save = lambda m, o: m.save(o, tokenizer, base, details)  # noqa: E731
    if kind == "sdr":
        positives = options.get("positives", "paragraph")
        sampler = sdr.SdrSampler(docs, config.batch_size, positives, tokens)
        model = sdr.SdrModel.from_base(
            base,
            tokenizer,
            sdr.SdrConfig(
                margin=options.get("margin", 1.0), mlm_weight=float(options.get("mlm_weight", 1.0))
            ),
        )
    elif kind == "adapt":
        pairs = options.get("pairs", "neighbours")
        sampler = adapt.PairSampler(docs, config.batch_size, pairs, tokens)
        model = adapt.AdaptModel.from_base(
            base, adapt.AdaptConfig(float(options.get("temperature", adapt.TEMPERATURE)))
        )
    elif kind == "bregman":
        unit = options.get("unit", "paragraph")
        sampler = bregman.TextSampler(docs, config.batch_size, unit, tokens)
        model = bregman.BregmanModel.from_base(
            base,
            bregman.BregmanConfig(
                k=int(options.get("k", 8)),
                weight=float(options.get("weight", 1.0)),
                sigma=float(options.get("sigma", 2.0)),
            ),
        )
    elif kind == "graph":
        model = graph.from_base(
            base,
            graph.GraphConfig(
                dim=int(options.get("dim", 256)),
                edges=options.get("edges", "neighbours"),
                max_tokens=config.max_tokens,
                temperature=float(options.get("temperature", 0.1)),
            ),
        )
        sampler = graph.SubDocumentSampler.from_corpus(
            docs,
            tokens,
            config.batch_size,
            model.config.passage_words,
            int(options.get("max_passages", 16)),
        )
        save = lambda m, o: m.save(o, tokenizer, details)  # noqa: E731
    else:
        model = colde.from_base(
            base, colde.ColdeConfig(dim=int(options.get("dim", 256)), max_tokens=config.max_tokens)
        )
        sampler = colde.SectionSampler.from_corpus(
            docs,
            colde.ChunkTokenizer(tokenizer, model.config),
            config.batch_size,
            int(options.get("views", 2)),
            use_labels=bool(options.get("use_labels", False)),
        )
        save = lambda m, o: m.save(o, tokenizer, details)  # noqa: E731
    return model, sampler, save
