"""Held-out in-corpus pairs for early stopping: how well an encoder finds each pair's partner.

The pairs come from documents the run never trains on (`held_out_split`), by the same corpus
structure the adapt recipe trains on; no evaluation queries or relevance labels are used.
Dimensions: P pairs, H hidden size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import torch
import torch.nn.functional as F

from docsim.models.inference.tokens import HasParameters, TokenBatch, module_device
from docsim.models.training.data import TrainingDocument, document_pairs, require
from docsim.models.training.early_stopping import Evaluation
from docsim.models.training.losses import in_batch_contrastive_loss

MAX_PAIRS = 500


def held_out_pairs(
    docs: list[TrainingDocument], source: str, max_pairs: int = MAX_PAIRS
) -> list[tuple[str, str]]:
    """Up to `max_pairs` pairs of `docs`, taken round-robin over the documents (each one's
    first pair, then each one's second, ...) so that no long document fills the set."""
    return held_out_pair_documents(docs, source, max_pairs)[0]


def held_out_pair_documents(
    docs: list[TrainingDocument], source: str, max_pairs: int = MAX_PAIRS
) -> tuple[list[tuple[str, str]], list[int]]:
    """`held_out_pairs`, and the position in `docs` of each pair's document."""
    per_doc = [document_pairs(d, source) for d in docs]
    pairs: list[tuple[str, str]] = []
    documents: list[int] = []
    for i in range(max((len(p) for p in per_doc), default=0)):
        for doc, doc_pairs in enumerate(per_doc):
            if i < len(doc_pairs):
                pairs.append(doc_pairs[i])
                documents.append(doc)
    return pairs[:max_pairs], documents[:max_pairs]


def partner_ranks(
    first: torch.Tensor, second: torch.Tensor, documents: torch.Tensor | None = None
) -> torch.Tensor:
    """The rank (1 = best, ties count for the partner) of row i of `second` among all rows of
    `second` by cosine to row i of `first`. With `documents` (each pair's document), the other
    pairs of row i's document are not counted against it: they share its text (an opening,
    most of an abstract), so they are no wrong answers.

    Args:
        first, second: `(P, H)` vectors of each pair's two sides.
        documents: `(P,)` the document of each pair, or None.

    Returns:
        `(P,)` int64 ranks.
    """
    sim = F.normalize(first.float(), dim=-1) @ F.normalize(second.float(), dim=-1).T  # (P, P)
    beats = sim > sim.diagonal()[:, None]  # (P, P)
    if documents is not None:
        beats &= documents[:, None] != documents[None, :]
    return 1 + beats.sum(dim=1)


class PooledModel(HasParameters, Protocol):
    """A module whose `embed` pools token batches into `(N, H)` vectors."""

    def embed(self, batch: TokenBatch) -> torch.Tensor: ...


class HeldOutPairs:
    """Held-out pairs; called on a model, it gives the mean reciprocal rank of each side's
    partner among all held-out partners (both directions; the score early stopping
    maximises; with `documents`, the other pairs of a pair's own document left out of its
    ranking), top-1 accuracy, and the symmetric InfoNCE loss over the whole set at
    `temperature`. `tokens` (a `TextTokenizer`) turns texts into the model's token batches."""

    def __init__(
        self,
        pairs: list[tuple[str, str]],
        tokens: Callable[[Sequence[str]], TokenBatch],
        temperature: float = 0.05,
        batch_size: int = 64,
        documents: list[int] | None = None,
    ) -> None:
        require(
            len(pairs) >= 2,
            f"the held-out documents give {len(pairs)} pairs, too few to evaluate on; "
            "use --eval-every 0 or a corpus with longer documents",
        )
        self.pairs = pairs
        self.documents = None if documents is None else torch.tensor(documents)  # (P,)
        self.tokens = tokens
        self.temperature = temperature
        self.batch_size = batch_size

    def __call__(self, model: PooledModel) -> Evaluation:
        first = self._embed(model, [a for a, _ in self.pairs])  # (P, H)
        second = self._embed(model, [b for _, b in self.pairs])  # (P, H)
        documents = None if self.documents is None else self.documents.to(first.device)
        ranks = torch.cat(
            [partner_ranks(first, second, documents), partner_ranks(second, first, documents)]
        )  # (2P,)
        mrr = float((1.0 / ranks.float()).mean())
        loss = in_batch_contrastive_loss(first, second, self.temperature, normalize=True)
        return Evaluation(
            score=mrr,
            metrics={
                "mrr": mrr,
                "accuracy": float((ranks == 1).float().mean()),
                "loss": float(loss),
            },
        )

    def _embed(self, model: PooledModel, texts: list[str]) -> torch.Tensor:
        device = module_device(model)
        parts = [
            model.embed(self.tokens(texts[i : i + self.batch_size]).to(device)).float()
            for i in range(0, len(texts), self.batch_size)
        ]
        return torch.cat(parts)  # (N, H), on the model's device
