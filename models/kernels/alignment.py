"""Document scores from sentence-to-sentence matching, without paragraphs: the best match of
each source sentence in a document, and an optimal-transport alignment of the two sentence sets.

With unit vectors, source sentences s^1..s^n and a document's sentences c^1..c^m:

    B[d, k]        = max_r cos(s^k, c_d^r)               (best match of each source sentence)
    maxsim(s, d)   = mean_k B[d, k]
    best_pair(s, d)= max_k B[d, k]
    ot(s, d)       = sum_kr T*_kr cos(s^k, c_d^r)        (T* the entropic optimal transport plan
                                                          between uniform masses 1/n and 1/m
                                                          for the cost 1 - cos)

The optimal-transport alignment is Aspire's (Mysore et al., 2022) way of scoring a document by
many sentence pairs at once; each source sentence must spread its mass over the document
instead of all landing on its single best match. Documents are ragged: `RaggedCollection` from
`models.kernels.scoring`, paragraphs ignored. Everything is tensors in, tensors out.
"""

from __future__ import annotations

import torch

from docsim.models.inference.pacing import before_batch
from docsim.models.kernels.scoring import RaggedCollection, block_cosines, block_rows


def document_sentence_lengths(collection: RaggedCollection) -> torch.Tensor:
    """`(D,)` sentences per document."""
    paragraph_document = torch.repeat_interleave(
        torch.arange(collection.n_documents), collection.document_lengths
    )  # (J,)
    out = torch.zeros(collection.n_documents, dtype=torch.long)
    return out.index_add_(0, paragraph_document, collection.paragraph_lengths.cpu())


GPU_BLOCK_SENTENCES = 65536
CPU_BLOCK_SENTENCES = 4096


def sentence_best(
    source: torch.Tensor, collection: RaggedCollection, *, block_sentences: int | None = None
) -> torch.Tensor:
    """`B` `(D, n)`: the best cosine of each source sentence among each document's sentences.

    Processed in blocks of whole documents (about `block_sentences` sentences, fewer for a
    long source: `models.kernels.scoring.block_rows`), where the collection's sentences are; `B`
    comes back on the source's device. By default 65,536 on a GPU and 4,096 on the CPU,
    where a block's float32 copy of float16 rows (6 MiB) and its products stay below the
    allocator's fresh mappings, whose page faults made a pass over AILA's float16 sentences
    3.1 times slower in 65,536-row blocks (84 against 261 ms; float32 rows cost the same
    either way).
    """
    device, home = collection.sentences.device, source.device
    if block_sentences is None:
        on_gpu = device.type == "cuda"
        block_sentences = GPU_BLOCK_SENTENCES if on_gpu else CPU_BLOCK_SENTENCES
    block_sentences = block_rows(block_sentences, source.shape[0])
    source = source.to(device)
    lengths = document_sentence_lengths(collection)  # (D,)
    ends = torch.cumsum(lengths, 0)  # (D,)
    out = torch.empty(len(lengths), source.shape[0], dtype=source.dtype, device=device)  # (D, n)
    d0 = 0
    while d0 < len(lengths):
        r0 = int(ends[d0 - 1]) if d0 else 0
        d1 = max(int(torch.searchsorted(ends, r0 + block_sentences, right=True)), d0 + 1)
        r1 = int(ends[d1 - 1])
        before_batch(r1 - r0)  # a long pass yields and meets its deadline between blocks
        sims = block_cosines(collection.sentences[r0:r1], source)  # (r, n)
        out[d0:d1] = torch.segment_reduce(sims, "max", lengths=lengths[d0:d1].to(device), axis=0)
        d0 = d1
    return out.to(home)


