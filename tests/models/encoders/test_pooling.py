from __future__ import annotations

import torch

from docsim.models.encoders.pooling import mean_pool, segment_mean


def test_mean_pool_matches_a_loop() -> None:
    torch.manual_seed(0)
    hidden = torch.randn(3, 5, 4)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    expected = torch.stack([hidden[i, : int(mask[i].sum())].mean(0) for i in range(3)])
    torch.testing.assert_close(mean_pool(hidden, mask), expected)


def test_segment_mean_matches_a_loop() -> None:
    torch.manual_seed(1)
    vectors = torch.randn(7, 4)
    segment = torch.tensor([0, 0, 2, 2, 2, 1, 0])
    weights = torch.tensor([1.0, 2.0, 1.0, 1.0, 3.0, 0.5, 1.0])
    got = segment_mean(vectors, segment, 4, weights)
    for s in range(3):
        rows = segment == s
        pooled = (vectors[rows] * weights[rows, None]).sum(0)
        torch.testing.assert_close(got[s], pooled / pooled.norm())
    torch.testing.assert_close(got[3], torch.zeros(4))  # an empty segment
