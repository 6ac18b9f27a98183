"""Builds on the OpenVINO backends: the export is cached, kept with the version, and serves
it; `auto` picks int8 where the CPU multiplies int8 natively, float32 elsewhere."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from sqlalchemy import Engine

from docsim.indexer.builder.backend import calibration_texts, resolve_backend
from docsim.indexer.builder.pipeline import BuildResult
from docsim.indexer.errors import BackendError, IndexBuildError
from docsim.indexer.settings import load_configured_encoder
from docsim.indexer.store.stored_rows import read_float16
from docsim.indexer.text.chunking import add_chunks
from docsim.indexer.text.corpus import read_corpus
from docsim.indexer.text.sentences import SentenceSplitter
from docsim.indexer.text.split import split_document
from docsim.models.encoders.colde import ColdeEncoder
from docsim.models.encoders.colde import from_base as from_colde_base
from docsim.models.encoders.graph import GraphEncoder
from docsim.models.encoders.graph import from_base as from_graph_base
from docsim.models.encoders.transformer import TransformerEncoder
from docsim.models.inference.backends import (
    BUILD_SHAPE_CACHE_CAPACITY,
    OPENVINO_FP32,
    OPENVINO_INT8,
    SHAPE_CACHE_CAPACITY,
    TORCH,
    files_sha256,
    is_quantized,
)
from docsim.search.errors import IndexMismatchError
from docsim.search.searcher import Searcher
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings
from tests.indexer.builder.test_pipeline import build


@pytest.fixture()
def own_cache(settings: QuerySettings, tmp_path: Path) -> QuerySettings:
    """QuerySettings on the int8 backend with a cache of their own (the suite's shared one may
    already hold ours)."""
    settings.encoder.cache_dir = tmp_path / "cache"
    settings.encoder.backend = OPENVINO_INT8
    return settings


@pytest.mark.parametrize(("native", "expected"), [(True, OPENVINO_INT8), (False, OPENVINO_FP32)])
def test_auto_is_openvino_for_transformers_and_colde_on_the_cpu(
    settings: QuerySettings,
    tiny_encoder: TransformerEncoder,
    tiny_encoder_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    native: bool,
    expected: str,
) -> None:
    """int8 where the CPU multiplies int8 natively, float32 where it does not."""
    monkeypatch.setattr("docsim.models.inference.backends.int8_native", lambda: native)
    colde = ColdeEncoder(from_colde_base(tiny_encoder_dir), name="c", source_dir=tiny_encoder_dir)
    graph = GraphEncoder(from_graph_base(tiny_encoder_dir), name="g", source_dir=tiny_encoder_dir)
    assert resolve_backend(settings, tiny_encoder) == expected
    assert resolve_backend(settings, colde) == expected
    assert resolve_backend(settings, graph) == TORCH
    settings.encoder.backend = TORCH
    assert resolve_backend(settings, tiny_encoder) == TORCH
    settings.encoder.backend = OPENVINO_INT8
    with pytest.raises(BackendError, match="DOCSIM_ENCODER__BACKEND=torch"):
        resolve_backend(settings, graph)
    tiny_encoder.device = torch.device("meta")  # stands for a GPU: not the CPU
    with pytest.raises(BackendError, match="runs on the CPU, not meta"):
        resolve_backend(settings, tiny_encoder)
    settings.encoder.backend = "auto"
    assert resolve_backend(settings, tiny_encoder) == TORCH


def test_calibration_samples_sentences_and_chunks_of_the_corpus(
    sample_corpus: Path,
    settings: QuerySettings,
    tiny_encoder: TransformerEncoder,
    splitter: SentenceSplitter,
) -> None:
    docs = [split_document(source, splitter) for source in read_corpus(sample_corpus)]
    settings.encoder.calibration_sentences, settings.encoder.calibration_chunks = 40, 6
    sentences, chunks = calibration_texts(docs, tiny_encoder, 60, settings)
    assert len(sentences) == 40 and len(chunks) == 6
    every_sentence = {doc.text[s.start : s.end] for doc in docs for s in doc.sentences()}
    assert set(sentences) <= every_sentence
    texts = "\n".join(doc.text for doc in docs)
    assert all(chunk in texts for chunk in chunks)
    assert max(len(tiny_encoder.tokenize([c])[0]) for c in chunks) > 40  # long inputs too
    assert (sentences, chunks) == calibration_texts(docs, tiny_encoder, 60, settings)


def test_an_int8_build_keeps_its_export_and_serves_with_it(
    sample_corpus: Path,
    own_cache: QuerySettings,
    engine: Engine,
    tiny_encoder: TransformerEncoder,
    splitter: SentenceSplitter,
) -> None:
    settings = own_cache
    result = build(sample_corpus, settings, engine, tiny_encoder, splitter)
    manifest = result.manifest
    assert manifest["backend"]["name"] == OPENVINO_INT8 and manifest["backend"]["dir"] == "encoder"
    assert manifest["backend"]["calibration"]["corpus"] == str(sample_corpus)
    kept = result.path / "encoder"
    assert is_quantized(kept)
    assert manifest["encoder"]["backend"]["sha256"] == files_sha256(kept)
    assert len(list(settings.encoder.cache_dir.iterdir())) == 1

    searcher = open_searcher(settings, engine)
    assert searcher.encoder.identity()["backend"] == manifest["encoder"]["backend"]
    # a build bounds OpenVINO's kernel cache more tightly than a service (its memory)
    assert tiny_encoder.backend.shape_cache == BUILD_SHAPE_CACHE_CAPACITY  # type: ignore[attr-defined]
    assert searcher.encoder.backend.shape_cache == SHAPE_CACHE_CAPACITY  # type: ignore[attr-defined]
    assert BUILD_SHAPE_CACHE_CAPACITY < SHAPE_CACHE_CAPACITY
    # the served encoder encodes the collection's own sentences as the build did
    ids = np.load(result.path / "sentence.ids.npy")
    stored = read_float16(
        result.path / result.manifest["levels"]["sentence"]["vectors_file"]
    ).astype(np.float32)
    first = split_document(next(iter(read_corpus(sample_corpus))), splitter)
    texts = [first.text[s.start : s.end] for s in first.sentences()]
    served = searcher.encoder.encode(texts).numpy()
    order = np.argsort(ids)[: len(texts)]  # the first document's sentences have the first ids
    np.testing.assert_allclose(served, stored[order], atol=4e-3)


def test_a_float32_build_exports_without_calibrating_and_matches_torch(
    sample_corpus: Path,
    settings: QuerySettings,
    engine: Engine,
    tiny_encoder: TransformerEncoder,
    splitter: SentenceSplitter,
    tmp_path: Path,
) -> None:
    """`openvino-fp32` (the choice where int8 products are not native): nothing calibrated,
    the export unquantised, and the served and stored vectors those of the torch model."""
    settings.encoder.cache_dir = tmp_path / "cache"
    settings.encoder.backend = OPENVINO_FP32
    reference = TransformerEncoder.from_directory(tiny_encoder.source_dir, precision="fp32")
    result = build(sample_corpus, settings, engine, tiny_encoder, splitter)
    backend = result.manifest["backend"]
    assert backend["name"] == OPENVINO_FP32 and backend["dir"] == "encoder"
    assert "corpus" not in backend["calibration"]  # nothing calibrated
    assert result.manifest["encoder"]["backend"]["name"] == OPENVINO_FP32
    assert not is_quantized(result.path / "encoder")

    searcher = open_searcher(settings, engine)
    assert searcher.encoder.backend.name == OPENVINO_FP32  # type: ignore[attr-defined]
    first = split_document(next(iter(read_corpus(sample_corpus))), splitter)
    texts = [first.text[s.start : s.end] for s in first.sentences()]
    expected = reference.encode(texts).numpy()
    np.testing.assert_allclose(searcher.encoder.encode(texts).numpy(), expected, atol=1e-4)
    ids = np.load(result.path / "sentence.ids.npy")
    stored = stored_level(result, "sentence")[np.argsort(ids)[: len(texts)]]
    np.testing.assert_allclose(stored, expected, atol=2e-3)  # float16 rows


def test_a_second_build_of_the_same_encoder_does_not_export_again(
    sample_corpus: Path,
    own_cache: QuerySettings,
    engine: Engine,
    tiny_encoder: TransformerEncoder,
    splitter: SentenceSplitter,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = build(sample_corpus, own_cache, engine, tiny_encoder, splitter)
    own_cache.index.reuse_vectors = False  # else it runs on the first version's own export

    def no_export(*args, **kwargs):
        raise AssertionError("exported again")

    monkeypatch.setattr(TransformerEncoder, "export_openvino", no_export)
    fresh = TransformerEncoder.from_directory(tiny_encoder.source_dir, precision="fp32")
    with caplog.at_level(logging.INFO, logger="docsim.indexer.builder.backend"):
        second = build(sample_corpus, own_cache, engine, fresh, splitter)
    assert "Using the cached openvino-int8 export" in caplog.text
    assert second.manifest["encoder"]["backend"] == first.manifest["encoder"]["backend"]


def test_a_version_whose_export_changed_is_not_served(
    sample_corpus: Path,
    own_cache: QuerySettings,
    engine: Engine,
    tiny_encoder: TransformerEncoder,
    splitter: SentenceSplitter,
) -> None:
    result = build(sample_corpus, own_cache, engine, tiny_encoder, splitter)
    weights = result.path / "encoder" / "model.bin"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.unlink()  # a hard link to the cache: replace, do not edit in place
    weights.write_bytes(bytes(data))
    with pytest.raises(IndexMismatchError, match="missing or changed; reindex"):
        open_searcher(own_cache, engine)
    weights.unlink()
    with pytest.raises(IndexMismatchError, match="cannot run here"):
        open_searcher(own_cache, engine)


def test_a_backend_that_cannot_run_the_encoder_fails_the_build_cleanly(
    sample_corpus: Path,
    settings: QuerySettings,
    engine: Engine,
    tiny_encoder: TransformerEncoder,
    splitter: SentenceSplitter,
) -> None:
    settings.encoder.backend = OPENVINO_INT8
    tiny_encoder.device = torch.device("meta")  # stands for a GPU: not the CPU
    with pytest.raises(IndexBuildError, match="runs on the CPU, not meta"):
        build(sample_corpus, settings, engine, tiny_encoder, splitter)
    assert not list((settings.data_dir / "indexes").glob("0*"))


def built_then_served(
    mode: str,
    sample_corpus: Path,
    settings: QuerySettings,
    engine: Engine,
    tiny_encoder_dir: Path,
    splitter: SentenceSplitter,
) -> tuple[BuildResult, Searcher]:
    """The sample built with `chunk_vectors=mode`, then served while the setting says
    `encode`: the manifest's mode wins."""
    settings.encoder.name = str(tiny_encoder_dir)
    settings.encoder.chunk_vectors = mode  # type: ignore[assignment]
    result = build(sample_corpus, settings, engine, load_configured_encoder(settings), splitter)
    assert result.manifest["encoder"]["chunk_vectors"] == mode
    settings.encoder.chunk_vectors = "encode"
    searcher = open_searcher(settings, engine)
    assert searcher.encoder.chunk_vectors == mode  # type: ignore[attr-defined]
    return result, searcher


