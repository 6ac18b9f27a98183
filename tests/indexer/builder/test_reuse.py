"""Re-indexing what changed: a build reuses the active version's vectors of unchanged documents,
and gives the version a full build of the same corpus gives."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine, select, update

from docsim.indexer.builder.pipeline import BuildResult
from docsim.indexer.jobs.updates import change_documents
from docsim.indexer.store.kept_vectors import LevelRows
from docsim.indexer.store.stored_rows import read_float16
from docsim.indexer.store.tables import LEVEL_TABLES, chunks, documents
from docsim.indexer.store.units import stored_additions
from docsim.indexer.store.versions import active_version, version_row
from docsim.indexer.text.corpus import read_corpus
from docsim.indexer.text.documents import LEVELS
from docsim.indexer.text.sentences import SentenceSplitter
from docsim.indexer.text.split import split_document
from docsim.models.encoders.transformer import TransformerEncoder
from docsim.models.inference.backends import native_openvino_backend
from docsim.search.settings import QuerySettings
from tests.indexer.builder.test_pipeline import build
from tests.utils.corpora import synthetic_markdown, write_jsonl, write_text_corpus

Vectors = dict[str, dict[str, np.ndarray]]  # external id -> level -> (n, d) float16


def vectors_of(engine: Engine, result: BuildResult) -> Vectors:
    """Every live document's vectors of every level, in document order, read plainly: each
    level's whole files and the vectors of documents added later, by id."""
    version = version_row(engine, result.version_id)
    assert version is not None
    manifest, folder = version.published_manifest(), Path(version.path)
    additions = stored_additions(engine, result.version_id)
    out: Vectors = {}
    with engine.connect() as conn:
        names = dict(
            conn.execute(
                select(documents.c.doc_id, documents.c.external_id).where(
                    documents.c.version_id == result.version_id,
                    documents.c.retired_revision.is_(None),
                )
            ).all()
        )
        for level in LEVELS:
            entry = manifest["levels"][level]
            by_id = dict(
                zip(
                    np.load(folder / entry["ids_file"]).tolist(),
                    read_float16(folder / entry["vectors_file"]),
                    strict=True,
                )
            )
            ids, rows = additions[level]
            by_id.update(zip(ids.tolist(), rows.astype(np.float16), strict=True))
            table, id_column = LEVEL_TABLES[level]
            units = conn.execute(
                select(id_column, table.c.doc_id)
                .where(table.c.doc_id.in_(list(names)))
                .order_by(id_column)
            ).all()
            for unit_id, doc_id in units:
                out.setdefault(names[doc_id], {}).setdefault(level, []).append(by_id[unit_id])
    return {
        name: {lv: np.stack(rows) for lv, rows in levels.items()} for name, levels in out.items()
    }


def chunks_of(engine: Engine, version_id: int) -> dict[str, list[tuple[int, int, int]]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                documents.c.external_id, chunks.c.char_start, chunks.c.char_end, chunks.c.n_tokens
            )
            .join(documents, documents.c.doc_id == chunks.c.doc_id)
            .where(chunks.c.version_id == version_id, documents.c.retired_revision.is_(None))
            .order_by(chunks.c.chunk_id)
        ).all()
    out: dict[str, list[tuple[int, int, int]]] = {}
    for name, *chunk in rows:
        out.setdefault(name, []).append(tuple(chunk))
    return out


def no_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self, documents, sentence_vectors=None):
        raise AssertionError(f"encoded {len(documents)} documents")

    monkeypatch.setattr(TransformerEncoder, "encode_documents", refuse)


