"""Late chunking: every sentence's vector pooled from the token states of the chunk that
holds it, so that one forward pass over the chunks gives both levels and each sentence is
read in its context.

Chunks are packed from whole sentences (a sentence longer than a chunk is cut into windows,
each a chunk of its own), so a sentence's tokens lie in one chunk, or in consecutive windows
that hold nothing else. A chunk's input is its sentences' content token ids, concatenated, with
the model's special tokens around them: the chunk's text, tokenised as its sentences were. A
sentence's vector is the mean of its content tokens' states over every chunk that holds them
(special tokens excluded); a sentence with no content token has none (`covered` says which).

Dimensions: N sentences, C chunks (Σ over a list of documents), B batch, T tokens, H hidden.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from docsim.models.encoders.encoder import DocumentInput
from docsim.models.inference.precision import to_device


@dataclass(frozen=True)
class ChunkTokens:
    """The chunks' content token ids and, per content token, the sentence it belongs to.

    Attributes:
        ids: each chunk's content token ids (no special tokens), in chunk order.
        owners: each chunk's `(len(ids[c]),)` int64 global sentence index per token.
    """

    ids: list[list[int]]
    owners: list[np.ndarray]


def chunk_tokens(
    documents: Sequence[DocumentInput], sentence_ids: Sequence[Sequence[int]]
) -> ChunkTokens:
    """Each chunk's content ids from its sentences' content ids `sentence_ids` (one list per
    sentence of every document, in order, no special tokens, not truncated).

    A chunk over one sentence takes that sentence's next `chunk_tokens[c]` ids (the whole
    sentence, or its next window); a chunk over several takes them whole.

    Raises:
        ValueError: a document without `chunk_sentences`, a chunk whose ids do not add up
            to its `chunk_tokens`, or a sentence whose ids are not all in chunks (its
            sentences were tokenised differently).
    """
    ids: list[list[int]] = []
    owners: list[np.ndarray] = []
    first = 0  # global index of the document's first sentence
    for doc in documents:
        if len(doc.chunk_sentences) != len(doc.chunks):
            raise ValueError("late chunking needs each chunk's sentences (chunk_sentences)")
        taken = [0] * len(doc.sentences)  # ids of each sentence already in a chunk
        for c, (a, b) in enumerate(doc.chunk_sentences):
            pieces: list[int] = []
            owner: list[int] = []
            for s in range(a, b):
                whole = sentence_ids[first + s]
                stop = taken[s] + doc.chunk_tokens[c] if b - a == 1 else len(whole)
                piece = whole[taken[s] : stop]
                taken[s] += len(piece)
                pieces.extend(piece)
                owner.extend([first + s] * len(piece))
            if len(pieces) != doc.chunk_tokens[c]:
                raise ValueError(
                    f"chunk {c} holds {len(pieces)} tokens of its sentences, "
                    f"not {doc.chunk_tokens[c]}: the sentences were tokenised differently"
                )
            ids.append(pieces)
            owners.append(np.asarray(owner, dtype=np.int64))
        left = [s for s, n in enumerate(taken) if n != len(sentence_ids[first + s])]
        if left:
            raise ValueError(
                f"sentence {left[0]}'s tokens are not all in its chunks: the sentences were "
                "tokenised differently"
            )
        first += len(doc.sentences)
    return ChunkTokens(ids, owners)


def token_owners(owners: Sequence[np.ndarray], prefix: int, length: int) -> torch.Tensor:
    """`(B, T)` int64: the sentence of every position of a padded batch of chunks whose
    content tokens follow `prefix` special tokens; -1 for special tokens and padding."""
    out = torch.full((len(owners), length), -1, dtype=torch.long)
    for i, owner in enumerate(owners):
        out[i, prefix : prefix + len(owner)] = torch.from_numpy(owner)
    return out


def add_token_states(
    sums: torch.Tensor,
    counts: torch.Tensor,
    hidden: torch.Tensor,
    owner: torch.Tensor,
    *,
    by_runs: bool | None = None,
) -> None:
    """Add a batch's token states `hidden` `(B, T, H)` into their sentences' `sums` `(N, H)`
    and `counts` `(N,)`, by `owner` `(B, T)` (-1: no sentence), in place.

    `by_runs` (the default where `sums` are on the CPU): a chunk's tokens come in runs of one
    sentence each, and every run is summed at once on the host (a segmented sum over
    contiguous rows), then added to its sentence. Otherwise every position is added where
    `sums` are (`index_add_`), special tokens and padding as zeros (to sentence 0): on
    a GPU the states then never cross to the host (for AILA 12.6M tokens of 384 floats,
    19 GB), and nothing waits for the GPU, as selecting the kept tokens would."""
    if not (sums.device.type == "cpu" if by_runs is None else by_runs):
        flat = to_device(owner, sums.device).reshape(-1)  # (B*T,)
        kept = flat >= 0  # (B*T,) False for special tokens and padding
        rows = flat.clamp(min=0)  # (B*T,)
        states = hidden.reshape(-1, hidden.shape[-1]).to(sums.dtype)  # (B*T, H)
        sums.index_add_(0, rows, torch.where(kept[:, None], states, 0.0))
        counts.index_add_(0, rows, kept.to(counts.dtype))
        return
    kept = (owner >= 0).reshape(-1)  # (B*T,)
    rows = owner.reshape(-1)[kept]  # (K,)
    if not len(rows):
        return
    states = hidden.reshape(-1, hidden.shape[-1])[kept.to(hidden.device)]
    states = states.to(torch.float32).cpu()  # (K, H)
    starts = torch.ones(len(rows), dtype=torch.bool)
    starts[1:] = rows[1:] != rows[:-1]
    first = torch.nonzero(starts).flatten()  # (R,) each run's first row
    run_sums = np.add.reduceat(states.numpy(), first.numpy(), axis=0)  # (R, H)
    lengths = torch.diff(first, append=torch.tensor([len(rows)]))  # (R,)
    sums.index_add_(0, rows[first], torch.from_numpy(run_sums).to(sums.dtype))
    counts.index_add_(0, rows[first], lengths.to(counts.dtype))


def sentence_means(sums: torch.Tensor, counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`(N, H)` each sentence's mean token state, and `(N,)` bool whether it had any token."""
    covered = counts > 0
    return sums / counts.clamp(min=1.0)[:, None], covered
