"""`benchmarks/grown_version.py`: a grown version is a real published version whose copy 0 is
its base and whose other copies are its base's vectors moved by the stated noise."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch

from docsim.indexer.settings import DatabaseSettings
from docsim.indexer.store.db import make_engine
from docsim.indexer.store.reader import stored_documents
from docsim.indexer.store.stored_rows import quantized
from docsim.indexer.store.versions import active_version
from docsim.indexer.text.chunking import add_chunks
from docsim.indexer.text.documents import LEVELS
from docsim.indexer.text.sentences import SentenceSplitter
from docsim.indexer.text.split import split_document
from docsim.models.encoders.transformer import TransformerEncoder
from docsim.search.served.loaded_index import LoadedIndex
from docsim.search.settings import QuerySettings
from tests.utils.indexes import PublishedCopies
from tests.utils.postgres import PostgresServer
from tests.utils.scripts import load_script

NOISE = 0.35


@pytest.fixture(scope="module")
def grown_version() -> ModuleType:
    return load_script("benchmarks/grown_version.py", "grown_version")


def loaded(settings: QuerySettings) -> LoadedIndex:
    engine = make_engine(settings.database_url)
    try:
        return LoadedIndex.load(engine, active_version(engine), sharded=True)
    finally:
        engine.dispose()


def level_rows(index: LoadedIndex, level: str, positions: np.ndarray) -> np.ndarray:
    """`(n, d)` float32: the rows of `level` of the documents at `positions`, in order."""
    start = np.arange(index.n_documents + 1) if level == "document" else index.doc_unit_start[level]
    rows = np.concatenate([np.arange(start[p], start[p + 1]) for p in positions])
    return np.asarray(index.vectors[level][rows], dtype=np.float32)


def stored_step(index: LoadedIndex, level: str, rows: np.ndarray) -> np.ndarray:
    """`(n,)` the step of each of `rows` as the version stores them (0: float16 rows); an
    int8 row read back stores again as the same bytes, so its scale is found so."""
    if index.manifest["levels"][level].get("row_format") != "int8":
        return np.zeros(len(rows))
    return quantized(rows, "int8")["scale"].astype(np.float64)


def test_a_grown_version_holds_its_base_and_perturbed_copies(
    grown_version: ModuleType,
    published_copies: PublishedCopies,
    sample_corpus: Path,
    settings: QuerySettings,
    tiny_encoder_dir: Path,
    tmp_path: Path,
    _postgres: PostgresServer | None,
) -> None:
    published_copies.publish(sample_corpus, settings, tiny_encoder_dir)
    out = QuerySettings(
        data_dir=tmp_path / "grown",
        db=DatabaseSettings(url=_postgres.database() if _postgres else None),
    )
    facts = grown_version.grow_version(settings, out, 3, NOISE)
    base, grown = loaded(settings), loaded(out)
    assert facts["counts"] == {level: 3 * len(base.ids[level]) for level in LEVELS}
    assert grown.manifest["encoder"] == base.manifest["encoder"]
    position = {doc_id: p for p, doc_id in enumerate(grown.external_ids)}
    originals = np.arange(base.n_documents)
    for copy in range(3):
        ids = [grown_version.copy_id(doc_id, copy) for doc_id in base.external_ids]
        at = np.array([position[i] for i in ids])
        for level in LEVELS:
            want, got = level_rows(base, level, originals), level_rows(grown, level, at)
            assert got.shape == want.shape
            cosines = (want * got).sum(axis=1)  # (n,) both unit rows
            # unit rows, as stored: an int8 row's norm moves by at most sqrt(d) half-steps
            moved = 2e-3 + np.sqrt(got.shape[1]) * stored_step(grown, level, got) / 2  # (n,)
            assert (np.abs(np.linalg.norm(got, axis=1) - 1.0) <= moved).all(), (copy, level)
            if copy == 0:
                np.testing.assert_array_equal(got, want)
            else:  # cos(x, copy) is about 1 / sqrt(1 + noise^2) = 0.944, a bit less at d = 32
                assert 0.90 < cosines.mean() < 0.96, (copy, level, cosines.mean())
                assert cosines.min() > 0.8
    # the copies are separate draws
    first = level_rows(grown, "sentence", np.array([position[f"{base.external_ids[0]}~1"]]))
    second = level_rows(grown, "sentence", np.array([position[f"{base.external_ids[0]}~2"]]))
    assert not np.allclose(first, second)
    engine = make_engine(out.database_url)
    try:
        texts = {d.doc_id: d.text for d in stored_documents(engine, grown.version_id)}
    finally:
        engine.dispose()
    # the copies are distinct texts of the same shape: as long, the same characters apart
    # from swapped lowercase words
    for doc_id in base.external_ids:
        original, copy = texts[doc_id], texts[f"{doc_id}~2"]
        assert len(copy) == len(original)
        assert re.sub("[a-z]", "x", copy) == re.sub("[a-z]", "x", original)
    assert sum(texts[d] != texts[f"{d}~2"] for d in base.external_ids) > len(base.external_ids) / 2
    assert facts["vary"] == 0.3


def test_word_swaps_keep_each_copy_the_shape_of_its_original(grown_version: ModuleType) -> None:
    vocabulary = ["court", "judge", "appeal", "mercy", "civil", "liable", "bench"]
    pieces = [1, 1, 2, 1, 1, 2, 1]  # "appeal" and "liable" form a class of their own
    swaps = grown_version.WordSwaps(vocabulary, pieces, vary=1.0)
    assert "civil" not in swaps.partners  # an enumerator's letters are never swapped
    text = (
        "The court heard the appeal. Mercy was shown; the judge, liable. (court) Bench. "
        "At 3 P.M. Non-judge, U.S.-bench"  # a hyphenated token after a period, or with one
    )
    copy = swaps.text(text, 1)
    assert len(copy) == len(text)
    assert swaps.text(text, 1) == copy  # the same in every run
    assert swaps.text(text, 0) == text
    assert grown_version.WordSwaps(vocabulary, pieces, vary=0.0).text(text, 3) == text
    words, original = copy.split(), text.split()
    for i, (new, old) in enumerate(zip(words, original, strict=True)):
        bare = old.strip(".,;()")
        after_period = i and original[i - 1].rstrip("\"')").endswith(".")
        if "." in old or after_period or bare not in swaps.partners:
            assert new == old  # at a period, capitalised, or without a partner: kept
        else:
            assert new.strip(".,;()") in swaps.partners[bare] and new != old
    assert copy.split()[1] != "court" and copy.split()[4] == "appeal."


def test_a_copy_split_otherwise_than_its_original_is_refused(
    grown_version: ModuleType,
    published_copies: PublishedCopies,
    sample_corpus: Path,
    settings: QuerySettings,
    tiny_encoder_dir: Path,
    splitter: SentenceSplitter,
    tiny_encoder: TransformerEncoder,
) -> None:
    published_copies.publish(sample_corpus, settings, tiny_encoder_dir)
    engine = make_engine(settings.database_url)
    try:
        documents = list(stored_documents(engine, active_version(engine).version_id))
        index = LoadedIndex.load(engine, active_version(engine), sharded=True)
    finally:
        engine.dispose()
    replay = grown_version.ReplayEngine(grown_version.BaseVectors(index), NOISE)
    first, other = documents[0], next(d for d in documents if len(d.text) != len(documents[0].text))
    renamed = replace(split_document(other, splitter), doc_id=f"{first.doc_id}~1")
    with pytest.raises(ValueError, match="units, its original has"):
        replay.vectors_of(renamed)
    # given the encoder, such a copy is encoded for what it is
    chunked = add_chunks([renamed], tiny_encoder, 128)[0]
    encoding = grown_version.ReplayEngine(grown_version.BaseVectors(index), NOISE, tiny_encoder)
    got = encoding.vectors_of(chunked)
    want = tiny_encoder.encode_documents([chunked.encoder_input()])[0]
    assert encoding.encoded == 1
    assert torch.equal(got.sentences, want.sentences) and torch.equal(got.chunks, want.chunks)
