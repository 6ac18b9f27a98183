"""The graph-attention document encoder (Xu et al.).

Passages of about 100 words (whole sentences, never across a section) are encoded by the
backbone (mean pooling) and projected to `dim`; a document node starts as their mean. Two
graph-attention layers with two heads and skip connections join the nodes; the document node
is the document's vector. Edges (the paper leaves them open; configurable): `neighbours`
links the document node to every passage and each passage to the next, `full` links all.
Pre-training splits each document's passages into two random disjoint halves and trains the
two sub-document vectors to find each other among the batch (symmetric InfoNCE).

Dimensions: n passages, T tokens, H backbone hidden size, d `dim`, h heads.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from docsim.models.encoders.backbone import load_backbone, load_tokenizer, mean_pooled
from docsim.models.encoders.composite import CompositeModel, composite_identity
from docsim.models.encoders.encoder import DocumentInput, DocumentVectors
from docsim.models.encoders.model_config import ModelConfig
from docsim.models.encoders.pooling import segment_mean
from docsim.models.encoders.transformer import TransformerEncoder
from docsim.models.inference.tokens import TextTokenizer, TokenBatch, module_device
from docsim.models.training.data import TrainingDocument, require_documents
from docsim.models.training.losses import in_batch_contrastive_loss

EDGES = ("neighbours", "full")


@dataclass(frozen=True)
class GraphConfig(ModelConfig):
    dim: int = 256  # passage and document vectors
    layers: int = 2  # graph-attention layers
    heads: int = 2  # per layer
    edges: Literal["neighbours", "full"] = "neighbours"
    max_tokens: int = 160  # per passage, special tokens included
    passage_words: int = 100  # a passage closes once it reaches this many words
    temperature: float = 0.1  # of the sub-document InfoNCE

    def __post_init__(self) -> None:
        if self.edges not in EDGES:
            raise ValueError(f"Invalid edges {self.edges!r}. Valid edges are: {EDGES}.")


def passages(sentences: list[str], words: int = 100) -> list[list[int]]:
    """Group consecutive sentences into passages of about `words` words: a passage closes
    once it reaches `words`. Returns the sentence indices of each passage."""
    out: list[list[int]] = []
    current: list[int] = []
    count = 0
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
        raise ValueError(f"Invalid edges {edges!r}. Valid edges are: {EDGES}.")
    adj = torch.eye(n, dtype=torch.bool)
    adj[0, :] = adj[:, 0] = True
    idx = torch.arange(1, n - 1)
    adj[idx, idx + 1] = adj[idx + 1, idx] = True
    return adj


@dataclass
class GraphAttentionOutput:
    """One graph-attention layer's output over n nodes."""

    states: torch.Tensor  # (n, d)
    weights: torch.Tensor  # (n_i, n_j): node i's attention on node j, mean over heads


class GraphAttentionLayer(torch.nn.Module):
    """Multi-head graph attention (Velickovic et al.) with a residual connection.

    `(n, d)` node states and an `(n, n)` bool adjacency -> `(n, d)` states.
    """

    def __init__(self, dim: int, heads: int = 2) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} is not divisible by the number of heads ({heads})")
        self.heads, self.head_dim = heads, dim // heads
        self.linear = torch.nn.Linear(dim, dim, bias=False)
        self.source = torch.nn.Parameter(torch.randn(heads, self.head_dim) * 0.1)  # (h, d/h)
        self.target = torch.nn.Parameter(torch.randn(heads, self.head_dim) * 0.1)  # (h, d/h)
        self.norm = torch.nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> GraphAttentionOutput:
        n = len(x)
        h = self.linear(x).view(n, self.heads, self.head_dim)  # (n, h, d/h)
        scores = (h * self.source).sum(-1)[:, None, :] + (h * self.target).sum(-1)[None, :, :]
        scores = F.leaky_relu(scores, 0.2)  # (n_i, n_j, h): i attends to j
        scores = scores.masked_fill(~adj[:, :, None], float("-inf"))
        weights = torch.softmax(scores, dim=1)  # (n_i, n_j, h)
        out = torch.einsum("ijh,jhd->ihd", weights, h).reshape(n, -1)  # (n, d)
        return GraphAttentionOutput(self.norm(x + F.elu(out)), weights.mean(-1))


