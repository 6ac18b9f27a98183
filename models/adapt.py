"""Contrastive domain adaptation: the base encoder, its mean pooling unchanged, trained on
positive pairs from the corpus's own structure with in-batch negatives.

A pair is two neighbouring sentence windows of a paragraph, or the two halves of a section
(`models.training_data.document_pairs`); the other pairs of the batch are the negatives
(symmetric InfoNCE, temperature 0.05 as SimCSE's). No batch holds two pairs of one document,
whose texts would be false negatives. There is no MLM term, and no head: the saved encoder is
the backbone with mean pooling, loaded like the base. Dimensions: B pairs, H hidden size.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from models.backbone import load_backbone, load_tokenizer, save_backbone_encoder, tokenize
from models.losses import in_batch_contrastive_loss
from models.pooling import mean_pool
from models.training_data import TrainingDocument, document_pairs, require_documents

TEMPERATURE = 0.05


@dataclass
class PairBatch:
    first: list[str]
    second: list[str]
    doc_ids: list[str]  # the document of each pair, all different


class PairSampler:
    """Draws `batch_size` documents (without replacement), then one pair of each."""

    def __init__(self, docs: list[TrainingDocument], batch_size: int, source: str) -> None:
        found = [(d.doc_id, document_pairs(d, source)) for d in docs]
        self.docs = [(doc_id, pairs) for doc_id, pairs in found if pairs]
        require_documents(len(self.docs), batch_size, f"{source} pairs")
        self.batch_size = batch_size

    def __call__(self, rng: random.Random) -> PairBatch:
        picked = [self.docs[d] for d in rng.sample(range(len(self.docs)), self.batch_size)]
        pairs = [rng.choice(pairs) for _, pairs in picked]
        return PairBatch(
            first=[a for a, _ in pairs],
            second=[b for _, b in pairs],
            doc_ids=[doc_id for doc_id, _ in picked],
        )


class AdaptModel(torch.nn.Module):
    """A backbone with mean pooling; `loss` gives the symmetric in-batch InfoNCE of a batch."""

    def __init__(
        self,
        backbone: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        max_tokens: int,
        temperature: float = TEMPERATURE,
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.temperature = temperature

    @classmethod
    def from_base(cls, base: Path, max_tokens: int, temperature: float = TEMPERATURE) -> AdaptModel:
        return cls(load_backbone(base), load_tokenizer(base), max_tokens, temperature)

    def embed(self, texts: list[str]) -> torch.Tensor:
        """`(N, H)` float32 mean-pooled token states, on the model's device (not normalised)."""
        device = next(self.parameters()).device
        inputs = tokenize(self.tokenizer, texts, self.max_tokens, device)
        hidden = self.backbone(**inputs).last_hidden_state  # (N, T, H)
        return mean_pool(hidden, inputs["attention_mask"])  # (N, H)

    def loss(self, batch: PairBatch) -> dict[str, torch.Tensor]:
        pooled = self.embed(batch.first + batch.second)  # (2B, H)
        n = len(batch.first)
        return {
            "infonce": in_batch_contrastive_loss(
                pooled[:n], pooled[n:], self.temperature, symmetric=True, normalize=True
            )
        }

    def save(self, out: Path, base: Path, details: dict) -> None:
        save_backbone_encoder(
            self.backbone, self.tokenizer, out, docsim_type="adapt", base=base, details=details
        )
