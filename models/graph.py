"""The graph-attention document encoder (Xu et al.).

Passages of about 100 words (whole sentences, never across a section) are encoded by the
backbone (mean pooling) and projected to `dim`; a document node starts as their mean. Two
graph-attention layers with two heads and skip connections join the nodes; the document node
is the document's vector. Edges (the paper leaves them open; configurable): `neighbours`
links the document node to every passage and each passage to the next, `full` links all.
Pre-training splits each document's passages into two random disjoint halves and trains the
two sub-document vectors to find each other among the batch (symmetric InfoNCE).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from models.backbone import load_backbone, load_tokenizer, tokenize
from models.losses import in_batch_contrastive_loss
from models.pooling import mean_pool
from models.training_data import TrainingDocument, require_documents


def passages(sentences: list[str], words: int = 100) -> list[list[int]]:
    """Group consecutive sentences into passages of about `words` words: a passage closes
    once it reaches `words`. Returns the sentence indices of each passage."""
    out, current, count = [], [], 0
    for i, sentence in enumerate(sentences):
        current.append(i)
        count += len(sentence.split())
        if count >= words:
            out.append(current)
            current, count = [], 0
    if current:
        out.append(current)
    return out


def adjacency(n_passages: int, edges: str) -> torch.Tensor:
    """`(n + 1, n + 1)` bool: node 0 is the document, 1..n the passages; self loops on."""
    n = n_passages + 1
    if edges == "full":
        return torch.ones(n, n, dtype=torch.bool)
    if edges != "neighbours":
        raise ValueError("edges must be 'neighbours' or 'full'")
    adj = torch.eye(n, dtype=torch.bool)
    adj[0, :] = adj[:, 0] = True
    idx = torch.arange(1, n - 1)
    adj[idx, idx + 1] = adj[idx + 1, idx] = True
    return adj


class GraphAttentionLayer(torch.nn.Module):
    """Multi-head graph attention (Velickovic et al.) with a residual connection.

    `(n, d)` node states and an `(n, n)` bool adjacency -> `(n, d)`.
    """

    def __init__(self, dim: int, heads: int = 2) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError("dim must be divisible by heads")
        self.heads, self.head_dim = heads, dim // heads
        self.linear = torch.nn.Linear(dim, dim, bias=False)
        self.source = torch.nn.Parameter(torch.randn(heads, self.head_dim) * 0.1)  # (h, d/h)
        self.target = torch.nn.Parameter(torch.randn(heads, self.head_dim) * 0.1)  # (h, d/h)
        self.norm = torch.nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = len(x)
        h = self.linear(x).view(n, self.heads, self.head_dim)  # (n, h, d/h)
        scores = (h * self.source).sum(-1)[:, None, :] + (h * self.target).sum(-1)[None, :, :]
        scores = F.leaky_relu(scores, 0.2)  # (n_i, n_j, h): i attends to j
        scores = scores.masked_fill(~adj[:, :, None], float("-inf"))
        weights = torch.softmax(scores, dim=1)  # (n_i, n_j, h)
        out = torch.einsum("ijh,jhd->ihd", weights, h).reshape(n, -1)  # (n, d)
        return self.norm(x + F.elu(out)), weights.mean(-1)


class GraphDocumentModel(torch.nn.Module):
    def __init__(
        self,
        backbone: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        dim: int = 256,
        layers: int = 2,
        heads: int = 2,
        edges: str = "neighbours",
        max_tokens: int = 160,
        passage_words: int = 100,
        temperature: float = 0.1,
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.projection = torch.nn.Linear(backbone.config.hidden_size, dim)
        self.layers = torch.nn.ModuleList(GraphAttentionLayer(dim, heads) for _ in range(layers))
        self.dim, self.edges = dim, edges
        self.max_tokens, self.passage_words, self.temperature = (
            max_tokens,
            passage_words,
            temperature,
        )

    def architecture(self) -> dict:
        return {
            "dim": self.dim,
            "layers": len(self.layers),
            "heads": self.layers[0].heads,
            "edges": self.edges,
            "max_tokens": self.max_tokens,
            "passage_words": self.passage_words,
            "temperature": self.temperature,
        }

    def encode_passages(self, texts: list[str]) -> torch.Tensor:
        """`(n, dim)` projected passage vectors (not normalised)."""
        device = next(self.parameters()).device
        inputs = tokenize(self.tokenizer, texts, self.max_tokens, device)
        hidden = self.backbone(**inputs).last_hidden_state
        return self.projection(mean_pool(hidden, inputs["attention_mask"]))

    def document(self, passage_vectors: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The graph over one document's passages `(n, dim)`: the document vector `(dim,)`
        and the final passage states `(n, dim)`."""
        x = torch.cat([passage_vectors.mean(0, keepdim=True), passage_vectors])  # (n + 1, dim)
        adj = adjacency(len(passage_vectors), self.edges).to(x.device)
        for layer in self.layers:
            x, _ = layer(x, adj)
        return x[0], x[1:]

    def loss(self, batch: list[tuple[list[str], list[str]]]) -> dict[str, torch.Tensor]:
        texts = [t for first, second in batch for t in first + second]
        vectors = self.encode_passages(texts)
        views_a, views_b, at = [], [], 0
        for first, second in batch:
            views_a.append(self.document(vectors[at : at + len(first)])[0])
            at += len(first)
            views_b.append(self.document(vectors[at : at + len(second)])[0])
            at += len(second)
        return {
            "contrastive": in_batch_contrastive_loss(
                torch.stack(views_a),
                torch.stack(views_b),
                self.temperature,
                symmetric=True,
                normalize=True,
            )
        }


