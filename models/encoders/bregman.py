"""SimCSE + functional Bregman divergence (Saggau et al.).

Two dropout views of each text through the same backbone (mean pooling) give the positive
pairs, the other texts of the batch the negatives (multiple-negatives ranking loss, SimCSE's
temperature 0.05). An ensemble of k small sub-networks maps every pooled vector to k affine
functional values; their max is a convex phi, and the Bregman divergence between views,
through a Gaussian kernel, is trained with NT-Xent (temperature 0.1). The head exists only in
the loss: the saved encoder is the pooled backbone.
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
from docsim.models.training.data import TrainingDocument, require_documents
from docsim.models.training.losses import bregman_loss, in_batch_contrastive_loss

SIMCSE_TEMPERATURE = 0.05
UNITS = ("paragraph", "document")


@dataclass(frozen=True)
class BregmanConfig(ModelConfig):
    k: int = 8  # sub-networks of the head
    hidden: int = 128  # hidden size of each sub-network
    weight: float = 1.0  # of the Bregman term; 0 leaves SimCSE alone
    sigma: float = 2.0  # of the Gaussian kernel


class BregmanHead(torch.nn.Module):
    """k independent two-layer networks `(n, H) -> (n, k)`, batched."""

    def __init__(self, dim: int, k: int = 8, hidden: int = 128) -> None:
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(k, dim, hidden) * dim**-0.5)  # (k, H, h)
        self.b1 = torch.nn.Parameter(torch.zeros(k, hidden))  # (k, h)
        self.w2 = torch.nn.Parameter(torch.randn(k, hidden) * hidden**-0.5)  # (k, h)
        self.b2 = torch.nn.Parameter(torch.zeros(k))  # (k,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.relu(torch.einsum("nd,kdh->nkh", x, self.w1) + self.b1)  # (n, k, h)
        return torch.einsum("nkh,kh->nk", hidden, self.w2) + self.b2  # (n, k)


class TextSampler:
    """One text per document (a random paragraph, or the document's opening), no document
    twice in a batch (a repeated document would be a false negative)."""

    def __init__(
        self, docs: list[TrainingDocument], batch_size: int, unit: str, tokens: TextTokenizer
    ) -> None:
        if unit not in UNITS:
            raise ValueError(f"Invalid unit {unit!r}. Valid units are: {UNITS}.")
        self.units = [
            [" ".join(p) for p in d.paragraphs()] if unit == "paragraph" else [d.text()]
            for d in docs
            if d.sentences()
        ]
        require_documents(len(self.units), batch_size, "SimCSE")
        self.batch_size = batch_size
        self.tokens = tokens

    def draw(self, rng: random.Random) -> list[str]:
        picked = rng.sample(range(len(self.units)), self.batch_size)
        return [rng.choice(self.units[d]) for d in picked]

    def __call__(self, rng: random.Random) -> TokenBatch:
        return self.tokens(self.draw(rng))


class BregmanModel(torch.nn.Module):
    """A backbone with mean pooling and, for the loss only, the Bregman head."""

    def __init__(self, backbone: PreTrainedModel, config: BregmanConfig) -> None:
        super().__init__()
        self.backbone = backbone
        self.config = config
        self.head = BregmanHead(backbone.config.hidden_size, config.k, config.hidden)

    @classmethod
    def from_base(cls, base: Path, config: BregmanConfig | None = None) -> BregmanModel:
        return cls(load_backbone(base), config or BregmanConfig())

    def forward(self, batch: TokenBatch) -> EncoderOutput:
        return EncoderOutput(mean_pooled(self.backbone, batch))  # (N, H)

    def embed(self, batch: TokenBatch) -> torch.Tensor:
        """`(N, H)` float32 mean-pooled token states of the backbone."""
        output: EncoderOutput = self(batch)
        return output.embeddings

    def loss(self, batch: TokenBatch) -> dict[str, torch.Tensor]:
        """SimCSE's two dropout views of each of the N texts of `batch`, and the Bregman term."""
        views = TokenBatch(
            batch.input_ids.repeat(2, 1), batch.attention_mask.repeat(2, 1)
        )  # (2N, T): every text twice, as tokenizing texts + texts gives
        pooled = self.embed(views)  # (2N, H): dropout differs per row, so two views
        n = len(batch.input_ids)
        terms = {
            "mnr": in_batch_contrastive_loss(
                pooled[:n], pooled[n:], SIMCSE_TEMPERATURE, symmetric=False, normalize=True
            )
        }
        if self.config.weight > 0:
            terms["bregman"] = self.config.weight * bregman_loss(
                self.head(pooled), sigma=self.config.sigma
            )
        return terms

    def save(
        self, out: Path, tokenizer: PreTrainedTokenizerBase, base: Path, details: dict[str, Any]
    ) -> None:
        save_backbone_encoder(
            self.backbone, tokenizer, out, docsim_type="bregman", base=base, details=details
        )