@dataclass
class GraphOutput:
    """The graph over one document's n passages."""

    document: torch.Tensor  # (d,) the document node's final state
    passages: torch.Tensor  # (n, d) the passage nodes' final states


@dataclass(frozen=True)
class SubDocumentBatch:
    """Sub-document pairs: every pair's passages, first halves before second halves."""

    passages: TokenBatch  # (Σn, T): pair 0's first half, its second half, pair 1's, ...
    sizes: list[tuple[int, int]]  # passages in each pair's first and second half

    def to(self, device: torch.device) -> SubDocumentBatch:
        return SubDocumentBatch(self.passages.to(device), self.sizes)


class GraphDocumentModel(CompositeModel[GraphConfig]):
    """Passage encoder (backbone, mean pooling, projection) and the passage graph."""

    docsim_type = "graph"
    config_class = GraphConfig

    def __init__(self, backbone: PreTrainedModel, config: GraphConfig) -> None:
        super().__init__(backbone, config)
        self.projection = torch.nn.Linear(backbone.config.hidden_size, config.dim)
        self.layers = torch.nn.ModuleList(
            GraphAttentionLayer(config.dim, config.heads) for _ in range(config.layers)
        )

    def encode_passages(self, batch: TokenBatch) -> torch.Tensor:
        """`(n, d)` projected passage vectors (not normalised)."""
        projected: torch.Tensor = self.projection(mean_pooled(self.backbone, batch))  # (n, d)
        return projected

    def forward(self, passage_vectors: torch.Tensor) -> GraphOutput:
        """The graph over one document's passages `(n, d)`."""
        x = torch.cat([passage_vectors.mean(0, keepdim=True), passage_vectors])  # (n + 1, d)
        adj = adjacency(len(passage_vectors), self.config.edges).to(x.device)
        for layer in self.layers:
            output: GraphAttentionOutput = layer(x, adj)
            x = output.states
        return GraphOutput(document=x[0], passages=x[1:])

    def loss(self, batch: SubDocumentBatch) -> dict[str, torch.Tensor]:
        vectors = self.encode_passages(batch.passages)  # (Σn, d)
        views_a, views_b, at = [], [], 0
        for first, second in batch.sizes:
            views_a.append(self._document(vectors[at : at + first]))
            at += first
            views_b.append(self._document(vectors[at : at + second]))
            at += second
        return {
            "contrastive": in_batch_contrastive_loss(
                torch.stack(views_a),
                torch.stack(views_b),
                self.config.temperature,
                symmetric=True,
                normalize=True,
            )
        }

    def _document(self, passage_vectors: torch.Tensor) -> torch.Tensor:
        output: GraphOutput = self(passage_vectors)
        return output.document  # (d,)


def from_base(base: Path, config: GraphConfig | None = None) -> GraphDocumentModel:
    """An untrained graph model on the backbone of `base` (a transformer directory)."""
    return GraphDocumentModel(load_backbone(base), config or GraphConfig())


