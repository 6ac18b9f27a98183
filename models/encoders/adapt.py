"""Contrastive domain adaptation: the base encoder, its mean pooling unchanged, trained on
positive pairs from the corpus's own structure with in-batch negatives.

A pair is two neighbouring sentence windows of a paragraph, or the two halves of a section
(`models.training.data.document_pairs`); the other pairs of the batch are the negatives
(symmetric InfoNCE, temperature 0.05 as SimCSE's). No batch holds two pairs of one document,
whose texts would be false negatives. There is no MLM term, and no head: the saved encoder is
the backbone with mean pooling, loaded like the base. Dimensions: B pairs, T tokens, H hidden
size.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from docsim.models.encoders.backbone import (
    EncoderOutput,
    load_backbone,
    mean_pooled,
    save_backbone_encoder,
)
from docsim.models.encoders.model_config import ModelConfig
from docsim.models.inference.tokens import TextTokenizer, TokenBatch
from docsim.models.training.data import TrainingDocument, document_pairs, require_documents
from docsim.models.training.losses import in_batch_contrastive_loss

TEMPERATURE = 0.05


@dataclass(frozen=True)
class AdaptConfig(ModelConfig):
    temperature: float = TEMPERATURE  # of the in-batch InfoNCE


@dataclass(frozen=True)
class PairTexts:
    """The pairs a sampler drew, as texts."""

    first: list[str]
    second: list[str]
    doc_ids: list[str]  # the document of each pair, all different


@dataclass(frozen=True)
class PairBatch:
    """B pairs as one token batch: the B first texts, then their B partners."""

    tokens: TokenBatch  # (2B, T)

    def to(self, device: torch.device) -> PairBatch:
        return PairBatch(self.tokens.to(device))


class PairSampler:
    """Draws `batch_size` documents (without replacement), then one pair of each."""

    def __init__(
        self, docs: list[TrainingDocument], batch_size: int, source: str, tokens: TextTokenizer
    ) -> None:
        found = [(d.doc_id, document_pairs(d, source)) for d in docs]
        self.docs = [(doc_id, pairs) for doc_id, pairs in found if pairs]
        require_documents(len(self.docs), batch_size, f"{source} pairs")
        self.batch_size = batch_size
        self.tokens = tokens

    def draw(self, rng: random.Random) -> PairTexts:
        picked = [self.docs[d] for d in rng.sample(range(len(self.docs)), self.batch_size)]
        pairs = [rng.choice(pairs) for _, pairs in picked]
        return PairTexts(
            first=[a for a, _ in pairs],
            second=[b for _, b in pairs],
            doc_ids=[doc_id for doc_id, _ in picked],
        )

    def __call__(self, rng: random.Random) -> PairBatch:
        texts = self.draw(rng)
        return PairBatch(self.tokens(texts.first + texts.second))


class AdaptModel(torch.nn.Module):
    """A backbone with mean pooling; `loss` gives the symmetric in-batch InfoNCE of a batch."""

    def __init__(self, backbone: PreTrainedModel, config: AdaptConfig) -> None:
        super().__init__()
        self.backbone = backbone
        self.config = config

    @classmethod
    def from_base(cls, base: Path, config: AdaptConfig | None = None) -> AdaptModel:
        return cls(load_backbone(base), config or AdaptConfig())

    def forward(self, batch: TokenBatch) -> EncoderOutput:
        return EncoderOutput(mean_pooled(self.backbone, batch))  # (N, H)

    def embed(self, batch: TokenBatch) -> torch.Tensor:
        """`(N, H)` float32 mean-pooled token states (not normalised)."""
        output: EncoderOutput = self(batch)
        return output.embeddings

    def loss(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        pooled = self.embed(batch.tokens)  # (2B, H)
        n = len(pooled) // 2
        return {
            "infonce": in_batch_contrastive_loss(
                pooled[:n], pooled[n:], self.config.temperature, symmetric=True, normalize=True
            )
        }

    def save(
        self, out: Path, tokenizer: PreTrainedTokenizerBase, base: Path, details: dict[str, Any]
    ) -> None:
        save_backbone_encoder(
            self.backbone, tokenizer, out, docsim_type="adapt", base=base, details=details
        )
