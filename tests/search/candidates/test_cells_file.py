"""`search.candidates.cells_file`: cells fitted once are read back by the next service."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from docsim.search.candidates.cells_file import cells_file
from docsim.search.candidates.centroids import CentroidCandidates, LazyCentroids
from docsim.search.searcher import Searcher
from docsim.search.served.sentence_scan import ScanShape, scan_basis


def lazy(searcher: Searcher, seed: int = 0) -> LazyCentroids:
    return LazyCentroids(searcher.index, dimensions=16, seed=seed)


def basis_of(searcher: Searcher, seed: int) -> torch.Tensor:
    """The basis the cells fit (and a compressed scan of 16 dimensions projects on)."""
    return scan_basis(searcher.index.vectors["sentence"], ScanShape(16, 0, seed))


def kept_path(searcher: Searcher, seed: int) -> Path:
    return cells_file(searcher.index, dimensions=16, seed=seed, basis=basis_of(searcher, seed))


def no_fit(*args: object, **kwargs: object) -> CentroidCandidates:
    raise AssertionError("fitted again")


def test_cells_fitted_once_are_read_back_as_they_were(
    searcher: Searcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    for kept in searcher.index.path.glob("cells-*.npz"):
        kept.unlink()
    fitted = lazy(searcher).get()
    path = kept_path(searcher, 0)
    assert list(searcher.index.path.glob("cells-*.npz")) == [path]
    folder_mode = searcher.index.path.stat().st_mode & 0o666
    assert path.stat().st_mode & 0o777 == folder_mode  # readable as the folder is, not 0600
    monkeypatch.setattr(CentroidCandidates, "of_index", no_fit)
    read = lazy(searcher).get()
    for name in ("basis",):
        assert torch.equal(getattr(read.cells, name), getattr(fitted.cells, name))
    for name in ("centroids", "cell_start", "documents", "codes"):
        assert torch.equal(getattr(read.cells.postings, name), getattr(fitted.cells.postings, name))
    for name in ("packed", "cutoffs", "values"):
        assert torch.equal(
            getattr(read.cells.residuals, name), getattr(fitted.cells.residuals, name)
        )
    query = searcher.query_from_index(searcher.index.external_ids[0]).sentence_vectors
    allowed = np.arange(1, searcher.index.n_documents)
    options = {"n_probe": 4, "wide": 20, "refine_probe": 4, "most": 10}
    assert np.array_equal(
        read.candidates(query, allowed, **options), fitted.candidates(query, allowed, **options)
    )
    assert not list(searcher.index.path.glob(".cells-*.tmp"))  # written atomically
    monkeypatch.undo()
    other = lazy(searcher, seed=1).get()  # other settings: other cells, another file
    assert len(list(searcher.index.path.glob("cells-*.npz"))) == 2
    assert not torch.equal(other.cells.postings.centroids, fitted.cells.postings.centroids)
    path.unlink()


def test_a_sharded_coordinator_reads_the_cells_one_compressed_process_kept(
    searcher: Searcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a scan of its own (a sharded coordinator) the cells are fitted in the basis a
    compressed process's scan has, so both find the one kept file: no fit the second time."""
    for kept in searcher.index.path.glob("cells-*.npz"):
        kept.unlink()
    with_scan = LazyCentroids(searcher.index, dimensions=16, seed=3, basis=basis_of(searcher, 3))
    fitted = with_scan.get()
    monkeypatch.setattr(CentroidCandidates, "of_index", no_fit)
    read = lazy(searcher, seed=3).get()
    assert torch.equal(read.cells.postings.codes, fitted.cells.postings.codes)
    assert list(searcher.index.path.glob("cells-*.npz")) == [kept_path(searcher, 3)]
    kept_path(searcher, 3).unlink()


@pytest.mark.parametrize("damage", ["truncated", "not a zip"])
def test_damaged_kept_cells_are_fitted_again(searcher: Searcher, damage: str) -> None:
    fitted = lazy(searcher, seed=2).get()
    path = kept_path(searcher, 2)
    assert path.is_file()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"neither")
    again = lazy(searcher, seed=2).get()
    assert torch.equal(again.cells.postings.codes, fitted.cells.postings.codes)
    assert np.load(path)["codes"].shape == fitted.cells.postings.codes.shape  # kept again


def test_an_unwritable_folder_still_serves_the_fitted_cells(
    searcher: Searcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(np, "savez", refused)
    found = lazy(searcher, seed=3).get()
    assert found.cells.postings.codes.shape[0] == len(searcher.index.ids["sentence"])
    assert not list(searcher.index.path.glob(".cells-*.tmp"))


def test_another_file_layout_or_revision_names_another_file(
    searcher: Searcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept file is read only by a service of the same layout, revision and settings."""
    from docsim.search.candidates import cells_file as module

    named = kept_path(searcher, 0)
    assert named == kept_path(searcher, 0)
    assert named != cells_file(searcher.index, dimensions=8, seed=0, basis=None)
    assert named != cells_file(searcher.index, dimensions=16, seed=0, basis=torch.eye(16))
    monkeypatch.setattr(searcher.index, "revision", searcher.index.revision + 1)
    assert named != kept_path(searcher, 0)
    monkeypatch.undo()
    monkeypatch.setattr(module, "FORMAT", module.FORMAT + 1)
    assert named != kept_path(searcher, 0)