@dataclass
class SubDocumentSampler:
    """Two random disjoint halves of each document's passages (up to `max_passages`)."""

    docs: list[list[str]]  # each document's passage texts
    batch_size: int
    max_passages: int = 16

    @classmethod
    def from_corpus(
        cls, docs: list[TrainingDocument], batch_size: int, words: int, max_passages: int
    ) -> SubDocumentSampler:
        texts = []
        for doc in docs:
            doc_passages = []
            for section in doc.sections:
                sentences = [s for p in section for s in p]
                doc_passages += [
                    " ".join(sentences[i] for i in g) for g in passages(sentences, words)
                ]
            if len(doc_passages) >= 2:
                texts.append(doc_passages)
        require_documents(len(texts), batch_size, "sub-document pairs (2+ passages each)")
        return cls(texts, batch_size, max_passages)

    def __call__(self, rng: random.Random) -> list[tuple[list[str], list[str]]]:
        batch = []
        for d in rng.sample(range(len(self.docs)), self.batch_size):
            kept = self.docs[d]
            if len(kept) > self.max_passages:
                start = rng.randrange(len(kept) - self.max_passages + 1)
                kept = kept[start : start + self.max_passages]
            order = list(range(len(kept)))
            rng.shuffle(order)
            half = len(order) // 2
            first = [kept[i] for i in sorted(order[:half])]
            second = [kept[i] for i in sorted(order[half:])]
            batch.append((first, second))
        return batch


def from_base(base: Path, **options) -> GraphDocumentModel:  # noqa: ANN003
    return GraphDocumentModel(load_backbone(base), load_tokenizer(base), **options)


class GraphEncoder:
    """The graph model as an `Encoder`: sentences, paragraphs (mean of sentences) and chunks
    through the passage encoder; sections and the document through the passage graph."""

    def __init__(
        self, model: GraphDocumentModel, *, name: str, source_dir: Path, **options
    ) -> None:  # noqa: ANN003
        from models.transformer import TransformerEncoder

        # the whole model on the device: the graph layers too, not only the backbone and head
        self.model = model.to(torch.device(options.get("device", "cpu"))).eval()
        self.source_dir = source_dir
        self.texts = TransformerEncoder(
            model.backbone,
            model.tokenizer,
            name=name,
            max_length=min(model.max_tokens, int(model.backbone.config.max_position_embeddings)),
            source_dir=source_dir,
            head=model.projection,
            **options,
        )
        self.name, self.dim = name, model.dim
        self._identity = None

    @property
    def chunk_capacity(self) -> int:
        return self.texts.chunk_capacity

    def identity(self) -> dict:
        if self._identity is None:
            from models.composite import composite_identity

            self._identity = composite_identity(
                self.source_dir, self.name, self.dim, self.texts.max_length
            )
        return dict(self._identity)

    def token_offsets(self, texts):  # noqa: ANN001, ANN201
        return self.texts.token_offsets(texts)

    def encode(self, texts):  # noqa: ANN001, ANN201
        return self.texts.encode(texts)

    def encode_documents(self, documents, sentence_vectors=None):  # noqa: ANN001, ANN201
        from models.encoder import DocumentVectors
        from models.pooling import segment_mean

        out = []
        for i, doc in enumerate(documents):
            sentences = (
                self.encode(list(doc.sentences))
                if sentence_vectors is None
                else sentence_vectors[i]
            )  # (N, d)
            paragraphs = segment_mean(
                sentences, torch.as_tensor(doc.sentence_paragraph), doc.n_paragraphs
            )  # (P, d)
            chunks = self.encode(list(doc.chunks))  # (C, d)
            section_of = [doc.paragraph_section[p] for p in doc.sentence_paragraph]  # (N,)
            texts, owners = [], []
            for s in range(doc.n_sections):
                members = [i for i, sec in enumerate(section_of) if sec == s]
                for group in passages(
                    [doc.sentences[i] for i in members], self.model.passage_words
                ):
                    texts.append(" ".join(doc.sentences[members[i]] for i in group))
                    owners.append(s)
            with torch.inference_mode(), self.texts._autocast():
                vectors = torch.cat(
                    [
                        self.model.encode_passages(texts[i : i + 32])
                        for i in range(0, len(texts), 32)
                    ]
                )  # (n, d) on the model's device
                document, states = self.model.document(vectors)
            sections = segment_mean(
                states.float().cpu(), torch.as_tensor(owners), doc.n_sections
            )  # (S, d)
            out.append(
                DocumentVectors(
                    document=F.normalize(document.float().cpu(), dim=-1),
                    sections=F.normalize(sections, dim=-1),
                    paragraphs=paragraphs,
                    sentences=sentences,
                    chunks=chunks,
                )
            )
        return out
