"""CoLDE (Jha et al.): chunk encoder with section and chunk position embeddings, chunkwise
attention across sections, a Bi-LSTM and a 256-d projection, trained with the supervised
contrastive loss (temperature 0.5).

A section is cut into chunks of at most `max_tokens` tokens (`models.encoders.colde.chunks`). Each
chunk's token embeddings get a learned section embedding and chunk embedding added (not
shifted token ids: the backbone still adds its own positions) before the backbone; chunk
vectors are the mean of the token states. Multi-head (4) chunkwise attention takes a
section's chunks as queries and the next section's chunks as keys and values (the last
section looks at the one before; a lone section at itself). A Bi-LSTM runs over each
section's [chunk; attended] sequence; the mean of its states, projected, is the section
vector; the projected states are chunk vectors; the mean of section vectors is the document
vector.

Dimensions: n chunks, T tokens, H backbone hidden size, S sections, C_p chunks in section p,
h LSTM hidden size, D projection (`dim`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PreTrainedModel

from docsim.models.encoders.backbone import load_backbone
from docsim.models.encoders.composite import CompositeModel
from docsim.models.encoders.model_config import ModelConfig
from docsim.models.encoders.pooling import mean_pool
from docsim.models.inference.precision import lstm
from docsim.models.training.losses import supervised_contrastive_loss

# Runs the backbone on `(n, T, H)` input embeddings and the `(n, T)` mask: token states
# `(n, T, H)` (another inference backend than the module itself).
BackboneFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class ColdeConfig(ModelConfig):
    dim: int = 256  # the projection: section, chunk and document vectors
    lstm_hidden: int = 256  # per direction
    heads: int = 4  # of the chunkwise attention; must divide the backbone's hidden size
    max_sections: int = 5  # section embeddings; later sections share the last
    max_chunks: int = 64  # chunk position embeddings, and the most chunks of a section
    max_tokens: int = 256  # per chunk, special tokens included
    temperature: float = 0.5  # of the supervised contrastive loss


@dataclass(frozen=True)
class ChunkBatch:
    """n chunks ready for the backbone, each with its section and its position there."""

    input_ids: torch.Tensor  # (n, T) int64: [CLS] chunk [SEP], then padding
    attention_mask: torch.Tensor  # (n, T) int64
    sections: torch.Tensor  # (n,) int64
    positions: torch.Tensor  # (n,) int64: the chunk's place in its section

    def to(self, device: torch.device) -> ChunkBatch:
        return ChunkBatch(
            self.input_ids.to(device),
            self.attention_mask.to(device),
            self.sections.to(device),
            self.positions.to(device),
        )


@dataclass(frozen=True)
class SectionBatch:
    """A training batch: some sections of each of B documents, and their labels."""

    documents: list[ChunkBatch]  # each document's chunks, section by section
    section_sizes: list[list[int]]  # chunks in each section of each document
    labels: torch.Tensor  # (ΣS,) int64: every section's label (its document's, or class)

    def to(self, device: torch.device) -> SectionBatch:
        return SectionBatch(
            [d.to(device) for d in self.documents], self.section_sizes, self.labels.to(device)
        )


@dataclass
class ColdeOutput:
    """One document's outputs."""

    sections: torch.Tensor  # (S, D)
    chunks: list[torch.Tensor]  # per section (C_p, D)
    attention: list[torch.Tensor]  # per section (C_p, C_q): weights over the keyed section


