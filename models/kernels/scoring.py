"""SDR's two-stage hierarchical scoring (Ginzburg et al., section 3.3), vectorised.

A source document s has sentences grouped into paragraphs s_1..s_I; the collection's
candidates have sentences grouped into paragraphs, and paragraphs into documents, all stored
contiguously (ragged, no padding). With unit vectors, for source paragraph i and candidate
paragraph j:

    M_ij[k, r] = cos(s_i^k, c_j^r)                                 (sentence similarities)
    P_ij       = mean_k max_r M_ij[k, r]                           (paragraph similarity)
    z_ij       = (P_ij - mu_i) / sigma_i                           (per source paragraph, over
                                                                     every candidate paragraph)
    S(s, c)    = mean_i max_{j in c} z_ij                          (document score)

With weights w_k on the source's sentences (`search.query_weights`: their rarity in the
collection), P_ij is the w-weighted mean over paragraph i's sentences and S the mean over
paragraphs weighted by each paragraph's mean w; equal weights give the paper's scoring.

Dimensions: n source sentences, I source paragraphs, R candidate sentences, J candidate
paragraphs, D candidate documents, d vector size. Everything is tensors in, tensors out.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from docsim.models.inference.pacing import before_batch


@dataclass(frozen=True)
class RaggedCollection:
    """Candidate sentences grouped into paragraphs and paragraphs into documents.

    Attributes:
        sentences: `(R, d)` unit vectors, paragraph by paragraph.
        paragraph_lengths: `(J,)` int64 sentences per paragraph (all >= 1), summing to R.
        document_lengths: `(D,)` int64 paragraphs per document (all >= 1), summing to J.
    """

    sentences: torch.Tensor
    paragraph_lengths: torch.Tensor
    document_lengths: torch.Tensor

    @property
    def n_paragraphs(self) -> int:
        return int(self.paragraph_lengths.shape[0])

    @property
    def n_documents(self) -> int:
        return int(self.document_lengths.shape[0])


def averaging_matrix(
    source_paragraph_lengths: torch.Tensor,
    dtype: torch.dtype,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """`(I, n)` matrix whose product with an `(n, ...)` tensor averages each source paragraph,
    each sentence counting by its weight `(n,)` (positive; default: 1 each)."""
    lengths = source_paragraph_lengths
    rows = torch.repeat_interleave(torch.arange(len(lengths)), lengths)  # (n,)
    n = int(lengths.sum())
    counts = torch.ones(n, dtype=torch.float64) if weights is None else weights.double().cpu()
    totals = torch.zeros(len(lengths), dtype=torch.float64).index_add_(0, rows, counts)  # (I,)
    out = torch.zeros(len(lengths), n, dtype=dtype)  # (I, n)
    out[rows, torch.arange(n)] = (counts / totals[rows]).to(dtype)
    return out


def paragraph_weights(
    source_paragraph_lengths: torch.Tensor, weights: torch.Tensor | None
) -> torch.Tensor | None:
    """`(I,)` each source paragraph's mean sentence weight from `weights` `(n,)` (None: None,
    every paragraph counting the same)."""
    if weights is None:
        return None
    lengths = source_paragraph_lengths.cpu()
    rows = torch.repeat_interleave(torch.arange(len(lengths)), lengths)  # (n,)
    sums = torch.zeros(len(lengths), dtype=torch.float64).index_add_(
        0, rows, weights.double().cpu()
    )
    return sums / lengths.double()  # (I,)


BLOCK_PAIRS = 1 << 24  # sentence pairs a block may compare: a long source gets shorter blocks


def block_rows(block_sentences: int, n_source: int) -> int:
    """Collection rows per block for a source of `n_source` sentences: `block_sentences`,
    shortened so that one block compares at most `BLOCK_PAIRS` sentence pairs (about 0.1 s on
    two cores), so that a request of the longest sources allowed still reaches its pacing
    hook, and its deadline, between short blocks."""
    return max(1, min(block_sentences, BLOCK_PAIRS // max(n_source, 1)))


HALF_SPLIT = 2.0**11  # float16 keeps 11 significant bits: the low part's scale


def block_cosines(candidates: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """`(r, n)` products of candidate rows `(r, d)` (float32, or float16 as a version stores
    them) with source rows `(n, d)`, in the source's dtype.

    On a GPU a float16 block is multiplied as it is, on the tensor cores, instead of being
    cast to float32 first (which moves five times the block's bytes, for a slower product).
    A float32 source is split into two float16 parts, `source ~ hi + lo / 2**11` (the low
    part scaled into float16's normal range), and both products accumulate in float32: the
    source keeps 22 of its 24 bits, so the result agrees with the float32 product to about
    1e-6.
    """
    if not (candidates.is_cuda and candidates.dtype == torch.float16):
        return candidates.to(source.dtype) @ source.T
    if source.dtype != torch.float32:  # float16 as it is; float64 wants the cast
        return candidates.to(source.dtype) @ source.T
    hi = source.half()  # (n, d)
    lo = ((source - hi.float()) * HALF_SPLIT).half()  # (n, d)
    parts = torch.mm(candidates, torch.cat([hi, lo]).T, out_dtype=torch.float32)  # (r, 2n)
    n = source.shape[0]
    return (parts[:, :n] + parts[:, n:] / HALF_SPLIT).to(source.dtype)


def paragraph_similarity(
    source: torch.Tensor,
    source_paragraph_lengths: torch.Tensor,
    collection: RaggedCollection,
    *,
    block_sentences: int = 65536,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Stage one: `P` `(I, J)`, the mean over each source paragraph's sentences (weighted by
    `weights` `(n,)` where given) of their best cosine within each candidate paragraph.

    The collection is processed in blocks of whole paragraphs (about `block_sentences`
    sentences, fewer for a long source: `block_rows`) so that the `(n, R)` sentence matrix
    is never held at once. The products run where the collection's sentences are (a GPU when
    the service put them there); `P` comes back on the source's device.
    """
    device, home = collection.sentences.device, source.device
    source = source.to(device)
    average = averaging_matrix(source_paragraph_lengths.cpu(), source.dtype, weights)  # (I, n)
    average = average.to(device)
    lengths = collection.paragraph_lengths.cpu()
    ends = torch.cumsum(lengths, 0)  # (J,)
    block_sentences = block_rows(block_sentences, source.shape[0])
    out = torch.empty(average.shape[0], len(lengths), dtype=source.dtype, device=device)  # (I, J)
    j0 = 0
    while j0 < len(lengths):
        r0 = int(ends[j0 - 1]) if j0 else 0
        j1 = int(torch.searchsorted(ends, r0 + block_sentences, right=True))
        j1 = max(j1, j0 + 1)
        r1 = int(ends[j1 - 1])
        before_batch(r1 - r0)  # a long pass yields and meets its deadline between blocks
        sims = block_cosines(collection.sentences[r0:r1], source)  # (r, n): candidate rows
        block = lengths[j0:j1].to(device)
        best = torch.segment_reduce(sims, "max", lengths=block, axis=0)  # (j, n)
        out[:, j0:j1] = average @ best.T  # (I, j)
        j0 = j1
    return out.to(home)


@dataclass(frozen=True)
class RowStats:
    """Per source paragraph mean and standard deviation of `P` over candidate paragraphs."""

    mean: torch.Tensor  # (I,)
    std: torch.Tensor  # (I,)


def row_stats(paragraph_scores: torch.Tensor) -> RowStats:
    """Mean and (population) standard deviation of each row of `P` `(I, J)`; with no column
    (no other paragraph to compare with: a one-document collection explaining its document)
    0 and 0, so that `normalize_rows` leaves `P` as it is, where the mean of nothing is NaN."""
    if paragraph_scores.shape[1] == 0:
        zeros = paragraph_scores.new_zeros(paragraph_scores.shape[0])  # (I,)
        return RowStats(mean=zeros, std=zeros)
    mean = paragraph_scores.mean(dim=1)  # (I,)
    std = paragraph_scores.std(dim=1, correction=0)  # (I,)
    return RowStats(mean=mean, std=std)


def normalize_rows(
    paragraph_scores: torch.Tensor, stats: RowStats, eps: float = 1e-6
) -> torch.Tensor:
    """`z = (P - mu_i) / sigma_i`; a row with no spread is only centred."""
    std = torch.where(stats.std > eps, stats.std, torch.ones_like(stats.std))  # (I,)
    return (paragraph_scores - stats.mean[:, None]) / std[:, None]  # (I, J)


def document_scores(
    paragraph_scores: torch.Tensor,
    document_lengths: torch.Tensor,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Stage two: `S` `(D,)`, the mean over source paragraphs of the best candidate paragraph
    of each document, each source paragraph counting by its weight `(I,)` where given
    (`paragraph_weights`)."""
    best = torch.segment_reduce(
        paragraph_scores.T.contiguous(),
        "max",
        lengths=document_lengths.to(paragraph_scores.device),
        axis=0,
    )  # (D, I)
    return weighted_mean(best, weights)


def weighted_mean(best: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """`(D,)` the mean of each row of `best` `(D, I)`, column i counting by `weights[i]`."""
    if weights is None:
        return best.mean(dim=1)
    w = weights.to(device=best.device, dtype=best.dtype)  # (I,)
    return (best @ w) / w.sum()


def sdr_scores(
    source: torch.Tensor,
    source_paragraph_lengths: torch.Tensor,
    collection: RaggedCollection,
    *,
    normalize: bool = True,
    stats: RowStats | None = None,
    block_sentences: int = 65536,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Score every document of `collection` against the source.

    Args:
        source: `(n, d)` source sentence unit vectors, paragraph by paragraph.
        source_paragraph_lengths: `(I,)` int64 sentences per source paragraph.
        collection: the candidates.
        normalize: apply the z-score of step 3 (the paper) or not (the public code).
        stats: normalisation statistics to use instead of the candidates' own (candidate mode
            estimates them from a fixed sample of the collection).
        weights: `(n,)` how much each source sentence counts (default: the same).

    Returns:
        `(D,)` document scores and the `(I, J)` paragraph matrix before normalisation.
    """
    paragraphs = paragraph_similarity(
        source,
        source_paragraph_lengths,
        collection,
        block_sentences=block_sentences,
        weights=weights,
    )  # (I, J)
    scored = paragraphs
    if normalize:
        scored = normalize_rows(paragraphs, stats if stats is not None else row_stats(paragraphs))
    columns = paragraph_weights(source_paragraph_lengths, weights)  # (I,) or None
    return document_scores(scored, collection.document_lengths, columns), paragraphs
