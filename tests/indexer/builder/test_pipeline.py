from __future__ import annotations

import gc
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sqlalchemy import Engine, select

from docsim.indexer.builder.pipeline import build_index
from docsim.indexer.builder.split_plan import PLAN_PREFIX
from docsim.indexer.errors import IndexBuildError
from docsim.indexer.store.level_files import open_level_index
from docsim.indexer.store.stored_rows import quantized, read_float16
from docsim.indexer.store.tables import LEVEL_TABLES, documents, index_versions, sentences
from docsim.indexer.store.units import count_units, level_ids
from docsim.indexer.store.versions import active_version
from docsim.indexer.text.chunking import add_chunks
from docsim.indexer.text.corpus import read_corpus
from docsim.indexer.text.documents import Document
from docsim.indexer.text.sentences import SentenceSplitter
from docsim.indexer.text.split import split_document
from docsim.models.encoders.transformer import TransformerEncoder
from docsim.search.settings import QuerySettings
from tests.utils.corpora import write_text_corpus


def build(corpus: Path, settings: QuerySettings, engine: Engine, encoder, splitter):
    return build_index(
        corpus,
        settings=settings,
        engine=engine,
        encoder=encoder,
        splitter=splitter,
        show_progress=False,
    )


def test_build_publishes_a_consistent_version(
    sample_corpus: Path,
    settings: QuerySettings,
    engine: Engine,
    tiny_encoder: TransformerEncoder,
    splitter: SentenceSplitter,
) -> None:
    result = build(sample_corpus, settings, engine, tiny_encoder, splitter)
    manifest = result.manifest
    assert active_version(engine).version_id == result.version_id
    assert (result.path / "manifest.json").exists()
    assert not list(result.path.parent.glob("*.tmp"))
    assert not list(result.path.parent.glob(f"{PLAN_PREFIX}*"))
    assert manifest["encoder"]["checkpoint_sha256"] and manifest["dim"] == tiny_encoder.dim
    assert manifest["splitter"]["params_sha256"] == splitter.sha256

    expected = dict.fromkeys(LEVEL_TABLES, 0)
    for source in read_corpus(sample_corpus):
        for level, n in split_document(source, splitter).counts().items():
            expected[level] += n
    sql_counts = count_units(engine, result.version_id)
    assert {lv: sql_counts[lv] for lv in ("document", "section", "paragraph", "sentence")} == {
        lv: expected[lv] for lv in ("document", "section", "paragraph", "sentence")
    }
    assert manifest["counts"] == sql_counts

    # SQL rows and FAISS ids agree at every level; stored float16 vectors match FAISS; a
    # Flat level's float16 file is its one copy on disk (no `.faiss` beside it)
    for level, info in manifest["levels"].items():
        assert info["factory"] == "Flat" and info["index_file"] is None
        assert not (result.path / f"{level}.faiss").exists()
        assert sorted(info["sha256"]) == sorted([info["vectors_file"], info["ids_file"]])
        index = open_level_index(result.path, info)
        sql_ids = level_ids(engine, result.version_id, level)
        np.testing.assert_array_equal(index.ids(), sql_ids)
        np.testing.assert_array_equal(np.load(result.path / info["ids_file"]), sql_ids)
        stored = read_float16(result.path / info["vectors_file"]).astype(np.float32)
        # FAISS holds exactly the stored (float16-rounded) vectors
        np.testing.assert_array_equal(stored, index.reconstruct(np.asarray(sql_ids)))
        # unit rows as stored: an int8 row's norm moves by at most sqrt(d) half-steps (its
        # scale, found again by storing the rows read back: the same bytes)
        step = quantized(stored, "int8")["scale"] if info.get("row_format") == "int8" else 0.0
        moved = 2e-3 + np.sqrt(stored.shape[1]) * step / 2  # (n,)
        assert (np.abs(np.linalg.norm(stored, axis=1) - 1.0) <= moved).all(), level

    # a document's stored vectors equal a direct encoding of that document
    with engine.connect() as conn:
        row = conn.execute(
            select(documents.c.doc_id, documents.c.external_id, documents.c.text)
            .where(documents.c.version_id == result.version_id)
            .order_by(documents.c.doc_id)
            .offset(5)
            .limit(1)
        ).one()
        sentence_rows = conn.execute(
            select(sentences.c.sentence_id, sentences.c.char_start, sentences.c.char_end)
            .where(sentences.c.doc_id == row.doc_id)
            .order_by(sentences.c.position)
        ).all()
    source = next(d for d in read_corpus(sample_corpus) if d.doc_id == row.external_id)
    doc = add_chunks([split_document(source, splitter)], tiny_encoder, manifest["chunk_tokens"])[0]
    assert [(s.start, s.end) for s in doc.sentences()] == [
        (r.char_start, r.char_end) for r in sentence_rows
    ]
    direct = tiny_encoder.encode_documents([doc.encoder_input()])[0]
    info = manifest["levels"]["sentence"]
    index = open_level_index(result.path, info)
    got = index.reconstruct(np.array([r.sentence_id for r in sentence_rows]))

    def assert_same_vectors(stored: np.ndarray, encoded: torch.Tensor) -> None:
        """The stored (float16-rounded) rows are the encoded ones. The encoder computes in
        bfloat16 on the CPU, where AMX tiles (on CPUs that have them) sum in an order that
        depends on the batch: the build's batches and this one document's differ by up to a
        bfloat16 step in a coordinate (measured 0.0039), so rows are compared by cosine, not
        coordinate by coordinate."""
        stored_t = torch.from_numpy(np.atleast_2d(stored))
        cosines = F.cosine_similarity(stored_t, torch.atleast_2d(encoded).float(), dim=1)
        assert stored_t.shape == torch.atleast_2d(encoded).shape
        assert float(cosines.min()) > 0.9999

    assert_same_vectors(got, direct.sentences)
    doc_index = open_level_index(result.path, manifest["levels"]["document"])
    assert_same_vectors(doc_index.reconstruct(np.array([row.doc_id]))[0], direct.document)
    # the document's own vector finds it first
    assert doc_index.search(direct.document.numpy(), 1)[0].ids[0] == row.doc_id


