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
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from models.backbone import load_backbone, load_tokenizer, save_backbone_encoder, tokenize
from models.losses import bregman_loss, in_batch_contrastive_loss
from models.pooling import mean_pool
from models.training_data import TrainingDocument, require_documents

SIMCSE_TEMPERATURE = 0.05


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

    def __init__(self, docs: list[TrainingDocument], batch_size: int, unit: str) -> None:
        if unit not in ("paragraph", "document"):
            raise ValueError("unit must be 'paragraph' or 'document'")
        self.units = [
            [" ".join(p) for p in d.paragraphs()] if unit == "paragraph" else [d.text()]
            for d in docs
            if d.sentences()
        ]
        require_documents(len(self.units), batch_size, "SimCSE")
        self.batch_size = batch_size

    def __call__(self, rng: random.Random) -> list[str]:
        picked = rng.sample(range(len(self.units)), self.batch_size)
        return [rng.choice(self.units[d]) for d in picked]


class BregmanModel(torch.nn.Module):
    def __init__(
        self,
        backbone: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        max_tokens: int,
        *,
        k: int = 8,
        weight: float = 1.0,
        sigma: float = 2.0,
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.head = BregmanHead(backbone.config.hidden_size, k)
        self.weight = weight
        self.sigma = sigma

    @classmethod
    def from_base(cls, base: Path, max_tokens: int, **options: float) -> BregmanModel:
        return cls(load_backbone(base), load_tokenizer(base), max_tokens, **options)

    def embed(self, texts: list[str]) -> torch.Tensor:
        """`(N, H)` float32 mean-pooled token states of the backbone, on the model's device."""
        inputs = tokenize(self.tokenizer, texts, self.max_tokens, next(self.parameters()).device)
        hidden = self.backbone(**inputs).last_hidden_state  # (N, T, H)
        return mean_pool(hidden, inputs["attention_mask"])  # (N, H)

    def loss(self, texts: list[str]) -> dict[str, torch.Tensor]:
        device = next(self.parameters()).device
        inputs = tokenize(self.tokenizer, texts + texts, self.max_tokens, device)
        hidden = self.backbone(**inputs).last_hidden_state  # dropout differs per row: 2 views
        pooled = mean_pool(hidden, inputs["attention_mask"])  # (2N, H)
        n = len(texts)
        terms = {
            "mnr": in_batch_contrastive_loss(
                pooled[:n], pooled[n:], SIMCSE_TEMPERATURE, symmetric=False, normalize=True
            )
        }
        if self.weight > 0:
            terms["bregman"] = self.weight * bregman_loss(self.head(pooled), sigma=self.sigma)
        return terms

    def save(self, out: Path, base: Path, details: dict) -> None:
        save_backbone_encoder(
            self.backbone, self.tokenizer, out, docsim_type="bregman", base=base, details=details
        )
