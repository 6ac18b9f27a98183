"""A plain reference for candidate mode's cells: each row's centroid of largest product."""

from __future__ import annotations

import torch


def assign(rows: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    """`(m,)` int32 the centroid `(C, k)` of largest product with each row `(m, k)`."""
    return (rows.float() @ centroids.T).argmax(dim=1).to(torch.int32)
