from __future__ import annotations

import numpy as np
import pytest
import torch

from docsim.models.inference.batching import (
    CPU_MAX_PADDING,
    GPU_MAX_PADDING,
    default_max_padding,
    plan_batches,
)

PAD = 0


def reference_batches(
    lengths: list[int], batch_tokens: int, max_batch_size: int, max_padding: float
) -> list[list[int]]:
    """The rows of each batch, planned one input at a time: longest first, and a batch takes
    the next input while it stays under the budget, the size cap and the padding bound."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])  # stable: ties keep order
    batches: list[list[int]] = []
    for row in order:
        if batches:
            batch = batches[-1]
            longest = lengths[batch[0]]
            fits = (len(batch) + 1) * longest <= max(batch_tokens, longest)
            if fits and len(batch) < max_batch_size and lengths[row] >= (1 - max_padding) * longest:
                batch.append(row)
                continue
        batches.append([row])
    return batches


@pytest.mark.parametrize("max_padding", [1.0, 0.5, CPU_MAX_PADDING, 0.0])
@pytest.mark.parametrize("seed", range(4))
def test_batches_equal_a_one_at_a_time_plan(seed: int, max_padding: float) -> None:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 60, size=int(rng.integers(1, 80))).tolist()
    token_ids = [list(range(1, n + 1)) for n in lengths]
    found = list(
        plan_batches(
            token_ids, pad_id=PAD, batch_tokens=256, max_batch_size=16, max_padding=max_padding
        )
    )
    assert [b.rows.tolist() for b in found] == reference_batches(lengths, 256, 16, max_padding)
    for batch in found:  # every row's ids in place, padded to the batch's longest
        width = max(lengths[r] for r in batch.rows)
        assert batch.input_ids.shape == batch.attention_mask.shape == (len(batch.rows), width)
        for i, row in enumerate(batch.rows.tolist()):
            n = lengths[row]
            assert batch.input_ids[i, :n].tolist() == token_ids[row]
            assert batch.attention_mask[i].tolist() == [1] * n + [0] * (width - n)
            assert (batch.input_ids[i, n:] == PAD).all()


def test_a_query_s_short_last_chunk_gets_a_batch_of_its_own_on_the_cpu() -> None:
    chunks = [list(range(258)), list(range(258)), list(range(60)), list(range(240))]
    cpu = list(
        plan_batches(chunks, pad_id=PAD, batch_tokens=2048, max_batch_size=256, max_padding=0.25)
    )
    assert [b.rows.tolist() for b in cpu] == [[0, 1, 3], [2]]
    assert sum(b.input_ids.numel() for b in cpu) == 3 * 258 + 60
    whole = list(
        plan_batches(chunks, pad_id=PAD, batch_tokens=2048, max_batch_size=256, max_padding=1.0)
    )
    assert [b.rows.tolist() for b in whole] == [[0, 1, 3, 2]]


def test_the_padding_bound_follows_the_device() -> None:
    assert default_max_padding(torch.device("cpu")) == CPU_MAX_PADDING == 0.25
    assert default_max_padding(torch.device("cuda", 0)) == GPU_MAX_PADDING == 1.0
