"""Moving a collection's sentences to the device after a change copies only the added rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from docsim.search.sdr_scorer import carry_rows, reuse_rows

pytestmark = pytest.mark.no_sql  # never opens a database (tests/conftest.py checks)


def test_reuse_rows_equals_the_new_rows() -> None:
    generator = torch.Generator().manual_seed(0)
    old_ids = np.array([3, 5, 8, 9, 12], dtype=np.int64)
    old_rows = torch.randn(5, 4, generator=generator)
    new_ids = np.array([3, 8, 12, 20, 21], dtype=np.int64)  # 5 and 9 removed, 20, 21 added
    added = torch.randn(2, 4, generator=generator)
    new_rows = torch.cat([old_rows[[0, 2, 4]], added])  # what LoadedIndex.with_changes builds
    torch.testing.assert_close(reuse_rows(old_ids, old_rows, new_ids, new_rows), new_rows)
    assert carry_rows(old_ids, old_rows, new_ids, new_rows) is new_rows  # same device: no copy


def test_reuse_rows_refuses_added_ids_below_kept_ones() -> None:
    old_ids = np.array([3, 5], dtype=np.int64)
    with pytest.raises(ValueError, match="kept rows"):
        reuse_rows(old_ids, torch.zeros(2, 2), np.array([1, 3, 5]), torch.zeros(3, 2))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_carry_rows_on_cuda_copies_only_the_added_rows() -> None:
    old_ids = np.array([1, 2, 3], dtype=np.int64)
    old_rows = torch.randn(3, 8).cuda()
    new_ids = np.array([1, 3, 7], dtype=np.int64)
    new_rows = torch.cat([old_rows[[0, 2]].cpu(), torch.randn(1, 8)])
    carried = carry_rows(old_ids, old_rows, new_ids, new_rows)
    assert carried.device == old_rows.device
    torch.testing.assert_close(carried.cpu(), new_rows)
