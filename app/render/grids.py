"""The maps of an explanation as display grids (pooled when too large), with their captions."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from docsim.models.kernels.explain import Grid, display_grid
from docsim.search.api import PairExplanation


@dataclass(frozen=True)
class Map:
    key: str  # "section", "chunk" or "paragraph"
    title: str
    unit: str  # what one row / column is
    rows: int  # size of the full matrix
    columns: int
    grid: Grid

    @property
    def note(self) -> str:
        """How the picture differs from the matrix ("" when it shows every cell)."""
        if not self.grid.pooled:
            return ""
        return (
            f"{self.rows} x {self.columns} {self.unit}s shown as blocks of "
            f"{self.grid.block_rows} x {self.grid.block_columns}; each block is its best cell"
        )


def explanation_maps(explanation: PairExplanation, max_per_axis: int) -> list[Map]:
    """Section cosines, chunk cosines and SDR's paragraph matrix (z-scored when the ranking
    normalised), in that order."""
    paragraph_title = (
        "Paragraph similarity, z-scored as in the ranking (SDR)"
        if explanation.stats is not None
        else "Paragraph similarity, raw (SDR, not normalised)"
    )
    matrices: list[tuple[str, str, str, torch.Tensor]] = [
        ("section", "Section cosine (CoLDE level 2)", "section", explanation.section_matrix),
        ("chunk", "Chunk cosine (CoLDE level 3)", "chunk", explanation.chunk_matrix),
        ("paragraph", paragraph_title, "paragraph", explanation.alignment.normalized),
    ]
    return [
        Map(key, title, unit, m.shape[0], m.shape[1], display_grid(m, max_per_axis, max_per_axis))
        for key, title, unit, m in matrices
    ]
