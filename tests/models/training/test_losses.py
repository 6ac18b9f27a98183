"""Each training loss against a value computed by hand (or by plain loops) on a tiny example."""

from __future__ import annotations

import math

import pytest
import torch

from docsim.models.training.losses import (
    bregman_divergence,
    bregman_loss,
    in_batch_contrastive_loss,
    mlm_loss,
    sdr_contrastive_loss,
    supervised_contrastive_loss,
)


def test_sdr_margin_loss_by_hand() -> None:
    first = torch.tensor([[1.0, 0.0], [1.0, 0.0], [2.0, 0.0], [1.0, 0.0]])
    second = torch.tensor([[3.0, 0.0], [0.0, 1.0], [0.6, 0.8], [-0.6, 0.8]])
    positive = torch.tensor([True, True, False, False])
    # cosines 1, 0, 0.6, -0.6 -> losses 0, 1, 0.6 (above 1 - m = 0), 0 (negatives not pushed)
    assert sdr_contrastive_loss(first, second, positive).item() == pytest.approx(0.4)
    # m = 2 is the plain cosine loss: the -0.6 pair now costs 1.6 - 1 ... = cos + 1
    got = sdr_contrastive_loss(first, second, positive, margin=2.0).item()
    assert got == pytest.approx((0 + 1 + 1.6 + 0.4) / 4)


def test_supervised_contrastive_loss_by_hand() -> None:
    z = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [0.0, 3.0]])
    labels = torch.tensor([0, 0, 1, 1])
    # every anchor: its positive at z.z / tau = 2, two negatives at 0
    expected = math.log(math.exp(2) + 2) - 2
    assert supervised_contrastive_loss(z, labels, 0.5).item() == pytest.approx(expected, abs=1e-6)
    # three views share a label: anchor 0 has positives 1 and 2 (logit 2 each), one negative
    labels3 = torch.tensor([0, 0, 0, 1])
    z3 = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    per_anchor_a = math.log(2 * math.exp(2) + 1) - 2  # anchors 0, 1, 2
    assert supervised_contrastive_loss(z3, labels3, 0.5).item() == pytest.approx(
        per_anchor_a, abs=1e-6
    )  # anchor 3 has no positive and is left out
    with pytest.raises(ValueError):
        supervised_contrastive_loss(z, torch.tensor([0, 1, 2, 3]))


def test_in_batch_contrastive_loss_by_hand() -> None:
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    expected = math.log(1 + math.exp(-1))  # -log(e / (e + 1)) for each row
    assert in_batch_contrastive_loss(a, a).item() == pytest.approx(expected, abs=1e-6)
    b = torch.tensor([[0.0, 1.0], [0.0, 1.0]])
    # one direction: row 0 picks b0 with logit 0 vs b1 with 0 -> log 2; row 1: -log(e/(e+e)) = log 2
    assert in_batch_contrastive_loss(a, b, symmetric=False).item() == pytest.approx(math.log(2))
    # scale 1 / 0.05 as SimCSE
    got = in_batch_contrastive_loss(a, a, temperature=0.05, symmetric=False).item()
    assert got == pytest.approx(math.log(1 + math.exp(-20)), abs=1e-8)


def test_bregman_divergence_by_hand() -> None:
    a = torch.tensor([[1.0, 3.0], [2.0, 0.0]])
    b = torch.tensor([[0.0, 1.0], [5.0, 0.0]])
    # phi(a0) = 3, phi(a1) = 2; b0 picks functional 1, b1 picks functional 0
    expected = torch.tensor([[3 - 3.0, 3 - 1.0], [2 - 0.0, 2 - 2.0]])
    assert torch.equal(bregman_divergence(a, b), expected)
    assert bool((bregman_divergence(a, a).diagonal() == 0).all())


def reference_bregman_loss(values: list[list[float]], sigma: float, tau: float) -> float:
    n2 = len(values)
    half = n2 // 2

    def g(i: int, j: int) -> float:
        k = max(range(len(values[j])), key=lambda c: values[j][c])
        return max(values[i]) - values[i][k]

    total = 0.0
    for i in range(n2):
        positive = (i + half) % n2
        logits = {j: math.exp(-g(i, j) / (2 * sigma**2)) / tau for j in range(n2) if j != i}
        total += -logits[positive] + math.log(sum(math.exp(v) for v in logits.values()))
    return total / n2


def test_bregman_nt_xent_against_loops() -> None:
    values = torch.tensor([[0.3, 1.2, -0.5], [2.0, 0.1, 0.4], [0.2, 1.0, 0.9], [1.5, 0.3, 0.0]])
    got = bregman_loss(values, sigma=1.5, temperature=0.1).item()
    assert got == pytest.approx(reference_bregman_loss(values.tolist(), 1.5, 0.1), abs=1e-5)


def test_mlm_loss_ignores_unmasked_positions() -> None:
    logits = torch.log(torch.tensor([[[0.5, 0.25, 0.25], [0.1, 0.1, 0.8]]]))
    labels = torch.tensor([[0, -100]])
    assert mlm_loss(logits, labels).item() == pytest.approx(-math.log(0.5), abs=1e-6)