def test_second_build_flips_the_active_version(
    tmp_path: Path,
    settings: QuerySettings,
    engine: Engine,
    tiny_encoder: TransformerEncoder,
    splitter: SentenceSplitter,
) -> None:
    corpus = write_text_corpus(tmp_path / "c", {"a.md": "# A\n\n## S\n\nOne sentence. Two."})
    first = build(corpus, settings, engine, tiny_encoder, splitter)
    (corpus / "b.md").write_text("# B\n\n## S\n\nThree sentences here. Four. Five.")
    second = build(corpus, settings, engine, tiny_encoder, splitter)
    assert second.version_id > first.version_id
    assert active_version(engine).version_id == second.version_id
    assert count_units(engine, second.version_id)["document"] == 2
    assert count_units(engine, first.version_id)["document"] == 1  # kept until garbage-collected


class Delegating:
    """A real encoder, every attribute delegated to it; a subclass changes one method."""

    def __init__(self, inner: TransformerEncoder) -> None:
        self.inner, self.calls = inner, 0

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


class FailingEncoder(Delegating):
    """The `call`-th call of its `method` raises `RuntimeError(message)`."""

    def __init__(self, inner: TransformerEncoder, method: str, call: int, message: str) -> None:
        super().__init__(inner)
        self.method, self.call, self.message = method, call, message

    def __getattr__(self, name: str):
        found = getattr(self.inner, name)
        if name != self.method:
            return found

        def failing(*args, **kwargs):
            self.calls += 1
            if self.calls == self.call:
                raise RuntimeError(self.message)
            return found(*args, **kwargs)

        return failing


def test_failed_build_leaves_the_active_version_untouched(
    sample_corpus: Path,
    tmp_path: Path,
    settings: QuerySettings,
    engine: Engine,
    tiny_encoder: TransformerEncoder,
    splitter: SentenceSplitter,
) -> None:
    small = write_text_corpus(tmp_path / "c", {"a.md": "# A\n\n## S\n\nOne sentence. Two."})
    first = build(small, settings, engine, tiny_encoder, splitter)
    settings.index.block_documents = 4
    with pytest.raises(RuntimeError, match="encoder crashed"):
        exploding = FailingEncoder(tiny_encoder, "encode_documents", 2, "encoder crashed")
        build(sample_corpus, settings, engine, exploding, splitter)
    assert active_version(engine).version_id == first.version_id
    indexes = settings.data_dir / "indexes"
    assert sorted(p.name for p in indexes.iterdir() if not p.name.startswith(".")) == [
        f"{first.version_id:06d}"
    ]
    assert not list(indexes.glob(f"{PLAN_PREFIX}*"))  # the split plan went with the build
    with engine.connect() as conn:
        failed = conn.execute(
            select(
                index_versions.c.version_id, index_versions.c.status, index_versions.c.error
            ).where(index_versions.c.version_id != first.version_id)
        ).one()
    assert failed.status == "failed" and "encoder crashed" in failed.error
    assert all(n == 0 for n in count_units(engine, failed.version_id).values())


