"""The index arithmetic shared by the kernels, against plain loops and torch's own reduction."""

from __future__ import annotations

import pytest
import torch

from docsim.models.ranges import concatenated_ranges, segment_max


def test_concatenated_ranges_are_the_ranges_one_after_another() -> None:
    starts, ends = torch.tensor([3, 10, 0, 7]), torch.tensor([6, 10, 2, 9])
    expected = [i for s, e in zip(starts.tolist(), ends.tolist(), strict=True) for i in range(s, e)]
    assert concatenated_ranges(starts, ends).tolist() == expected


@pytest.mark.parametrize("width", [1, 17, 117])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_segment_max_is_segment_reduces_max(width: int, seed: int) -> None:
    """Equal to `torch.segment_reduce`'s maximum, empty segments (-inf) included, and to a
    plain loop over the segments."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 6, (40,), generator=generator)
    lengths[[0, 7, -1]] = torch.tensor([0, 0, 3])  # empty ones first, inside and not last
    values = torch.randn(int(lengths.sum()), width, generator=generator)
    found = segment_max(values, lengths)
    assert torch.equal(found, torch.segment_reduce(values, "max", lengths=lengths, axis=0))
    start = 0
    for segment, length in enumerate(lengths.tolist()):
        rows = values[start : start + length]
        expected = rows.amax(dim=0) if length else torch.full((width,), -torch.inf)
        assert torch.equal(found[segment], expected)
        start += length


def test_segment_max_of_no_rows() -> None:
    assert segment_max(torch.empty(0, 4), torch.zeros(3, dtype=torch.long)).eq(-torch.inf).all()
    assert segment_max(torch.empty(0, 4), torch.zeros(0, dtype=torch.long)).shape == (0, 4)