def test_a_one_pass_index_is_served_one_pass_whatever_the_setting_says(
    sample_corpus: Path,
    settings: QuerySettings,
    engine: Engine,
    tiny_encoder_dir: Path,
    splitter: SentenceSplitter,
) -> None:
    result, searcher = built_then_served(
        "sentences", sample_corpus, settings, engine, tiny_encoder_dir, splitter
    )
    # the served encoder gives an indexed document the document vector the build stored
    source = next(iter(read_corpus(sample_corpus)))
    doc = add_chunks([split_document(source, splitter)], searcher.encoder, 126)[0]
    vector = searcher.encoder.encode_documents([doc.encoder_input()])[0].document
    stored = read_float16(
        result.path / result.manifest["levels"]["document"]["vectors_file"]
    ).astype(np.float32)
    ids = np.load(result.path / "document.ids.npy")
    np.testing.assert_allclose(vector.numpy(), stored[np.argmin(ids)], atol=4e-3)
    two_pass = load_configured_encoder(settings).encode_documents([doc.encoder_input()])[0]
    assert not np.allclose(two_pass.document.numpy(), stored[np.argmin(ids)], atol=4e-3)


def test_a_late_chunked_index_gives_a_posted_copy_its_stored_sentence_vectors(
    sample_corpus: Path,
    settings: QuerySettings,
    engine: Engine,
    tiny_encoder_dir: Path,
    splitter: SentenceSplitter,
) -> None:
    result, searcher = built_then_served(
        "late", sample_corpus, settings, engine, tiny_encoder_dir, splitter
    )
    # posted, an indexed document is encoded as the build encoded it: in one chunk pass
    query = searcher.query_from_source(next(iter(read_corpus(sample_corpus))))
    n = len(query.sentence_vectors)
    stored = read_float16(
        result.path / result.manifest["levels"]["sentence"]["vectors_file"]
    ).astype(np.float32)
    ids = np.load(result.path / "sentence.ids.npy")
    np.testing.assert_allclose(
        query.sentence_vectors.numpy(), stored[np.argsort(ids)[:n]], atol=4e-3
    )
    alone = searcher.encoder.encode([query.text[a:b] for a, b in query.level_spans["sentence"]])
    assert not np.allclose(alone.numpy(), stored[np.argsort(ids)[:n]], atol=4e-3)
    for level in ("document", "chunk", "paragraph"):
        assert level in query.level_vectors  # every level came from the one pass


def test_the_backend_choices_are_the_runtimes_names() -> None:
    """`indexer.choices` spells the backends out so that the command line need not import
    the runtimes; they must stay `models.inference.backends`'s names."""
    from docsim.indexer.choices import BackendChoice
    from docsim.models.inference.backends import OPENVINO_FP32, OPENVINO_INT8, TORCH

    assert {c.value for c in BackendChoice} == {"auto", TORCH, OPENVINO_INT8, OPENVINO_FP32}


def stored_level(result: BuildResult, level: str) -> np.ndarray:
    """`(n, d)` float32: the level's rows as the version stores them, read back."""
    return read_float16(result.path / result.manifest["levels"][level]["vectors_file"]).astype(
        np.float32
    )
