"""SDR (Ginzburg et al.): a backbone trained with MLM plus a margin contrastive loss on
sentence pairs; at inference the backbone with mean pooling is the sentence encoder.

Pairs come from the same paragraph (or, with `positives="document"`, the same document) with
probability 0.5, otherwise one sentence from each of two different documents; the paper says
paragraph, its public code used document, hence the option. Both losses come from one forward
pass of the masked pair (as in RoBERTa-style MLM), pooled over each sentence's own tokens.
`mlm_weight` scales the MLM term; at 0 there is no MLM term and no masking: the contrastive
loss then sees the sentences as they are.
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
from docsim.models.encoders.pooling import mean_pool
from docsim.models.inference.tokens import TextTokenizer, TokenBatch
from docsim.models.training.data import TrainingDocument, require
from docsim.models.training.losses import mlm_loss, sdr_contrastive_loss

INTRA_PROBABILITY = 0.5
POSITIVES = ("paragraph", "document")


@dataclass(frozen=True)
class SdrConfig(ModelConfig):
    margin: float = 1.0  # of the contrastive term
    mlm_weight: float = 1.0  # 0: no MLM term and no masking


@dataclass(frozen=True)
class MaskTokens:
    """The token ids BERT masking needs, read once from the tokenizer."""

    mask_token_id: int | None
    special_ids: tuple[int, ...]  # never masked
    vocab_size: int  # random replacements are drawn from [0, vocab_size)

    @classmethod
    def of(cls, tokenizer: PreTrainedTokenizerBase) -> MaskTokens:
        return cls(tokenizer.mask_token_id, tuple(tokenizer.all_special_ids), len(tokenizer))


@dataclass(frozen=True)
class SdrPairs:
    """The sentence pairs a sampler drew, as texts."""

    first: list[str]
    second: list[str]
    positive: list[bool]


@dataclass(frozen=True)
class SdrBatch:
    """B sentence pairs as one token batch: the B first sentences, then the B second ones."""

    tokens: TokenBatch  # (2B, T)
    positive: torch.Tensor  # (B,) bool

    def to(self, device: torch.device) -> SdrBatch:
        return SdrBatch(self.tokens.to(device), self.positive.to(device))


class SdrSampler:
    """Draws SDR sentence pairs from a corpus."""

    def __init__(
        self,
        docs: list[TrainingDocument],
        batch_size: int,
        positives: str,
        tokens: TextTokenizer,
    ) -> None:
        if positives not in POSITIVES:
            raise ValueError(f"Invalid positives {positives!r}. Valid values are: {POSITIVES}.")
        self.batch_size = batch_size
        self.tokens = tokens
        self.docs = [d.sentences() for d in docs if d.sentences()]
        units = (
            [p for d in docs for p in d.paragraphs()]
            if positives == "paragraph"
            else [d.sentences() for d in docs]
        )
        self.units = [u for u in units if len(u) >= 2]
        require(len(self.docs) >= 2, "SDR needs at least 2 documents with sentences")
        require(
            bool(self.units),
            f"no {positives} has two sentences, so there are no positive pairs; "
            "use --positives document or a corpus with longer paragraphs",
        )

    def draw(self, rng: random.Random) -> SdrPairs:
        first, second, positive = [], [], []
        for _ in range(self.batch_size):
            if rng.random() < INTRA_PROBABILITY:
                a, b = rng.sample(rng.choice(self.units), 2)
                positive.append(True)
            else:
                d1, d2 = rng.sample(range(len(self.docs)), 2)
                a, b = rng.choice(self.docs[d1]), rng.choice(self.docs[d2])
                positive.append(False)
            first.append(a)
            second.append(b)
        return SdrPairs(first, second, positive)

    def __call__(self, rng: random.Random) -> SdrBatch:
        pairs = self.draw(rng)
        return SdrBatch(self.tokens(pairs.first + pairs.second), torch.tensor(pairs.positive))


def mask_tokens(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    tokens: MaskTokens,
    probability: float = 0.15,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking: 15% of real, non-special tokens are predicted; of those 80% become
    [MASK], 10% a random token, 10% stay. Returns the masked ids and the labels (-100 where
    nothing is predicted), both `(B, T)`. Uses torch's global generator on the ids' device
    (seeded per step by the trainer).

    Raises:
        ValueError: the tokenizer has no mask token.
    """
    if tokens.mask_token_id is None:
        raise ValueError("SDR's MLM term needs a tokenizer with a mask token; use mlm_weight 0")
    special = torch.zeros_like(input_ids, dtype=torch.bool)
    for token_id in tokens.special_ids:
        special |= input_ids == token_id
    candidates = attention_mask.bool() & ~special  # (B, T)
    chosen = (torch.rand(input_ids.shape, device=input_ids.device) < probability) & candidates
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    draw = torch.rand(input_ids.shape, device=input_ids.device)
    masked = input_ids.clone()
    masked[chosen & (draw < 0.8)] = tokens.mask_token_id
    swap = chosen & (draw >= 0.8) & (draw < 0.9)
    masked[swap] = torch.randint(tokens.vocab_size, input_ids.shape, device=input_ids.device)[swap]
    return masked, labels


