"""`models.kernels.scan` against plain references: the padding, the per-document best matches of the
compressed rows against `sentence_best` on the float32 rows, and a change against compressing
the changed collection afresh."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from docsim.models.kernels.alignment import sentence_best
from docsim.models.kernels.scan import (
    GATHERED_SHARE,
    approximate_best,
    approximate_best_of,
    changed,
    compress,
    compress_in_parts,
    fit_basis,
    padded_positions,
    project,
)
from docsim.models.kernels.scoring import RaggedCollection

BF16_PRODUCT_ERROR = 0.02  # a cosine from bfloat16 rows and queries (8 significant bits)


def ragged(lengths: list[int], d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    rows = F.normalize(torch.randn(sum(lengths), d, generator=generator), dim=1)
    return rows, torch.tensor(lengths)


def as_collection(rows: torch.Tensor, lengths: torch.Tensor) -> RaggedCollection:
    """One paragraph per document: `sentence_best` ignores paragraphs."""
    return RaggedCollection(rows, lengths, torch.ones(len(lengths), dtype=torch.long))


def test_padding_repeats_each_documents_last_row() -> None:
    lengths, group = torch.tensor([1, 3, 8, 9]), 4
    expected = []
    start = 0
    for n in lengths.tolist():
        padded = -(-n // group) * group
        expected += [start + min(i, n - 1) for i in range(padded)]
        start += n
    assert padded_positions(lengths, group).tolist() == expected


def test_a_document_without_sentences_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one sentence"):
        padded_positions(torch.tensor([2, 0]), 4)


@pytest.mark.parametrize("group", [1, 4, 8])
@pytest.mark.parametrize("block_rows", [8, 16384])
def test_full_basis_best_matches_equal_the_float32_reference(group: int, block_rows: int) -> None:
    rows, lengths = ragged([1, 7, 8, 9, 30, 2, 64, 3], 48, seed=1)
    query = F.normalize(torch.randn(11, 48, generator=torch.Generator().manual_seed(2)), dim=1)
    basis = fit_basis(rows, 48)  # every dimension kept: only bfloat16's rounding is left
    scan = compress(project(rows, basis), lengths, basis, group, block_rows=block_rows)
    found = approximate_best(query, scan)  # (D, n)
    reference = sentence_best(query, as_collection(rows, lengths))  # (D, n)
    assert found.shape == reference.shape
    assert (found - reference).abs().max() < BF16_PRODUCT_ERROR


@pytest.mark.parametrize("group", [1, 4, 8])
@pytest.mark.parametrize("block_rows", [8, 64, 16384])
def test_chosen_documents_score_as_in_the_whole_scan(group: int, block_rows: int) -> None:
    """`approximate_best_of` reads the chosen documents' rows only, and gives exactly the
    whole scan's rows for them: few documents (gathered), none, and most (the whole scan)."""
    generator = torch.Generator().manual_seed(9)
    lengths = torch.randint(1, 40, (300,), generator=generator)
    rows = F.normalize(torch.randn(int(lengths.sum()), 48, generator=generator), dim=1)
    basis = fit_basis(rows, 16)
    scan = compress(project(rows, basis), lengths, basis, group, block_rows=block_rows)
    query = F.normalize(torch.randn(7, 48, generator=generator), dim=1)
    whole = approximate_best(query, scan)  # (D, n)
    ends = torch.cumsum(scan.group_counts, 0) * group  # (D,) padded rows
    every = scan.stored_positions()
    for share in (0.0, 0.02, 0.2, GATHERED_SHARE + 0.1):
        chosen = torch.randperm(300, generator=generator)[: int(share * 300)].sort().values
        assert torch.equal(approximate_best_of(query, scan, chosen), whole[chosen])
        counts = scan.group_counts[chosen] * group
        rows_of = [every[e - c : e] for e, c in zip(ends[chosen], counts, strict=True)]
        expected = torch.cat(rows_of) if rows_of else torch.empty(0, dtype=torch.long)
        assert torch.equal(scan.positions_of(chosen), expected)


def test_a_basis_spanning_the_data_keeps_its_dot_products() -> None:
    generator = torch.Generator().manual_seed(3)
    span = torch.linalg.qr(torch.randn(64, 8, generator=generator)).Q  # (d, 8)
    rows = F.normalize(torch.randn(200, 8, generator=generator) @ span.T, dim=1)  # (200, 64)
    basis = fit_basis(rows, 8)
    assert torch.allclose(basis.T @ basis, torch.eye(8), atol=1e-5)
    projected = project(rows, basis).float()
    assert (projected @ projected.T - rows @ rows.T).abs().max() < BF16_PRODUCT_ERROR


def test_fewer_dimensions_approximate_within_the_dropped_energy() -> None:
    """Rows with most of their energy in 16 of 64 directions: keeping those 16 errs by about
    the rest's share, far less than keeping 16 random directions does."""
    generator = torch.Generator().manual_seed(4)
    scale = torch.cat([torch.ones(16), torch.full((48,), 0.1)])
    rows = F.normalize(torch.randn(500, 64, generator=generator) * scale, dim=1)
    lengths = torch.full((50,), 10)
    query = rows[:20]
    reference = sentence_best(query, as_collection(rows, lengths))
    fitted = fit_basis(rows, 16)
    random = torch.linalg.qr(torch.randn(64, 16, generator=generator)).Q
    errors = {}
    for name, basis in (("fitted", fitted), ("random", random)):
        scan = compress(project(rows, basis), lengths, basis, 8)
        errors[name] = (approximate_best(query, scan) - reference).abs().mean().item()
    assert errors["fitted"] < 0.1 < errors["random"]


