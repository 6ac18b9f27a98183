"""The training losses of the four trained encoders, as pure tensor functions.

- SDR (Ginzburg et al., eq. 1): a margin contrastive loss on sentence pairs.
- CoLDE (Jha et al., section 3.3): the supervised contrastive loss of Khosla et al.
- Graph attention (Xu et al., eq. 5): a symmetric in-batch InfoNCE over sub-document pairs.
- SimCSE + Bregman (Saggau et al., eqs. 2-7): the multiple-negatives ranking loss, and the
  functional Bregman divergence of a max-affine ensemble turned into a similarity by a
  Gaussian kernel, under NT-Xent over the 2N views.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def sdr_contrastive_loss(
    first: torch.Tensor, second: torch.Tensor, positive: torch.Tensor, margin: float = 1.0
) -> torch.Tensor:
    """SDR's pair loss: `1 - cos` for positive pairs, `max(0, cos - (1 - m))` for negatives.

    Args:
        first, second: `(B, d)` sentence vectors of each pair (any norm).
        positive: `(B,)` bool, whether the pair is a positive (intra) sample.
        margin: m; 1 pushes negatives to cosine <= 0 without rewarding opposite directions.
    """
    cos = F.cosine_similarity(first, second, dim=-1)  # (B,)
    loss = torch.where(positive, 1.0 - cos, torch.clamp(cos - (1.0 - margin), min=0.0))
    return loss.mean()


def supervised_contrastive_loss(
    z: torch.Tensor, labels: torch.Tensor, temperature: float = 0.5
) -> torch.Tensor:
    """Khosla et al.'s loss as CoLDE uses it: for every anchor, the mean over its positives
    (same label, not itself) of -log softmax over all the others; averaged over anchors that
    have a positive.

    Args:
        z: `(M, d)` representations (normalised here).
        labels: `(M,)` int64 labels (a document id, or a class).
    """
    z = F.normalize(z, dim=-1)
    logits = z @ z.T / temperature  # (M, M)
    self_mask = torch.eye(len(z), dtype=torch.bool, device=z.device)
    logits = logits.masked_fill(self_mask, float("-inf"))
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)  # (M, M)
    positives = (labels[:, None] == labels[None, :]) & ~self_mask  # (M, M)
    counts = positives.sum(dim=1)  # (M,)
    has = counts > 0
    if not bool(has.any()):
        raise ValueError("no anchor has a positive: each label needs two views")
    per_anchor = -(log_prob.masked_fill(~positives, 0.0)).sum(dim=1)[has] / counts[has]
    return per_anchor.mean()


def in_batch_contrastive_loss(
    first: torch.Tensor,
    second: torch.Tensor,
    temperature: float = 1.0,
    *,
    symmetric: bool = True,
    normalize: bool = False,
) -> torch.Tensor:
    """InfoNCE with in-batch negatives: row i of `first` should pick row i of `second`.

    With `symmetric`, the loss is also taken in the other direction and averaged (Xu et al.,
    eq. 5); without, it is SimCSE's multiple-negatives ranking loss.
    """
    if normalize:
        first, second = F.normalize(first, dim=-1), F.normalize(second, dim=-1)
    logits = first @ second.T / temperature  # (B, B)
    targets = torch.arange(len(first), device=first.device)
    loss = F.cross_entropy(logits, targets)
    if symmetric:
        loss = (loss + F.cross_entropy(logits.T, targets)) / 2
    return loss


def bregman_divergence(values_a: torch.Tensor, values_b: torch.Tensor) -> torch.Tensor:
    """Functional Bregman divergence of a max-affine phi (Saggau et al., eq. 4).

    `values_x[i, k]` is the k-th affine functional (sub-network) at point i. For points a_i
    and b_j: G = phi(a_i) - f_{k(b_j)}(a_i), where phi = max_k f_k and k(b_j) = argmax_k of
    b_j's values. G >= 0, and 0 when both pick the same functional.

    Returns `(n, m)`.
    """
    best_a = values_a.max(dim=1).values  # (n,)
    choice_b = values_b.argmax(dim=1)  # (m,)
    return best_a[:, None] - values_a[:, choice_b]  # (n, m)


def bregman_loss(
    values: torch.Tensor, sigma: float = 2.0, temperature: float = 0.1
) -> torch.Tensor:
    """NT-Xent over the 2N views with the Gaussian-kernel similarity exp(-G / 2 sigma^2).

    Args:
        values: `(2N, k)` sub-network outputs; rows i and i + N are the two views of item i.
    """
    n2 = len(values)
    if n2 % 2:
        raise ValueError("values must hold two views of each item")
    similarity = torch.exp(-bregman_divergence(values, values) / (2 * sigma**2))  # (2N, 2N)
    logits = (similarity / temperature).masked_fill(
        torch.eye(n2, dtype=torch.bool, device=values.device), float("-inf")
    )
    half = n2 // 2
    targets = torch.cat([torch.arange(half, n2), torch.arange(0, half)]).to(values.device)
    return F.cross_entropy(logits, targets)


def mlm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Masked-language-model cross entropy; `labels` is -100 where nothing was masked.

    Args:
        logits: `(B, L, V)`; labels: `(B, L)`.
    """
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100
    )