def test_a_second_build_of_an_unchanged_corpus_encodes_nothing(
    sample_corpus: Path,
    settings: QuerySettings,
    engine: Engine,
    tiny_encoder: TransformerEncoder,
    splitter: SentenceSplitter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = build(sample_corpus, settings, engine, tiny_encoder, splitter)
    no_encoding(monkeypatch)
    second = build(sample_corpus, settings, engine, tiny_encoder, splitter)
    assert active_version(engine).version_id == second.version_id
    n_sentences = first.manifest["counts"]["sentence"]
    assert second.manifest["build"]["reused"] == {
        "from_version": first.version_id,
        "documents": first.manifest["counts"]["document"],
        "sentences": n_sentences,
        "encoded_sentences": 0,
    }
    assert second.manifest["counts"] == first.manifest["counts"]
    assert second.manifest["encoder"] == first.manifest["encoder"]  # the same export
    before, after = vectors_of(engine, first), vectors_of(engine, second)
    assert before.keys() == after.keys()
    for name in before:
        for level in LEVELS:
            np.testing.assert_array_equal(after[name][level], before[name][level])
    assert chunks_of(engine, second.version_id) == chunks_of(engine, first.version_id)


def test_only_new_and_changed_documents_are_encoded_and_the_version_is_a_full_builds(
    tmp_path: Path,
    settings: QuerySettings,
    engine: Engine,
    tiny_encoder: TransformerEncoder,
    splitter: SentenceSplitter,
) -> None:
    texts = synthetic_markdown(8)
    names = sorted(texts)
    corpus = write_text_corpus(tmp_path / "corpus", {f"{n}.md": texts[n] for n in names[:6]})
    first = build(corpus, settings, engine, tiny_encoder, splitter)
    changed, removed, added = names[1], names[5], names[6:]
    (corpus / f"{changed}.md").write_text(texts[changed] + "\n\nOne more closing sentence here.")
    (corpus / f"{removed}.md").unlink()
    for name in added:
        (corpus / f"{name}.md").write_text(texts[name])
    second = build(corpus, settings, engine, tiny_encoder, splitter)

    fresh = {changed, *added}
    expected_encoded = sum(
        split_document(source, splitter).counts()["sentence"]
        for source in read_corpus(corpus)
        if source.doc_id in fresh
    )
    reused = second.manifest["build"]["reused"]
    assert reused["documents"] == 4 and reused["encoded_sentences"] == expected_encoded
    assert reused["sentences"] + expected_encoded == second.manifest["counts"]["sentence"]

    settings.index.reuse_vectors = False
    reference = build(corpus, settings, engine, tiny_encoder, splitter)
    assert "reused" not in reference.manifest["build"]
    assert reference.manifest["encoder"] == second.manifest["encoder"]
    assert reference.manifest["counts"] == second.manifest["counts"]
    got, want = vectors_of(engine, second), vectors_of(engine, reference)
    kept_before = vectors_of(engine, first)
    assert got.keys() == want.keys() == set(names) - {removed}
    for name in got:
        for level in LEVELS:
            # the same model: equal up to the batch a document was encoded in
            np.testing.assert_allclose(got[name][level], want[name][level], atol=2e-3)
            if name not in fresh:  # kept: the very vectors of the first version
                np.testing.assert_array_equal(got[name][level], kept_before[name][level])
    assert chunks_of(engine, second.version_id) == chunks_of(engine, reference.version_id)


def test_a_document_added_live_is_reused_from_its_stored_vectors(
    tmp_path: Path,
    settings: QuerySettings,
    engine: Engine,
    tiny_encoder: TransformerEncoder,
    splitter: SentenceSplitter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    texts = synthetic_markdown(5)
    records = [{"id": name, "title": name, "text": text} for name, text in sorted(texts.items())]
    first = build(
        write_jsonl(tmp_path / "v1.jsonl", records[:4]), settings, engine, tiny_encoder, splitter
    )
    whole = write_jsonl(tmp_path / "v2.jsonl", records)
    late = [doc for doc in read_corpus(whole) if doc.doc_id == records[4]["id"]]
    change_documents(
        engine,
        settings.indexes_dir,
        version_id=first.version_id,
        revision=0,
        upserts=late,
        deletes=[],
        encoder=tiny_encoder,
        splitter=splitter,
        chunk_tokens=first.manifest["chunk_tokens"],
    )
    live = vectors_of(engine, first)
    no_encoding(monkeypatch)
    second = build(whole, settings, engine, tiny_encoder, splitter)
    assert second.manifest["build"]["reused"]["documents"] == 5
    got = vectors_of(engine, second)
    for level in LEVELS:
        np.testing.assert_array_equal(got[records[4]["id"]][level], live[records[4]["id"]][level])


@pytest.mark.parametrize(
    "change", ["setting off", "chunk size", "no hashes", "encoder", "damaged files"]
)
def test_every_document_is_encoded_when_the_vectors_would_differ(
    change: str,
    sample_corpus: Path,
    settings: QuerySettings,
    engine: Engine,
    tiny_encoder: TransformerEncoder,
    splitter: SentenceSplitter,
    tiny_encoder_dir: Path,
    tmp_path: Path,
) -> None:
    first = build(sample_corpus, settings, engine, tiny_encoder, splitter)
    encoder = tiny_encoder
    if change == "setting off":
        settings.index.reuse_vectors = False
    elif change == "chunk size":
        settings.index.chunk_tokens = first.manifest["chunk_tokens"] - 8
    elif change == "no hashes":  # a version built before hashes were recorded
        with engine.begin() as conn:
            conn.execute(update(documents).values(content_sha256=None))
    elif change == "damaged files":  # served as corrupt; reindexing is how it is repaired
        vectors = first.path / first.manifest["levels"]["sentence"]["vectors_file"]
        data = bytearray(vectors.read_bytes())
        data[-1] ^= 0xFF
        vectors.write_bytes(bytes(data))
    else:  # other weights
        config = json.loads((tiny_encoder_dir / "config.json").read_text())
        other = tmp_path / "other"
        other.mkdir()
        for item in tiny_encoder_dir.iterdir():
            (other / item.name).write_bytes(item.read_bytes())
        config["layer_norm_eps"] = 1e-6
        (other / "config.json").write_text(json.dumps(config))
        encoder = TransformerEncoder.from_directory(other, precision="fp32")
    second = build(sample_corpus, settings, engine, encoder, splitter)
    reused = second.manifest["build"].get("reused")
    if change in {"setting off", "chunk size", "encoder", "damaged files"}:
        assert reused is None
    else:
        assert reused == {
            "from_version": first.version_id,
            "documents": 0,
            "sentences": 0,
            "encoded_sentences": second.manifest["counts"]["sentence"],
        }


def test_an_int8_build_reuses_the_active_versions_own_export(
    sample_corpus: Path,
    settings: QuerySettings,
    engine: Engine,
    tiny_encoder: TransformerEncoder,
    splitter: SentenceSplitter,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings.encoder.cache_dir = tmp_path / "cache"
    first = build(sample_corpus, settings, engine, tiny_encoder, splitter)
    assert first.manifest["backend"]["name"] == native_openvino_backend()
    settings.encoder.cache_dir = tmp_path / "emptied cache"

    def no_export(*args, **kwargs):
        raise AssertionError("calibrated again")

    monkeypatch.setattr(TransformerEncoder, "export_openvino", no_export)
    fresh = TransformerEncoder.from_directory(tiny_encoder.source_dir, precision="fp32")
    second = build(sample_corpus, settings, engine, fresh, splitter)
    assert second.manifest["encoder"]["backend"] == first.manifest["encoder"]["backend"]
    assert second.manifest["backend"]["calibration"] == first.manifest["backend"]["calibration"]
    assert second.manifest["build"]["reused"]["encoded_sentences"] == 0
    assert (second.path / "encoder" / "model.xml").is_file()


def test_level_rows_read_by_id_as_the_whole_file_gives_them(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((50, 6)).astype(np.float16)
    ids = np.sort(rng.choice(10_000, 50, replace=False)).astype(np.int64)
    np.save(tmp_path / "v.npy", vectors)
    np.save(tmp_path / "i.npy", ids)
    rows = LevelRows(tmp_path, {"vectors_file": "v.npy", "ids_file": "i.npy"})
    try:
        for picked in ([], [0], [3, 4, 5, 9, 10, 40], list(range(50)), [49]):
            got = rows.rows(ids[picked])
            assert got is not None
            np.testing.assert_array_equal(got, vectors[picked])
        missing = np.setdiff1d(np.arange(ids[0], ids[-1]), ids)[:1]  # between two ids
        assert rows.rows(np.concatenate([ids[:2], missing])) is None
        assert rows.rows(np.array([ids[-1] + 1])) is None
    finally:
        rows.close()
