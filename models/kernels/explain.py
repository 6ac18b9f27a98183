"""The similarity maps behind an explanation of one source/target pair, as pure tensor code.

CoLDE (Jha et al., section 4.3) explains a pair by cosine maps at section and chunk level;
SDR (Ginzburg et al., section 3.3) by its paragraph matrix and, behind each cell, the sentence
pairs whose best matches make it up. Dimensions: n source sentences in I paragraphs, N target
sentences in J paragraphs, d vector size. Vectors are unit-normalised, so cosine = dot product.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from docsim.models.kernels.scoring import (
    RaggedCollection,
    RowStats,
    normalize_rows,
    paragraph_similarity,
    paragraph_weights,
    weighted_mean,
)


def cosine_matrix(source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """`(m, n)` cosines of unit vectors `(m, d)` and `(n, d)`."""
    return source @ target.T


@dataclass(frozen=True)
class PairAlignment:
    """SDR's view of one pair.

    Attributes:
        paragraphs: `(I, J)` raw paragraph matrix P.
        normalized: `(I, J)` z-scored with the given statistics (P itself when there are none).
        best_paragraph: `(I,)` each source paragraph's best target paragraph (argmax of its row).
        score: the document score, mean over i of max over j of `normalized`.
        sentence_target: `(n,)` for each source sentence, its best target sentence (a document
            position) inside the best target paragraph of the sentence's paragraph.
        sentence_score: `(n,)` the cosine of that sentence pair.
    """

    paragraphs: torch.Tensor
    normalized: torch.Tensor
    best_paragraph: torch.Tensor
    score: float
    sentence_target: torch.Tensor
    sentence_score: torch.Tensor


def align_pair(
    source: torch.Tensor,
    source_paragraph_lengths: torch.Tensor,
    target: torch.Tensor,
    target_paragraph_lengths: torch.Tensor,
    stats: RowStats | None,
    weights: torch.Tensor | None = None,
) -> PairAlignment:
    """The paragraph matrix of a pair, its document score and its sentence alignments.

    Args:
        source: `(n, d)` source sentence vectors, paragraph by paragraph.
        source_paragraph_lengths: `(I,)` sentences per source paragraph.
        target: `(N, d)` target sentence vectors, paragraph by paragraph.
        target_paragraph_lengths: `(J,)` sentences per target paragraph.
        stats: the per-source-paragraph statistics the ranking used, or None (no z-score).
        weights: `(n,)` how much each source sentence counted in the ranking (None: the same).
    """
    collection = RaggedCollection(
        sentences=target,
        paragraph_lengths=target_paragraph_lengths,
        document_lengths=torch.tensor([len(target_paragraph_lengths)]),
    )
    raw = paragraph_similarity(
        source, source_paragraph_lengths, collection, weights=weights
    )  # (I, J)
    normalized = normalize_rows(raw, stats) if stats is not None else raw  # (I, J)
    best_value, best_paragraph = normalized.max(dim=1)  # (I,), (I,)
    # each source paragraph's sentences against those of its best target paragraph
    target_start = (torch.cumsum(target_paragraph_lengths, 0) - target_paragraph_lengths).tolist()
    sentence_target = torch.empty(len(source), dtype=torch.long)  # (n,)
    sentence_score = torch.empty(len(source), dtype=source.dtype)  # (n,)
    s0 = 0
    for i, k in enumerate(source_paragraph_lengths.tolist()):
        j = int(best_paragraph[i])
        t0 = target_start[j]
        sims = source[s0 : s0 + k] @ target[t0 : t0 + int(target_paragraph_lengths[j])].T  # (k, r)
        score, at = sims.max(dim=1)  # (k,)
        sentence_score[s0 : s0 + k] = score
        sentence_target[s0 : s0 + k] = at + t0
        s0 += k
    return PairAlignment(
        paragraphs=raw,
        normalized=normalized,
        best_paragraph=best_paragraph,
        score=float(
            weighted_mean(best_value[None, :], paragraph_weights(source_paragraph_lengths, weights))
        ),
        sentence_target=sentence_target,
        sentence_score=sentence_score,
    )


@dataclass(frozen=True)
class Grid:
    """A matrix shrunk for display: each cell is the max of a block of the original.

    Attributes:
        values: `(r, c)` block maxima.
        block_rows, block_columns: the block size (1, 1 when nothing was pooled).
        rows, columns: `(r, c)` row and column in the original matrix of each block's max.
    """

    values: torch.Tensor
    block_rows: int
    block_columns: int
    rows: torch.Tensor
    columns: torch.Tensor

    @property
    def pooled(self) -> bool:
        return self.block_rows > 1 or self.block_columns > 1


def display_grid(matrix: torch.Tensor, max_rows: int, max_columns: int) -> Grid:
    """Max-pool `(m, n)` into at most `(max_rows, max_columns)` blocks, keeping where each
    block's maximum sits so that a click on a block can open the best pair inside it."""
    m, n = matrix.shape
    block_rows = -(-m // max_rows) if m > max_rows else 1
    block_columns = -(-n // max_columns) if n > max_columns else 1
    if m == 0 or n == 0:
        empty = torch.zeros(m, n, dtype=torch.long)
        return Grid(matrix, 1, 1, empty, empty)
    values, flat = torch.nn.functional.max_pool2d(
        matrix[None, None].float(),
        kernel_size=(block_rows, block_columns),
        ceil_mode=True,
        return_indices=True,
    )  # (1, 1, r, c) each
    flat = flat[0, 0]  # (r, c) flat positions in the (m, n) input
    return Grid(values[0, 0], block_rows, block_columns, flat // n, flat % n)
