"""Candidate mode's cells kept beside the version they were fitted on, so that a service
started again reads them instead of fitting them (at a hundred times AILA, 34 million
sentences, the fit takes a quarter of an hour on 2 cores; reading them back, seconds).

The file is `<version folder>/cells-<key>.npz`, the key a hash of what the cells depend on:
the version, its revision (the document changes applied when it was loaded), its sentence
count, the fit's dimensions and seed and the basis it was given. It is a cache, not part of
the version: written atomically after a fit (a failure to write is logged and ignored, for
a read-only data directory), read where the key matches (a damaged file is ignored and
fitted again), and removed with the version's folder."""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import torch

from docsim.models.kernels.centroid_interaction import CellPostings
from docsim.models.kernels.residuals import Residuals
from docsim.search.served.loaded_index import LoadedIndex

logger = logging.getLogger(__name__)
# the layout of the file: part of its key, so that a service whose layout changed fits anew
# rather than reading arrays it would misread
FORMAT = 1


def cells_file(
    index: LoadedIndex, *, dimensions: int, seed: int, basis: torch.Tensor | None
) -> Path:
    """Where the cells of `index` fitted with these settings are kept."""
    key = hashlib.sha256()
    n_sentences = len(index.ids["sentence"])
    named = f"{FORMAT}:{index.version_id}:{index.revision}:{n_sentences}:{dimensions}:{seed}"
    key.update(named.encode())
    if basis is not None:
        key.update(basis.float().contiguous().numpy().tobytes())
    return index.path / f"cells-{key.hexdigest()[:16]}.npz"


def save_cells(
    path: Path, basis: torch.Tensor, postings: CellPostings, residuals: Residuals
) -> None:
    """Write the cells to `path` (through a temporary file of its own renamed over it: two
    services fitting the same cells at once each write whole files)."""
    tensors = {
        "basis": basis,
        "centroids": postings.centroids,
        "cell_start": postings.cell_start,
        "documents": postings.documents,
        "codes": postings.codes,
        "packed": residuals.packed,
        "cutoffs": residuals.cutoffs,
        "values": residuals.values,
    }
    arrays: dict[str, np.ndarray] = {name: t.numpy() for name, t in tensors.items()}
    arrays["n_documents"] = np.array(postings.n_documents, dtype=np.int64)
    partial: Path | None = None
    try:
        handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        partial = Path(name)
        with os.fdopen(handle, "wb") as out:
            np.savez(out, **arrays)  # type: ignore[arg-type]  # numpy's stub: allow_pickle
        # readable as the version's other files are (mkstemp's file is its owner's alone)
        os.chmod(partial, stat.S_IMODE(path.parent.stat().st_mode) & 0o666)
        os.replace(partial, path)
    except (OSError, ValueError) as error:
        if partial is not None:
            partial.unlink(missing_ok=True)
        logger.warning("Could not keep the fitted cells in %s: %s", path.name, error)


def load_cells(path: Path) -> tuple[torch.Tensor, CellPostings, Residuals] | None:
    """The cells kept in `path`, or None where there is none or it cannot be read."""
    if not path.is_file():
        return None
    try:
        with np.load(path) as saved:
            arrays = {name: torch.from_numpy(saved[name]) for name in saved.files}
        postings = CellPostings(
            arrays["centroids"],
            arrays["cell_start"],
            arrays["documents"],
            arrays["codes"],
            int(arrays["n_documents"]),
        )
        residuals = Residuals(arrays["packed"], arrays["cutoffs"], arrays["values"])
        return arrays["basis"], postings, residuals
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        logger.warning("Ignoring the kept cells %s (%s): fitting them again", path.name, error)
        return None