def test_a_failure_while_chunking_ahead_fails_the_build_and_stops_its_threads(
    sample_corpus: Path,
    settings: QuerySettings,
    engine: Engine,
    tiny_encoder: TransformerEncoder,
    splitter: SentenceSplitter,
) -> None:
    settings.index.block_documents = 4
    # `token_offsets` runs in the thread that chunks one block ahead of the encoder
    failing = FailingEncoder(tiny_encoder, "token_offsets", 3, "tokenizer crashed")
    with pytest.raises(RuntimeError, match="tokenizer crashed"):
        build(sample_corpus, settings, engine, failing, splitter)
    with engine.connect() as conn:
        (status,) = conn.execute(select(index_versions.c.status)).scalars().all()
        assert status == "failed"
    assert not [t for t in threading.enumerate() if t.name == "docsim-encode"]


class DocumentCountingEncoder(Delegating):
    """Records, at each block, how many split documents are alive in the process."""

    def __init__(self, inner: TransformerEncoder) -> None:
        super().__init__(inner)
        self.alive: list[int] = []

    def encode_documents(self, docs):
        self.alive.append(sum(type(o) is Document for o in gc.get_objects()))
        return self.inner.encode_documents(docs)


@pytest.mark.heavy_sql
def test_a_build_holds_a_few_blocks_of_documents_not_the_corpus(
    sample_corpus: Path,
    settings: QuerySettings,
    engine: Engine,
    tiny_encoder: TransformerEncoder,
    splitter: SentenceSplitter,
) -> None:
    """The split documents wait on disk (`SplitPlan`): while a block is encoded, the process
    holds at most six blocks, not all 48 documents: the one being stored, one encoded and
    queued, the one being encoded, two chunked ahead (one queued, one waiting to be) and one
    being read back and chunked."""
    settings.index.block_documents = 2
    gc.collect()
    before = sum(type(o) is Document for o in gc.get_objects())
    counting = DocumentCountingEncoder(tiny_encoder)
    result = build(sample_corpus, settings, engine, counting, splitter)
    assert result.manifest["counts"]["document"] == 48 and len(counting.alive) == 24
    assert max(counting.alive) - before <= 6 * 2


def test_corpus_without_documents_publishes_nothing(
    tmp_path: Path,
    settings: QuerySettings,
    engine: Engine,
    tiny_encoder: TransformerEncoder,
    splitter: SentenceSplitter,
) -> None:
    corpus = write_text_corpus(tmp_path / "c", {"a.txt": "   ", "b.md": "# Only a title\n"})
    with pytest.raises(IndexBuildError, match=r"no indexable documents .* \(2 skipped\)"):
        build(corpus, settings, engine, tiny_encoder, splitter)
    with engine.connect() as conn:
        assert conn.execute(select(index_versions)).all() == []


def test_encoder_outputs_are_unit_vectors(tiny_encoder: TransformerEncoder) -> None:
    v = tiny_encoder.encode(["a", "b c d"])
    torch.testing.assert_close(v.norm(dim=1), torch.ones(2))


def test_a_build_skips_documents_whose_metadata_conflicts_and_stores_the_types(
    tmp_path: Path,
    settings: QuerySettings,
    engine: Engine,
    tiny_encoder: TransformerEncoder,
    splitter: SentenceSplitter,
) -> None:
    import json

    from docsim.indexer.store.collections import get_collection

    records = [
        {"id": "a", "text": "One judgment. It was heard.", "metadata": {"date": "1990-01-31"}},
        {"id": "b", "text": "Another judgment. It was dismissed.", "metadata": {"date": 2020}},
        {
            "id": "c",
            "text": "A third one. It was allowed.",
            "metadata": {"date": "2001-05-06", "n": 4},
        },
    ]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records))

    result = build(corpus, settings, engine, tiny_encoder, splitter)

    with engine.connect() as conn:
        ids = sorted(conn.execute(select(documents.c.external_id)).scalars())
    assert ids == ["a", "c"]
    (skipped,) = result.skipped
    assert "metadata field 'date' holds date values" in skipped.reason and "2020" in skipped.reason
    types = get_collection(engine, "default").field_types
    assert types == {"date": "date", "n": "number", "source": "keyword"}
