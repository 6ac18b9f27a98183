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

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from models.backbone import load_backbone, load_tokenizer, save_backbone_encoder, tokenize
from models.losses import mlm_loss, sdr_contrastive_loss
from models.pooling import mean_pool
from models.training_data import TrainingDocument, require

INTRA_PROBABILITY = 0.5


@dataclass
class SdrBatch:
    first: list[str]
    second: list[str]
    positive: torch.Tensor  # (B,) bool


class SdrSampler:
    """Draws SDR sentence pairs from a corpus."""

    def __init__(self, docs: list[TrainingDocument], batch_size: int, positives: str) -> None:
        if positives not in ("paragraph", "document"):
            raise ValueError("positives must be 'paragraph' or 'document'")
        self.batch_size = batch_size
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

    def __call__(self, rng: random.Random) -> SdrBatch:
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
        return SdrBatch(first, second, torch.tensor(positive))


def mask_tokens(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    tokenizer: PreTrainedTokenizerBase,
    probability: float = 0.15,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking: 15% of real, non-special tokens are predicted; of those 80% become
    [MASK], 10% a random token, 10% stay. Returns the masked ids and the labels (-100 where
    nothing is predicted). Uses torch's global generator (seeded per step by the trainer)."""
    special = torch.zeros_like(input_ids, dtype=torch.bool)
    for token_id in tokenizer.all_special_ids:
        special |= input_ids == token_id
    candidates = attention_mask.bool() & ~special  # (B, T)
    chosen = (torch.rand(input_ids.shape, device=input_ids.device) < probability) & candidates
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    draw = torch.rand(input_ids.shape, device=input_ids.device)
    masked = input_ids.clone()
    masked[chosen & (draw < 0.8)] = tokenizer.mask_token_id
    swap = chosen & (draw >= 0.8) & (draw < 0.9)
    masked[swap] = torch.randint(len(tokenizer), input_ids.shape, device=input_ids.device)[swap]
    return masked, labels


class SdrModel(torch.nn.Module):
    """A masked-LM backbone; `loss` gives SDR's two terms for a batch of pairs."""

    def __init__(
        self,
        mlm: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        max_tokens: int,
        margin: float = 1.0,
        mlm_weight: float = 1.0,
    ) -> None:
        super().__init__()
        self.mlm = mlm
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.margin = margin
        self.mlm_weight = mlm_weight

    @classmethod
    def from_base(
        cls, base: Path, max_tokens: int, margin: float = 1.0, mlm_weight: float = 1.0
    ) -> SdrModel:
        mlm = load_backbone(base, masked_lm=True)
        return cls(mlm, load_tokenizer(base), max_tokens, margin, mlm_weight)

    def embed(self, texts: list[str]) -> torch.Tensor:
        """`(N, H)` float32 mean-pooled token states of the backbone, on the model's device."""
        inputs = tokenize(self.tokenizer, texts, self.max_tokens, next(self.parameters()).device)
        hidden = self.mlm.base_model(**inputs).last_hidden_state  # (N, T, H)
        return mean_pool(hidden, inputs["attention_mask"])  # (N, H)

    def loss(self, batch: SdrBatch) -> dict[str, torch.Tensor]:
        device = next(self.parameters()).device
        n = len(batch.first)
        positive = batch.positive.to(device)
        if self.mlm_weight == 0:  # no MLM head, no masking
            pooled = self.embed(batch.first + batch.second)  # (2B, H)
            return {
                "contrastive": sdr_contrastive_loss(pooled[:n], pooled[n:], positive, self.margin)
            }
        inputs = tokenize(self.tokenizer, batch.first + batch.second, self.max_tokens, device)
        masked, labels = mask_tokens(inputs["input_ids"], inputs["attention_mask"], self.tokenizer)
        out = self.mlm(
            input_ids=masked, attention_mask=inputs["attention_mask"], output_hidden_states=True
        )
        pooled = mean_pool(out.hidden_states[-1], inputs["attention_mask"])  # (2B, H)
        terms = {"contrastive": sdr_contrastive_loss(pooled[:n], pooled[n:], positive, self.margin)}
        if bool((labels != -100).any()):
            terms["mlm"] = self.mlm_weight * mlm_loss(out.logits.float(), labels)
        return terms

    def save(self, out: Path, base: Path, details: dict) -> None:
        save_backbone_encoder(
            self.mlm.base_model, self.tokenizer, out, docsim_type="sdr", base=base, details=details
        )