@dataclass
class SubDocumentSampler:
    """Two random disjoint halves of each document's passages (up to `max_passages`)."""

    docs: list[list[str]]  # each document's passage texts
    batch_size: int
    tokens: TextTokenizer
    max_passages: int = 16

    @classmethod
    def from_corpus(
        cls,
        docs: list[TrainingDocument],
        tokens: TextTokenizer,
        batch_size: int,
        words: int,
        max_passages: int,
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
        return cls(texts, batch_size, tokens, max_passages)

    def draw(self, rng: random.Random) -> list[tuple[list[str], list[str]]]:
        """The two halves of each drawn document, as passage texts."""
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

    def __call__(self, rng: random.Random) -> SubDocumentBatch:
        pairs = self.draw(rng)
        texts = [t for first, second in pairs for t in first + second]
        sizes = [(len(first), len(second)) for first, second in pairs]
        return SubDocumentBatch(self.tokens(texts), sizes)


class GraphEncoder:
    """The graph model as an `Encoder`: sentences, paragraphs (mean of sentences) and chunks
    through the passage encoder; sections and the document through the passage graph.

    Args:
        model: the graph model; it moves to `options["device"]`, the graph layers too.
        name: a short name recorded in manifests.
        source_dir: the directory the model was saved in.
        tokenizer: default: the one saved in `source_dir`.
        **options: runtime knobs of the passage encoder (`TransformerEncoder`).
    """

    PASSAGE_BATCH = 32

    def __init__(
        self,
        model: GraphDocumentModel,
        *,
        name: str,
        source_dir: Path,
        tokenizer: PreTrainedTokenizerBase | None = None,
        **options: Any,
    ) -> None:
        tokenizer = tokenizer if tokenizer is not None else load_tokenizer(source_dir)
        self.model = model.to(torch.device(options.get("device", "cpu"))).eval()
        self.source_dir = source_dir
        self.texts = TransformerEncoder(
            model.backbone,
            tokenizer,
            name=name,
            max_length=min(
                model.config.max_tokens, int(model.backbone.config.max_position_embeddings)
            ),
            source_dir=source_dir,
            head=model.projection,
            **options,
        )
        self.passage_tokens = TextTokenizer(tokenizer, model.config.max_tokens)
        self.name, self.dim = name, model.config.dim
        self.load_options: dict[str, Any] | None = None  # set by `load_encoder`
        self._identity: dict[str, Any] | None = None

    @property
    def chunk_capacity(self) -> int:
        return self.texts.chunk_capacity

    def identity(self) -> dict[str, Any]:
        if self._identity is None:
            self._identity = composite_identity(
                self.source_dir, self.name, self.dim, self.texts.max_length
            )
        return dict(self._identity)

    def token_offsets(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        return self.texts.token_offsets(texts)

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        return self.texts.encode(texts)

    def encode_documents(
        self,
        documents: Sequence[DocumentInput],
        sentence_vectors: Sequence[torch.Tensor] | None = None,
    ) -> list[DocumentVectors]:
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
            texts, owners = self._section_passages(doc)
            with torch.inference_mode(), self.texts._autocast():
                graph = self._graph(texts)
            sections = segment_mean(
                graph.passages.float().cpu(), torch.as_tensor(owners), doc.n_sections
            )  # (S, d)
            out.append(
                DocumentVectors(
                    document=F.normalize(graph.document.float().cpu(), dim=-1),
                    sections=F.normalize(sections, dim=-1),
                    paragraphs=paragraphs,
                    sentences=sentences,
                    chunks=chunks,
                )
            )
        return out

    def _section_passages(self, doc: DocumentInput) -> tuple[list[str], list[int]]:
        """A document's passages, none across a section: their texts and sections."""
        section_of = [doc.paragraph_section[p] for p in doc.sentence_paragraph]  # (N,)
        texts, owners = [], []
        for s in range(doc.n_sections):
            members = [i for i, sec in enumerate(section_of) if sec == s]
            words = self.model.config.passage_words
            for group in passages([doc.sentences[i] for i in members], words):
                texts.append(" ".join(doc.sentences[members[i]] for i in group))
                owners.append(s)
        return texts, owners

    def _graph(self, texts: list[str]) -> GraphOutput:
        """The passage graph of one document's passage texts, on the model's device."""
        device = module_device(self.model)
        step = self.PASSAGE_BATCH
        vectors = torch.cat(
            [
                self.model.encode_passages(self.passage_tokens(texts[i : i + step]).to(device))
                for i in range(0, len(texts), step)
            ]
        )  # (n, d)
        output: GraphOutput = self.model(vectors)
        return output
