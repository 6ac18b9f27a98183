"""CoLDE (Jha et al.): the model (`model`), its tokenizer side (`chunks`), its training
batches (`sampler`) and its `Encoder` wrapper (`encoder`)."""

from __future__ import annotations

from docsim.models.encoders.colde.chunks import ChunkTokenizer, with_special_tokens
from docsim.models.encoders.colde.encoder import ColdeEncoder, normalized
from docsim.models.encoders.colde.model import (
    ChunkBatch,
    ColdeConfig,
    ColdeModel,
    ColdeOutput,
    SectionBatch,
    from_base,
)
from docsim.models.encoders.colde.sampler import TRAIN_CHUNKS, SectionSampler

__all__ = [
    "TRAIN_CHUNKS",
    "ChunkBatch",
    "ChunkTokenizer",
    "ColdeConfig",
    "ColdeEncoder",
    "ColdeModel",
    "ColdeOutput",
    "SectionBatch",
    "SectionSampler",
    "from_base",
    "normalized",
    "with_special_tokens",
]
