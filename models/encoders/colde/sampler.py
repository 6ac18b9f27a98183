"""CoLDE's training batches: sections of documents, labelled by document (self-supervised)
or by class, chunked and tokenized for the model."""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from docsim.models.encoders.colde.chunks import ChunkTokenizer
from docsim.models.encoders.colde.model import ChunkBatch, SectionBatch
from docsim.models.training.data import TrainingDocument, require_documents

TRAIN_CHUNKS = 4  # chunks per section while training (CPU budget); inference uses all


@dataclass
class SectionSampler:
    """Two (up to `views`) sections of each document; a one-section document is cut in half
    at a paragraph boundary. Labels: the document (self-supervised) or its class."""

    docs: list[list[str]]  # each document's section texts
    labels: list[int]
    batch_size: int
    chunker: ChunkTokenizer
    views: int = 2

    @classmethod
    def from_corpus(
        cls,
        docs: list[TrainingDocument],
        chunker: ChunkTokenizer,
        batch_size: int,
        views: int,
        use_labels: bool,
    ) -> SectionSampler:
        texts, labels = [], []
        classes: dict[str, int] = {}
        for i, doc in enumerate(docs):
            sections = [t for t in doc.section_texts() if t.strip()]
            if len(sections) < 2:
                paragraphs = [" ".join(p) for p in doc.paragraphs()]
                if len(paragraphs) < 2:
                    continue
                half = len(paragraphs) // 2
                sections = [" ".join(paragraphs[:half]), " ".join(paragraphs[half:])]
            texts.append(sections)
            key = doc.label if use_labels and doc.label is not None else f"doc:{i}"
            labels.append(classes.setdefault(key, len(classes)))
        require_documents(len(texts), batch_size, "CoLDE (two sections or paragraphs each)")
        return cls(texts, labels, batch_size, chunker, views)

    def draw(self, rng: random.Random) -> list[tuple[list[str], int]]:
        """The section texts of each drawn document (in document order), and its label."""
        batch = []
        for d in rng.sample(range(len(self.docs)), self.batch_size):
            sections = self.docs[d]
            k = min(self.views, len(sections))
            picked = sorted(rng.sample(range(len(sections)), k))
            batch.append(([sections[i] for i in picked], self.labels[d]))
        return batch

    def __call__(self, rng: random.Random) -> SectionBatch:
        documents, sizes, labels = [], [], []
        for texts, label in self.draw(rng):
            chunks, section_sizes = self._document(texts)
            documents.append(chunks)
            sizes.append(section_sizes)
            labels += [label] * len(texts)
        return SectionBatch(documents, sizes, torch.tensor(labels))

    def _document(self, texts: list[str]) -> tuple[ChunkBatch, list[int]]:
        """One document's sections as chunks (`TRAIN_CHUNKS` at most each), and their counts."""
        ids: list[list[int]] = []
        sections: list[int] = []
        positions: list[int] = []
        sizes = []
        for p, text in enumerate(texts):
            chunks = self.chunker.section_chunks(text, TRAIN_CHUNKS)
            ids += chunks
            sections += [p] * len(chunks)
            positions += list(range(len(chunks)))
            sizes.append(len(chunks))
        return self.chunker.batch(ids, sections, positions), sizes
