"""The compressed sentence level (`SentenceScan`) against the float32 one on the sample corpus:
the same version loaded both ways. Rescored documents score exactly as float32 does; the
rankings agree with float32's within the measured bounds asserted here; searches equal brute
force over the stored vectors; a document change carries the scan over as compressing afresh
would."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from docsim.indexer.jobs.updates import apply_change
from docsim.indexer.settings import DatabaseSettings
from docsim.indexer.store.db import make_engine
from docsim.indexer.text.documents import SourceDocument
from docsim.models.kernels import scan as scan_kernels
from docsim.models.kernels.alignment import maxsim_scores
from docsim.models.kernels.scan import GATHERED_SHARE
from docsim.protocol.choices import Granularity, Method, ScoringMode
from docsim.protocol.requests import SimilarOptions
from docsim.search.candidates.centroids import recoded
from docsim.search.searcher import Searcher
from docsim.search.served.mapped_rows import MappedRows
from docsim.search.served.sentence_scan import ScanShape, SentenceScan
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings, SearchSettings
from tests.utils.indexes import publish

RESCORED = 12  # of the 48 documents: most are scored from the compressed rows only


def settings_of(data_dir: Path, postgres, store: str) -> QuerySettings:  # noqa: ANN001
    database = DatabaseSettings(url=postgres.database() if postgres is not None else None)
    return QuerySettings(
        data_dir=data_dir,
        db=database,
        search=SearchSettings(sentence_store=store, scan={"rescore": RESCORED, "dimensions": 16}),
    )


@pytest.fixture(scope="module")
def both(
    tmp_path_factory: pytest.TempPathFactory,
    sample_corpus: Path,
    tiny_encoder_dir: Path,
    _postgres,  # noqa: ANN001
) -> Iterator[tuple[Searcher, Searcher]]:
    """The float32 and the compressed searcher over one version of the sample corpus."""
    data_dir = tmp_path_factory.mktemp("scan")
    exact_settings = settings_of(data_dir, _postgres, "float32")
    publish(sample_corpus, exact_settings, tiny_encoder_dir)
    engine = make_engine(exact_settings.database_url)
    yield (
        open_searcher(exact_settings, engine),
        open_searcher(settings_of(data_dir, _postgres, "compressed"), engine),
    )
    engine.dispose()


def ranking(searcher: Searcher, document_id: str, method: Method, top_k: int = 48) -> dict:
    options = SimilarOptions(top_k=top_k, method=method, matches_per_result=0)
    query = searcher.query_from_index(document_id)
    return {h.document_id: h.score for h in searcher.similar(query, options).results}


def test_the_compressed_level_maps_the_file_and_holds_a_quarter(
    both: tuple[Searcher, Searcher],
) -> None:
    exact, compressed = both
    index = compressed.index
    for level in ("sentence", "paragraph", "chunk"):  # read from the files, not held
        assert isinstance(index.vectors[level], MappedRows), level
    assert "chunk" not in index.indices  # nothing searches it
    scan = index.indices["sentence"]
    assert isinstance(scan, SentenceScan)
    assert scan.scan.rows.shape[1] == 16 < index.dim
    float32_bytes = exact.index.vectors["sentence"].numel() * 4
    assert scan.memory_bytes() < float32_bytes / 2


@pytest.mark.parametrize("method", [Method.maxsim, Method.best_sentence])
def test_rescored_documents_score_as_float32_does(
    both: tuple[Searcher, Searcher], method: Method
) -> None:
    exact, compressed = both
    for document_id in exact.index.external_ids[::6]:
        reference = ranking(exact, document_id, method)
        found = ranking(compressed, document_id, method)
        top = list(found)[:RESCORED]
        for d in top:
            assert found[d] == pytest.approx(reference[d], abs=1e-6), (document_id, d)


def test_a_share_of_the_ranked_documents_is_rescored(
    both: tuple[Searcher, Searcher],
) -> None:
    """`scan.rescore_share` of the 47 ranked documents (the query's own is not ranked) are
    rescored where that exceeds `scan.rescore`: their scores are float32's, and the next
    document's is not."""
    exact, compressed = both
    settings = compressed.settings.replaced(scan={"rescore": 2, "rescore_share": 0.5})
    assert settings.scan.depth(47) == 24 and settings.scan.depth(3) == 2
    shared = compressed.index.indices["sentence"]
    assert isinstance(shared, SentenceScan)
    wider = Searcher(
        compressed.index,
        compressed.encoder,
        compressed.splitter,
        compressed.engine,
        settings,
        scan=shared,
    )
    for document_id in exact.index.external_ids[::8]:
        reference = ranking(exact, document_id, Method.maxsim)
        found = ranking(wider, document_id, Method.maxsim)
        listed = list(found)
        for d in listed[:24]:
            assert found[d] == pytest.approx(reference[d], abs=1e-6), (document_id, d)
        below = listed[24:]
        assert any(found[d] != pytest.approx(reference[d], abs=1e-6) for d in below)


def test_rankings_agree_with_float32(both: tuple[Searcher, Searcher]) -> None:
    """Every document as the query, top 3: the default fusion and `maxsim`. The tiny encoder's
    cosines crowd between 0.95 and 1, so 16 of its 32 dimensions are a hard case. Measured:
    overlap 0.944 (fused) and 0.924 (maxsim); with 6 documents rescored, 0.931 and 0.701; all
    32 dimensions kept, 0.979 and 1.0. Bound: 0.85."""
    exact, compressed = both
    overlaps = {Method.fused: [], Method.maxsim: []}
    for document_id in exact.index.external_ids:
        for method, found in overlaps.items():
            ref = list(ranking(exact, document_id, method, 3))
            got = list(ranking(compressed, document_id, method, 3))
            found.append(len(set(ref) & set(got)) / 3)
    for method, found in overlaps.items():
        assert np.mean(found) >= 0.85, method


@pytest.mark.parametrize("level", ["sentence", "paragraph"])
def test_unit_search_equals_brute_force(both: tuple[Searcher, Searcher], level: str) -> None:
    """The sentence and paragraph levels are searched through their scans (their FAISS
    indices are not loaded): the hits are brute force's over the stored vectors."""
    exact, compressed = both
    scan = compressed.index.indices[level]
    assert isinstance(scan, SentenceScan) and scan.level == level
    stored = exact.index.vectors[level]  # (R, d) float32: the file's values
    queries = stored[::7][:12]
    within = exact.index.ids[level][::3]
    for restrict in (None, within):
        found = scan.search(queries.numpy(), 5, within=restrict)
        allowed = (
            torch.ones(len(stored), dtype=torch.bool)
            if restrict is None
            else torch.from_numpy(np.isin(exact.index.ids[level], restrict))
        )
        cosines = torch.where(allowed, queries @ stored.T, -torch.inf)  # (q, R)
        for hits, row in zip(found, cosines, strict=True):
            best = torch.topk(row, 5)
            assert np.allclose(hits.scores, best.values.numpy(), atol=1e-6)
            assert set(hits.ids) == set(exact.index.ids[level][best.indices.numpy()])


def test_paragraph_results_equal_float32s(both: tuple[Searcher, Searcher]) -> None:
    """`granularity=paragraph` over the compressed paragraph level: float32's hits."""
    exact, compressed = both
    options = SimilarOptions(top_k=5, method=Method.sdr, granularity=Granularity.paragraph)
    for document_id in exact.index.external_ids[::8]:
        reference = exact.similar(exact.query_from_index(document_id), options).results
        found = compressed.similar(compressed.query_from_index(document_id), options).results
        assert [h.document_id for h in found] == [h.document_id for h in reference]
        assert [h.score for h in found] == pytest.approx([h.score for h in reference], abs=1e-6)


def test_a_change_carries_the_scan_as_compressing_afresh(
    both: tuple[Searcher, Searcher],
) -> None:
    _, compressed = both
    old = compressed.index
    assert compressed.context.centroids is not None
    cells = compressed.context.centroids.get()  # fitted before the change: carried through it
    removed = [old.external_ids[1], old.external_ids[7]]
    change = apply_change(
        compressed.engine,
        version_id=old.version_id,
        revision=old.revision,
        upserts=[
            SourceDocument(
                doc_id="new-1", title="New", text="A fresh judgment.\n\nIt has two paragraphs."
            ),
            SourceDocument(
                doc_id=old.external_ids[3], title="Replaced", text="Replaced. Entirely new text."
            ),
        ],
        deletes=removed,
        encoder=compressed.encoder,
        splitter=compressed.splitter,
        chunk_tokens=int(old.manifest["chunk_tokens"]),
    )
    new = old.with_changes(
        compressed.engine, change.removed_ids, change.added_units, change.revision
    )
    changed = compressed.with_changes(new)
    carried = changed.index.indices["sentence"]
    assert isinstance(carried, SentenceScan)
    afresh = SentenceScan.compressing(new, carried.scan.basis, carried.scan.group)
    assert torch.equal(carried.scan.rows, afresh.scan.rows)
    assert torch.equal(carried.scan.group_counts, afresh.scan.group_counts)
    paragraphs = changed.index.indices["paragraph"]
    assert isinstance(paragraphs, SentenceScan) and paragraphs.level == "paragraph"
    afresh = SentenceScan.compressing(
        new, paragraphs.scan.basis, paragraphs.scan.group, "paragraph"
    )
    assert torch.equal(paragraphs.scan.rows, afresh.scan.rows)
    assert np.array_equal(paragraphs.ids(), new.ids["paragraph"])
    found = ranking(changed, old.external_ids[0], Method.maxsim)
    assert "new-1" in found and not set(removed) & set(found)
    carried_cells = changed.context.centroids
    assert carried_cells is not None and carried_cells.fitted
    carried = carried_cells.get().cells
    afresh = recoded(new.vectors["sentence"], new.doc_unit_start["sentence"], cells.cells)
    for name in ("codes", "documents", "cell_start"):
        assert torch.equal(getattr(carried.postings, name), getattr(afresh.postings, name))
    assert torch.equal(carried.residuals.packed, afresh.residuals.packed)


def test_a_fitted_scan_is_the_same_for_the_same_seed(both: tuple[Searcher, Searcher]) -> None:
    _, compressed = both
    shape = ScanShape(dimensions=16, group=8, seed=0)
    first = SentenceScan.of_index(compressed.index, shape)
    again = SentenceScan.of_index(compressed.index, shape)
    assert torch.equal(first.scan.basis, again.scan.basis)


@pytest.mark.parametrize("method", [Method.sdr, Method.sdr_window, Method.ot])
def test_exact_methods_rank_as_float32_does(
    both: tuple[Searcher, Searcher], method: Method
) -> None:
    """The methods that read the exact rows (the float16 file, cast per block) give the
    float32 level's ranking: the same order, scores to 1e-5 (z-scores divide the products'
    last-bit differences by each row's spread)."""
    exact, compressed = both
    for document_id in exact.index.external_ids[::8]:
        reference = ranking(exact, document_id, method)
        found = ranking(compressed, document_id, method)
        assert list(found) == list(reference), document_id
        assert np.allclose(list(found.values()), list(reference.values()), rtol=0, atol=1e-5)


def test_candidate_mode_takes_its_first_pass_from_the_compressed_level(
    both: tuple[Searcher, Searcher],
) -> None:
    """`auto` picks the compressed level's pass where it is served: the `most` best documents
    by its approximate `maxsim`, which a candidate ranking then scores."""
    _, compressed = both
    scan = compressed.context.scan
    assert scan is not None
    query = compressed.query_from_index(compressed.index.external_ids[5])
    allowed = np.delete(np.arange(compressed.index.n_documents), 5)
    approximate = maxsim_scores(scan.best(query.sentence_vectors)).numpy()
    expected = np.sort(allowed[np.argsort(-approximate[allowed], kind="stable")[:7]])
    assert np.array_equal(scan.candidates(query.sentence_vectors, allowed, 7), expected)
    assert np.array_equal(scan.candidates(query.sentence_vectors, allowed[:5], 7), allowed[:5])
    settings = replace_settings(compressed, candidates={"max_documents": 7})
    found = settings.similar(query, SimilarOptions(method=Method.sdr, mode=ScoringMode.candidate))
    assert found.mode == "candidate" and found.scored_documents == 7
    assert {settings.position(h.document_id) for h in found.results} <= set(expected)
    assert settings.context.centroids is not None and not settings.context.centroids.fitted


def test_a_candidate_fusion_reads_its_candidates_rows_and_bm25_once(
    both: tuple[Searcher, Searcher], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default fusion in candidate mode estimates `maxsim` from its candidates' compressed
    rows only (never a pass over every document) and computes BM25 once, for widening the
    pool and for the fusion alike; its scores equal those the same candidates get with the
    whole pass."""
    _, compressed = both
    searcher = replace_settings(  # BM25's whole query: one pass of bm25s' arithmetic
        compressed,
        candidates={"max_documents": 7},
        scan={"rescore": 2},
        bm25={"query_terms": 100_000},
    )
    query = searcher.query_from_index(searcher.index.external_ids[3])
    options = SimilarOptions(top_k=20, mode=ScoringMode.candidate, matches_per_result=0)
    monkeypatch.setattr(scan_kernels, "GATHERED_SHARE", 0.0)  # the whole pass, as before
    whole = {h.document_id: h.score for h in searcher.similar(query, options).results}
    monkeypatch.setattr(scan_kernels, "GATHERED_SHARE", GATHERED_SHARE)
    bm25 = searcher.context.postings.documents()
    counted = []
    plain_scores = bm25.token_scores
    monkeypatch.setattr(bm25, "token_scores", lambda t: counted.append(1) or plain_scores(t))

    def refused(*_: object) -> None:
        raise AssertionError("a pass over every document")

    monkeypatch.setattr(scan_kernels, "approximate_best", refused)
    found = {h.document_id: h.score for h in searcher.similar(query, options).results}
    assert len(counted) == 1
    assert found == pytest.approx(whole, abs=1e-9)


def replace_settings(searcher: Searcher, **changes: object) -> Searcher:
    """`searcher` with search settings changed, over the same index and compressed level."""
    return Searcher(
        searcher.index,
        searcher.encoder,
        searcher.splitter,
        searcher.engine,
        searcher.settings.replaced(**changes),
        scan=searcher.context.scan,
    )