class SdrModel(torch.nn.Module):
    """A masked-LM backbone; `loss` gives SDR's two terms for a batch of pairs."""

    def __init__(self, mlm: PreTrainedModel, masking: MaskTokens, config: SdrConfig) -> None:
        super().__init__()
        self.mlm = mlm
        self.masking = masking
        self.config = config

    @classmethod
    def from_base(
        cls, base: Path, tokenizer: PreTrainedTokenizerBase, config: SdrConfig | None = None
    ) -> SdrModel:
        """The base with a masked-LM head (a missing head starts random); `tokenizer` is the
        base's, for the ids masking uses."""
        mlm = load_backbone(base, masked_lm=True)
        return cls(mlm, MaskTokens.of(tokenizer), config or SdrConfig())

    @property
    def backbone(self) -> PreTrainedModel:
        """The encoder under the MLM head: what the saved SDR encoder is."""
        base = self.mlm.base_model
        if not isinstance(base, PreTrainedModel):
            raise TypeError(f"the MLM model's base is a {type(base).__name__}, not a model")
        return base

    def forward(self, batch: TokenBatch) -> EncoderOutput:
        return EncoderOutput(mean_pooled(self.mlm.base_model, batch))  # (N, H)

    def embed(self, batch: TokenBatch) -> torch.Tensor:
        """`(N, H)` float32 mean-pooled token states of the backbone."""
        output: EncoderOutput = self(batch)
        return output.embeddings

    def loss(self, batch: SdrBatch) -> dict[str, torch.Tensor]:
        n = len(batch.positive)
        margin = self.config.margin
        if self.config.mlm_weight == 0:  # no MLM head, no masking
            pooled = self.embed(batch.tokens)  # (2B, H)
            return {
                "contrastive": sdr_contrastive_loss(pooled[:n], pooled[n:], batch.positive, margin)
            }
        mask = batch.tokens.attention_mask
        masked, labels = mask_tokens(batch.tokens.input_ids, mask, self.masking)
        out = self.mlm(input_ids=masked, attention_mask=mask, output_hidden_states=True)
        pooled = mean_pool(out.hidden_states[-1], mask)  # (2B, H)
        terms = {
            "contrastive": sdr_contrastive_loss(pooled[:n], pooled[n:], batch.positive, margin)
        }
        if bool((labels != -100).any()):
            terms["mlm"] = self.config.mlm_weight * mlm_loss(out.logits.float(), labels)
        return terms

    def save(
        self, out: Path, tokenizer: PreTrainedTokenizerBase, base: Path, details: dict[str, Any]
    ) -> None:
        save_backbone_encoder(
            self.backbone, tokenizer, out, docsim_type="sdr", base=base, details=details
        )