def test_rows_are_stored_member_major_in_blocks_and_read_back() -> None:
    rows, lengths = ragged([3, 9, 1, 16, 5, 2], 8, seed=8)
    basis = fit_basis(rows, 8)
    projected = project(rows, basis)
    scan = compress(projected, lengths, basis, 4, block_rows=12)
    padded = projected[padded_positions(lengths, 4)]
    assert len(scan.blocks()) > 2  # 12 rows a block: several
    for _, _, g0, g1, r0, r1 in scan.blocks():
        assert r1 - r0 in (12, 24)  # one size, or a multiple of it for a longer document
        stored = scan.rows[r0:r1].view(4, -1, 8)  # (member, group, k)
        expected = padded[g0 * 4 : g1 * 4].view(g1 - g0, 4, 8).transpose(0, 1)
        assert torch.equal(stored[:, : g1 - g0], expected)
        assert not stored[:, g1 - g0 :].any()  # the unused tail: zero
    everything = torch.arange(len(lengths))
    assert torch.equal(scan.padded_rows(everything), padded)
    held = scan.sentence_rows(lengths)  # each sentence once, padding copies -1
    assert sorted(held[held >= 0].tolist()) == list(range(len(rows)))
    assert torch.equal(scan.rows[held >= 0][torch.argsort(held[held >= 0])], projected)


def test_a_change_equals_compressing_the_changed_collection() -> None:
    rows, lengths = ragged([5, 1, 9, 16, 3], 32, seed=5)
    added, added_lengths = ragged([2, 11], 32, seed=6)
    basis = fit_basis(rows, 12)
    scan = compress(project(rows, basis), lengths, basis, 4)
    keep = torch.tensor([True, False, True, False, True])
    starts = torch.cumsum(lengths, 0) - lengths
    kept_rows = torch.cat(
        [rows[s : s + n] for s, n, k in zip(starts, lengths, keep, strict=True) if k]
    )
    expected = compress(
        project(torch.cat([kept_rows, added]), basis),
        torch.cat([lengths[keep], added_lengths]),
        basis,
        4,
    )
    found = changed(scan, keep, project(added, basis), added_lengths)
    assert torch.equal(found.rows, expected.rows)
    assert torch.equal(found.group_counts, expected.group_counts)
    only_removed = changed(scan, keep, project(added[:0], basis), added_lengths[:0])
    assert only_removed.n_documents == 3


def test_bytes_per_sentence_follow_the_kept_dimensions() -> None:
    rows, lengths = ragged([8] * 100, 384, seed=7)
    basis = fit_basis(rows, 96)
    scan = compress(project(rows, basis), lengths, basis, 8)
    per_sentence = (scan.rows.element_size() * scan.rows.numel()) / len(rows)
    assert per_sentence == 2 * 96  # no padding: every document a multiple of the group


def test_the_scan_calls_the_pacing_hook_before_each_block() -> None:
    """A long scan lets other requests go first and meets its deadline between blocks."""
    from docsim.models.inference.pacing import paced
    from docsim.models.kernels.scan import approximate_best

    rows, lengths = ragged([3, 9, 1, 16, 5, 2], 8, seed=8)
    basis = fit_basis(rows, 8)
    scan = compress(project(rows, basis), lengths, basis, 4, block_rows=12)
    seen: list[int] = []
    with paced(seen.append):
        approximate_best(rows[:2], scan)
    assert seen == [r1 - r0 for _, _, _, _, r0, r1 in scan.blocks()]

    def past_deadline(_rows: int) -> None:
        raise TimeoutError("past its deadline")

    with paced(past_deadline), pytest.raises(TimeoutError):
        approximate_best(rows[:2], scan)
    approximate_best(rows[:2], scan)  # the hook is gone with its block


@pytest.mark.parametrize("part_rows", [1, 7, 40, 100_000])  # a document a part .. one part
@pytest.mark.parametrize("block_rows", [8, 16384])
def test_compressing_in_parts_equals_compressing_at_once(part_rows: int, block_rows: int) -> None:
    """A part of whole documents at a time, a long document (longer than a part and a
    block) included: the same rows, groups and blocks as the whole projected at once; each
    part read once, in order."""
    rows, lengths = ragged([5, 1, 30, 16, 3, 1, 8, 2], 32, seed=7)
    basis = fit_basis(rows, 12)
    reads: list[tuple[int, int]] = []

    def rows_of(s0: int, s1: int) -> torch.Tensor:
        reads.append((s0, s1))
        return rows[s0:s1].half()  # stored rows: float16, projected as float32

    whole = compress(project(rows.half(), basis), lengths, basis, 4, block_rows=block_rows)
    parts = compress_in_parts(
        rows_of, lengths, basis, 4, part_rows=part_rows, block_rows=block_rows
    )
    for name in ("rows", "group_counts", "block_documents", "block_starts"):
        assert torch.equal(getattr(parts, name), getattr(whole, name)), name
    assert [s for s, _ in reads] == [0, *[e for _, e in reads[:-1]]] and reads[-1][1] == len(rows)
    if part_rows >= len(rows):
        assert len(reads) == 1
    if part_rows == 1:
        assert len(reads) == len(lengths)  # a document a part
    empty = compress_in_parts(rows_of, lengths[:0], basis, 4)
    assert empty.rows.shape == (0, 12) and empty.n_documents == 0
    with pytest.raises(ValueError, match="at least one sentence"):
        compress_in_parts(rows_of, torch.tensor([2, 0]), basis, 4)