def maxsim_scores(best: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """`(D,)` mean over source sentences of their best match, from `B` `(D, n)`; weighted by
    `weights` `(n,)` when given."""
    if weights is None:
        return best.mean(dim=1)
    weights = weights.to(best.dtype)
    return (best * weights).sum(dim=1) / weights.sum()


def best_pair_scores(best: torch.Tensor) -> torch.Tensor:
    """`(D,)` the single best sentence pair, from `B` `(D, n)`."""
    return best.max(dim=1).values


def sinkhorn_plan(
    cost: torch.Tensor, mask: torch.Tensor, *, reg: float = 0.05, iterations: int = 50
) -> torch.Tensor:
    """Entropic optimal transport plans `(B, n, m)` for a batch of cost matrices `(B, n, m)`,
    between uniform masses: 1/n on the source rows and 1/m_b on the `m_b` real columns of each
    target (`mask` `(B, m)` marks them; padded columns get no mass).

    Sinkhorn's matrix scaling on the kernel exp(-(cost - c_min) / reg): shifting each
    problem's cost by its smallest entry leaves the plan unchanged and keeps the kernel away
    from underflow (costs are 1 - cos, so entries stay within exp(-2 / reg) of the largest).

    Each iteration calls the request's pacing hook first (`models.inference.pacing`), with the
    batch's real target sentences: many iterations yield to shorter requests, and stop at the
    request's deadline, as the blocks of the other passes do."""
    n = cost.shape[1]
    maskf = mask.to(cost.dtype)[:, None, :]  # (B, 1, m)
    shifted = cost - cost.masked_fill(~mask[:, None, :], torch.inf).amin(dim=(1, 2), keepdim=True)
    kernel = torch.exp(-shifted / reg) * maskf  # (B, n, m)
    a = torch.full((cost.shape[0], n, 1), 1.0 / n, dtype=cost.dtype, device=cost.device)
    b = maskf.transpose(1, 2) / mask.sum(dim=1).clamp(min=1)[:, None, None]  # (B, m, 1)
    tiny = torch.finfo(cost.dtype).tiny
    v = maskf.transpose(1, 2).clone()  # (B, m, 1)
    rows = int(mask.sum())
    for _ in range(iterations):
        before_batch(rows)
        u = a / (kernel @ v).clamp(min=tiny)  # (B, n, 1)
        v = b / (kernel.transpose(1, 2) @ u).clamp(min=tiny)  # (B, m, 1)
    return u * kernel * v.transpose(1, 2)


def ot_scores(
    source: torch.Tensor,
    collection: RaggedCollection,
    *,
    reg: float = 0.05,
    iterations: int = 50,
    block_cells: int = 4_000_000,
) -> torch.Tensor:
    """`(D,)` the similarity of each document under the optimal-transport alignment of its
    sentences with the source's (see the module docstring).

    Documents are padded in batches of similar length (sorted by sentence count) of about
    `block_cells` source-target pairs, so that short documents are not padded to the longest.
    """
    device, home = collection.sentences.device, source.device
    source = source.to(device)
    lengths = document_sentence_lengths(collection)  # (D,)
    starts = torch.cumsum(lengths, 0) - lengths  # (D,)
    order = torch.argsort(lengths, stable=True)
    sorted_lengths = lengths[order]  # (D,) ascending
    out = torch.empty(len(lengths), dtype=torch.float32, device=device)
    n, i = source.shape[0], 0
    while i < len(order):
        cells = torch.arange(1, len(order) - i + 1) * sorted_lengths[i:] * n  # batch sizes' cost
        size = max(1, int((cells <= block_cells).sum()))
        batch = order[i : i + size]  # (B,) ascending lengths
        longest = int(sorted_lengths[i + size - 1])
        offsets = torch.arange(longest)  # (m,)
        mask = offsets[None, :] < lengths[batch][:, None]  # (B, m)
        rows = (starts[batch][:, None] + offsets[None, :]).clamp(max=len(collection.sentences) - 1)
        targets = collection.sentences[rows.to(device)].to(source.dtype)  # (B, m, d)
        sims = torch.einsum("nd,bmd->bnm", source, targets).float()  # (B, n, m)
        mask = mask.to(device)
        plan = sinkhorn_plan(1.0 - sims, mask, reg=reg, iterations=iterations)
        out[batch.to(device)] = (plan * sims.masked_fill(~mask[:, None, :], 0.0)).sum(dim=(1, 2))
        i += len(batch)
    return out.to(home)