class ColdeModel(CompositeModel[ColdeConfig]):
    """The CoLDE network over a backbone; it takes token ids (`ChunkBatch`), not texts."""

    docsim_type = "colde"
    config_class = ColdeConfig

    def __init__(self, backbone: PreTrainedModel, config: ColdeConfig) -> None:
        hidden = backbone.config.hidden_size
        if hidden % config.heads:
            raise ValueError(
                f"the backbone's hidden size {hidden} is not divisible by {config.heads}"
            )
        super().__init__(backbone, config)
        self.section_embeddings = torch.nn.Embedding(config.max_sections, hidden)
        self.chunk_embeddings = torch.nn.Embedding(config.max_chunks, hidden)
        for table in (self.section_embeddings, self.chunk_embeddings):
            torch.nn.init.normal_(table.weight, std=0.02)
        self.attention = torch.nn.MultiheadAttention(hidden, config.heads, batch_first=True)
        self.lstm = torch.nn.LSTM(
            2 * hidden, config.lstm_hidden, batch_first=True, bidirectional=True
        )
        self.projection = torch.nn.Linear(2 * config.lstm_hidden, config.dim)

    # --- chunks -----------------------------------------------------------------------------
    def embed_chunks(self, chunks: ChunkBatch) -> torch.Tensor:
        """The backbone's input for chunks: token embeddings plus section and chunk position
        embeddings, `(n, T, H)`."""
        section = chunks.sections.clamp(max=self.config.max_sections - 1)  # (n,)
        position = chunks.positions.clamp(max=self.config.max_chunks - 1)  # (n,)
        embeds: torch.Tensor = self.backbone.get_input_embeddings()(chunks.input_ids)  # (n, T, H)
        added: torch.Tensor = self.section_embeddings(section) + self.chunk_embeddings(position)
        return embeds + added[:, None, :]  # (n, T, H)

    def encode_chunks(self, chunks: ChunkBatch, backbone: BackboneFn | None = None) -> torch.Tensor:
        """`(n, H)` mean-pooled backbone states of chunks. `backbone` (default: the module's
        own) maps `(n, T, H)` embeddings and the `(n, T)` mask to token states."""
        embeds, mask = self.embed_chunks(chunks), chunks.attention_mask
        if backbone is None:
            hidden = self.backbone(inputs_embeds=embeds, attention_mask=mask).last_hidden_state
        else:
            hidden = backbone(embeds, mask).to(mask.device)
        return mean_pool(hidden, mask)  # (n, H)

    # --- sections ---------------------------------------------------------------------------
    def forward(
        self,
        chunks: ChunkBatch,
        section_sizes: Sequence[int],
        backbone: BackboneFn | None = None,
    ) -> ColdeOutput:
        """One document: its chunks, section by section (`section_sizes` chunks each)."""
        vectors = self.encode_chunks(chunks, backbone)  # (ΣC, H)
        return self.sections(list(torch.split(vectors, list(section_sizes))))

    def sections(self, chunk_vectors: list[torch.Tensor]) -> ColdeOutput:
        """From each section's chunk vectors `(C_p, H)` to section, chunk and attention maps."""
        n = len(chunk_vectors)
        section_out, chunk_out, maps = [], [], []
        for p, queries in enumerate(chunk_vectors):
            keyed = (
                chunk_vectors[p + 1] if p + 1 < n else chunk_vectors[p - 1] if n > 1 else queries
            )
            attended, weights = self.attention(
                queries[None],
                keyed[None],
                keyed[None],
                need_weights=True,
                average_attn_weights=True,
            )  # (1, C_p, H), (1, C_p, C_q)
            joined = torch.cat([queries, attended[0]], dim=-1)[None]  # (1, C_p, 2H)
            states, _ = lstm(self.lstm, joined)  # (1, C_p, 2h)
            chunk_out.append(self.projection(states[0]))  # (C_p, D)
            section_out.append(self.projection(states[0].mean(0)))  # (D,)
            maps.append(weights[0])
        return ColdeOutput(torch.stack(section_out), chunk_out, maps)

    def lone_sections(self, chunk_vectors: torch.Tensor) -> torch.Tensor:
        """Section vectors `(B, D)` of B one-section documents with k chunks each, `(B, k, H)`:
        `sections([x]).sections[0]` for every row at once (a lone section looks at itself)."""
        attended, _ = self.attention(
            chunk_vectors, chunk_vectors, chunk_vectors, need_weights=False
        )  # (B, k, H)
        states, _ = lstm(self.lstm, torch.cat([chunk_vectors, attended], dim=-1))  # (B, k, 2h)
        projected: torch.Tensor = self.projection(states.mean(dim=1))  # (B, D)
        return projected

    # --- training ---------------------------------------------------------------------------
    def loss(self, batch: SectionBatch) -> dict[str, torch.Tensor]:
        """The supervised contrastive loss over every section of the batch's documents."""
        views = []
        for chunks, sizes in zip(batch.documents, batch.section_sizes, strict=True):
            output: ColdeOutput = self(chunks, sizes)
            views.append(output.sections)
        z = torch.cat(views)  # (ΣS, D)
        return {"supcon": supervised_contrastive_loss(z, batch.labels, self.config.temperature)}


def from_base(base: Path, config: ColdeConfig | None = None) -> ColdeModel:
    """An untrained CoLDE model on the backbone of `base` (a transformer directory)."""
    return ColdeModel(load_backbone(base), config or ColdeConfig())
