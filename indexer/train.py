"""`docsim train`: read and split a corpus, then train one of the four encoders on it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

from indexer.text.corpus import CorpusFormat, Skipped, read_corpus
from indexer.text.documents import Document
from indexer.text.sentences import SentenceSplitter
from indexer.text.split import EmptyDocumentError, split_document
from models import bregman, colde, graph, sdr
from models.backbone import base_directory
from models.composite import save_composite
from models.training import TrainConfig, TrainingError, TrainResult, check_output, train
from models.training_data import TrainingDocument

logger = logging.getLogger(__name__)

KINDS = ("sdr", "colde", "graph", "bregman")


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
    """Build the model and sampler of `kind` and train it (see `models.training.train`)."""
    if kind not in KINDS:
        raise TrainingError(f"unknown encoder kind {kind!r}; choose one of {', '.join(KINDS)}")
    base = base_directory(config.base)
    check_output(out, kind, resume=resume, force=force)
    options = config.options
    torch.manual_seed(config.seed)  # new heads start the same in every run of this config
    details = {"base": str(config.base), "steps": config.steps, "documents": len(docs)}
    if kind == "sdr":
        sampler = sdr.SdrSampler(docs, config.batch_size, options.get("positives", "paragraph"))
        model = sdr.SdrModel.from_base(base, config.max_tokens, options.get("margin", 1.0))
        save = lambda m, o: m.save(o, base, details)  # noqa: E731
    elif kind == "bregman":
        sampler = bregman.TextSampler(docs, config.batch_size, options.get("unit", "paragraph"))
        model = bregman.BregmanModel.from_base(
            base,
            config.max_tokens,
            k=int(options.get("k", 8)),
            weight=float(options.get("weight", 1.0)),
            sigma=float(options.get("sigma", 2.0)),
        )
        save = lambda m, o: m.save(o, base, details)  # noqa: E731
    elif kind == "graph":
        model = graph.from_base(
            base,
            dim=int(options.get("dim", 256)),
            edges=options.get("edges", "neighbours"),
            max_tokens=config.max_tokens,
            temperature=float(options.get("temperature", 0.1)),
        )
        sampler = graph.SubDocumentSampler.from_corpus(
            docs, config.batch_size, model.passage_words, int(options.get("max_passages", 16))
        )
        save = _composite_saver("graph", details)
    else:
        model = colde.from_base(
            base, dim=int(options.get("dim", 256)), max_tokens=config.max_tokens
        )
        sampler = colde.SectionSampler.from_corpus(
            docs,
            config.batch_size,
            int(options.get("views", 2)),
            use_labels=bool(options.get("use_labels", False)),
        )
        save = _composite_saver("colde", details)
    return train(
        model,
        config,
        out,
        draw_batch=sampler,
        batch_loss=lambda m, batch: m.loss(batch),
        save_encoder=save,
        device=device,
        resume=resume,
        show_progress=show_progress,
    )


def _composite_saver(kind: str, details: dict[str, Any]):  # noqa: ANN202
    def save(model, out: Path) -> None:  # noqa: ANN001
        save_composite(
            model,
            model.tokenizer,
            out,
            docsim_type=kind,
            architecture=model.architecture(),
            details=details,
        )

    return save
