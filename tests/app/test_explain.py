"""GET /explain: every map against a direct computation from the stored vectors."""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from fastapi import FastAPI
from fastapi.testclient import TestClient
from PIL import Image
from sqlalchemy import select

from docsim.app.core.settings import ApiSettings, ServiceSettings
from docsim.app.main import create_app, served_state
from docsim.indexer.store.stored_rows import read_float16
from docsim.indexer.store.tables import LEVEL_TABLES, documents
from docsim.indexer.text.chunking import add_chunks
from docsim.indexer.text.corpus import json_document
from docsim.indexer.text.split import split_document
from docsim.protocol.choices import Method, ScoringMode
from docsim.protocol.requests import SimilarOptions
from docsim.search.searcher import Searcher
from docsim.search.settings import VerbatimSettings

POSTED = {
    "title": "Bread at home",
    "sections": [
        {
            "title": "Dough",
            "text": "Yeast ferments the sugars in flour. The dough doubles in a warm room.\n\n"
            "Knead until the dough is smooth. Gluten gives the loaf its structure.",
        },
        {
            "title": "Oven",
            "text": "A hot oven sets the crumb quickly.\n\nSteam keeps the crust soft at first. "
            "Then the crust browns and crackles.",
        },
    ],
}


def stored(searcher: Searcher, document_id: str, level: str) -> torch.Tensor:
    """A document's vectors of `level`, read straight from the version's files `(m, d)`."""
    index = searcher.index
    table, id_column = LEVEL_TABLES[level]
    with searcher.engine.connect() as conn:
        doc_id = conn.execute(
            select(documents.c.doc_id).where(
                documents.c.external_id == document_id,
                documents.c.version_id == index.version_id,
            )
        ).scalar_one()
        unit_ids = conn.execute(
            select(id_column).where(table.c.doc_id == doc_id).order_by(id_column)
        ).scalars()
        unit_ids = np.array(list(unit_ids))
    info = index.manifest["levels"][level]
    ids = np.load(index.path / info["ids_file"])
    vectors = read_float16(index.path / info["vectors_file"]).astype(np.float32)
    rows = [int(np.flatnonzero(ids == u)[0]) for u in unit_ids]
    return torch.from_numpy(vectors[rows])


def paragraph_groups(vectors: torch.Tensor, sentences: list[dict]) -> list[torch.Tensor]:
    """Sentence vectors grouped by paragraph, from the response's sentence list."""
    n_paragraphs = max(s["paragraph"] for s in sentences) + 1
    return [
        vectors[[s["index"] for s in sentences if s["paragraph"] == i]] for i in range(n_paragraphs)
    ]


def direct_paragraph_matrix(source: list[torch.Tensor], target: list[torch.Tensor]) -> torch.Tensor:
    """P[i][j] = mean over source sentences of their best cosine in target paragraph j."""
    return torch.tensor(
        [[float((s @ t.T).max(dim=1).values.mean()) for t in target] for s in source]
    )


def all_other_paragraphs(searcher: Searcher, exclude: str | None) -> list[torch.Tensor]:
    """Sentence vectors of every indexed paragraph, document by document, minus `exclude`."""
    index = searcher.index
    out = []
    for d, external in enumerate(index.external_ids):
        if external == exclude:
            continue
        for p in range(index.doc_paragraph_start[d], index.doc_paragraph_start[d + 1]):
            s0, s1 = index.paragraph_sentence_start[p], index.paragraph_sentence_start[p + 1]
            out.append(index.vectors["sentence"][s0:s1].float())  # mapped: float16
    return out


def check_explanation(
    body: dict,
    searcher: Searcher,
    source_levels: dict[str, torch.Tensor],
    source_exclude: str | None,
    ranked_score: float,
) -> None:
    """Every map of `body` against vectors computed directly for the source and read from the
    index files for the target; the score against the ranking's."""
    target_id = body["target"]["ref"]
    target = {lv: stored(searcher, target_id, lv) for lv in ("section", "chunk", "sentence")}
    for level in ("section", "chunk"):
        direct = source_levels[level] @ target[level].T
        got = torch.tensor(body[f"{level}_matrix"])
        assert got.shape == direct.shape
        assert torch.allclose(got, direct, atol=1e-4), level
    s_groups = paragraph_groups(source_levels["sentence"], body["source"]["sentences"])
    t_groups = paragraph_groups(target["sentence"], body["target"]["sentences"])
    raw = direct_paragraph_matrix(s_groups, t_groups)
    assert torch.allclose(torch.tensor(body["paragraph_matrix"]["raw"]), raw, atol=1e-4)
    # the statistics: every other indexed paragraph, as exhaustive /similar uses them
    everything = direct_paragraph_matrix(s_groups, all_other_paragraphs(searcher, source_exclude))
    stats = body["statistics"]
    assert stats["population"] == "collection"
    assert torch.allclose(torch.tensor(stats["mean"]), everything.mean(dim=1), atol=1e-4)
    assert torch.allclose(
        torch.tensor(stats["std"]), everything.std(dim=1, correction=0), atol=1e-4
    )
    z = (raw - everything.mean(dim=1)[:, None]) / everything.std(dim=1, correction=0)[:, None]
    assert torch.allclose(torch.tensor(body["paragraph_matrix"]["normalized"]), z, atol=1e-3)
    assert body["score"] == pytest.approx(float(z.max(dim=1).values.mean()), abs=1e-3)
    assert body["score"] == pytest.approx(ranked_score, abs=1e-4)
    # each source paragraph's best target paragraph, and its sentences' best partners there
    for alignment in body["alignments"]:
        i, j = alignment["source_paragraph"], alignment["target_paragraph"]
        assert j == int(z[i].argmax())
        t_sentences = [s["index"] for s in body["target"]["sentences"] if s["paragraph"] == j]
        for pair in alignment["sentences"]:
            sims = source_levels["sentence"][pair["source_sentence"]] @ target["sentence"].T
            best = max(t_sentences, key=lambda r, sims=sims: float(sims[r]))
            assert pair["target_sentence"] == best
            assert pair["score"] == pytest.approx(float(sims[best]), abs=1e-4)
    # top pairs: best first, with the exact text of their spans
    pairs = body["top_pairs"]
    assert [p["z"] for p in pairs] == sorted((p["z"] for p in pairs), reverse=True)
    for pair in pairs:
        side = body["target"]
        span = side["paragraphs"][pair["target_paragraph"]]
        assert side["text"][span["start"] : span["end"]].startswith(pair["target_text"].rstrip("…"))


def test_posted_query_explained_from_its_query_id(app: FastAPI, client: TestClient) -> None:
    ranked = client.post("/similar", json={"document": POSTED, "top_k": 3, "method": "sdr"}).json()
    searcher: Searcher = served_state(app).searcher
    # the source's vectors, encoded again here exactly as the indexer encodes a document
    posted = dict(POSTED, id="query")
    document = split_document(json_document(posted, ""), searcher.splitter)
    document = add_chunks([document], searcher.encoder, searcher.index.manifest["chunk_tokens"])[0]
    vectors = searcher.encoder.encode_documents([document.encoder_input()])[0]
    levels = {"section": vectors.sections, "chunk": vectors.chunks, "sentence": vectors.sentences}
    for hit in ranked["results"]:
        response = client.get(
            "/explain", params={"source": ranked["query_id"], "target": hit["document_id"]}
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["source"]["kind"] == "query" and body["source"]["ref"] == ranked["query_id"]
        assert [s["title"] for s in body["source"]["sections"]] == ["Dough", "Oven"]
        assert len(body["source"]["paragraphs"]) == 4
        check_explanation(body, searcher, levels, None, hit["score"])


def test_indexed_source_uses_the_statistics_of_its_ranking(app: FastAPI, client: TestClient):
    source = "coffee-03"
    ranked = client.post(
        "/similar", json={"document_id": source, "top_k": 2, "method": "sdr"}
    ).json()
    searcher: Searcher = served_state(app).searcher
    levels = {lv: stored(searcher, source, lv) for lv in ("section", "chunk", "sentence")}
    for hit in ranked["results"]:
        for ref in (source, ranked["query_id"]):  # by document id, or by the query's id
            body = client.get("/explain", params={"source": ref, "target": hit["document_id"]})
            check_explanation(body.json(), searcher, levels, source, hit["score"])


def test_a_document_against_itself_has_a_maximal_diagonal(app: FastAPI, client: TestClient) -> None:
    searcher: Searcher = served_state(app).searcher
    body = client.get("/explain", params={"source": "oceans-04", "target": "oceans-04"}).json()
    # each diagonal entry is a stored row against itself: its squared norm, 1 up to the
    # rounding of the stored format (int8 rows move it by a few thousandths at d = 32)
    for key, level in (("section_matrix", "section"), ("chunk_matrix", "chunk")):
        matrix = torch.tensor(body[key])
        rows = stored(searcher, "oceans-04", level)
        assert torch.allclose(torch.diagonal(matrix), (rows * rows).sum(dim=1), atol=1e-4)
        assert torch.equal(matrix.argmax(dim=1), torch.arange(len(matrix)))
    sentences = stored(searcher, "oceans-04", "sentence")
    own = (sentences * sentences).sum(dim=1)  # (n_sentences,)
    groups = paragraph_groups(own[:, None], body["source"]["sentences"])
    raw = torch.tensor(body["paragraph_matrix"]["raw"])
    assert torch.allclose(torch.diagonal(raw), torch.stack([g.mean() for g in groups]), atol=1e-4)
    assert [a["target_paragraph"] for a in body["alignments"]] == list(range(len(raw)))
    for alignment in body["alignments"]:
        for pair in alignment["sentences"]:
            assert pair["target_sentence"] == pair["source_sentence"]
            assert pair["score"] == pytest.approx(float(own[pair["source_sentence"]]), abs=1e-4)


def test_without_normalisation_the_raw_matrix_ranks(client: TestClient) -> None:
    ranked = client.post(
        "/similar", json={"document": POSTED, "top_k": 2, "normalize": False, "method": "sdr"}
    ).json()
    for hit in ranked["results"]:
        body = client.get(
            "/explain", params={"source": ranked["query_id"], "target": hit["document_id"]}
        ).json()
        assert body["normalized"] is False and body["statistics"] is None
        assert body["paragraph_matrix"]["normalized"] == body["paragraph_matrix"]["raw"]
        assert body["score"] == pytest.approx(hit["score"], abs=1e-5)


def test_png_is_a_labelled_heatmap_image(client: TestClient) -> None:
    response = client.get(
        "/explain", params={"source": "running-02", "target": "running-05", "format": "png"}
    )
    assert response.status_code == 200 and response.headers["content-type"] == "image/png"
    image = Image.open(io.BytesIO(response.content))
    assert image.format == "PNG" and image.size == (1500, 1500)
    colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 100  # drawn, not blank


def test_the_png_title_names_the_population_in_words(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It once read "z-scored against the Population.collection of 48 documents"."""
    from matplotlib.figure import Figure

    titles: list[str] = []
    suptitle = Figure.suptitle
    monkeypatch.setattr(
        Figure,
        "suptitle",
        lambda self, text, **kw: titles.append(text) or suptitle(self, text, **kw),
    )
    params = {"source": "running-02", "target": "running-05", "format": "png"}
    assert client.get("/explain", params=params).status_code == 200

    assert len(titles) == 1 and "z-scored against the collection of " in titles[0]
    assert "Population" not in titles[0]


def test_large_pairs_are_pooled_with_a_note(indexed_settings: ServiceSettings) -> None:
    settings = indexed_settings.model_copy(
        update={"api": ApiSettings(image_max_cells_per_axis=4, page_max_cells_per_axis=4)}
    )
    with TestClient(create_app(settings)) as client:
        page = client.get(
            "/explain",
            params={"source": "lighthouses-01", "target": "databases-02", "format": "html"},
        )
        data = embedded_data(page.text)
        paragraph = next(m for m in data["maps"] if m["key"] == "paragraph")
        assert paragraph["rows"] > 4
        assert paragraph["block_rows"] > 1 and "blocks of" in paragraph["note"]
        assert len(paragraph["values"]) <= 4
        full = client.get(
            "/explain", params={"source": "lighthouses-01", "target": "databases-02"}
        ).json()["paragraph_matrix"]["normalized"]
        assert len(full) == paragraph["rows"]  # the json keeps every cell
        for r, row in enumerate(paragraph["values"]):
            for c, value in enumerate(row):
                i, j = paragraph["arg_rows"][r][c], paragraph["arg_columns"][r][c]
                assert i // paragraph["block_rows"] == r and j // paragraph["block_columns"] == c
                assert value == pytest.approx(full[i][j], abs=1e-3)
        png = client.get(
            "/explain",
            params={"source": "lighthouses-01", "target": "databases-02", "format": "png"},
        )
        assert png.status_code == 200


def embedded_data(html: str) -> dict:
    found = re.search(
        r'<script id="explain-data" type="application/json">(.*?)</script>', html, re.S
    )
    assert found, "the page embeds its data"
    return json.loads(found.group(1))


def test_html_is_self_contained(client: TestClient) -> None:
    response = client.get(
        "/explain", params={"source": "astronomy-01", "target": "astronomy-02", "format": "html"}
    )
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    html = response.text
    assert not re.search(r'(src|href)="(https?:)?//', html), "no external resources"
    data = embedded_data(html)
    assert [m["key"] for m in data["maps"]] == ["section", "chunk", "paragraph"]
    assert data["source"]["text"] and data["target"]["ref"] == "astronomy-02"


def test_titles_are_escaped_in_the_page(client: TestClient) -> None:
    evil = {
        "title": "<script>alert(1)</script>",
        "text": "Stars shine. </script><b>x</b> Stars fade.",
    }
    ranked = client.post("/similar", json={"document": evil, "top_k": 1, "method": "sdr"}).json()
    html = client.get(
        "/explain",
        params={
            "source": ranked["query_id"],
            "target": ranked["results"][0]["document_id"],
            "format": "html",
        },
    ).text
    assert "<script>alert(1)</script>" not in html and "</script><b>" not in html
    assert embedded_data(html)["source"]["title"] == evil["title"]


@pytest.mark.parametrize(
    ("params", "status", "detail"),
    [
        ({"source": "nope", "target": "baking-01"}, 404, "run POST /similar again"),
        ({"source": "0" * 32, "target": "baking-01"}, 404, "expire"),
        ({"source": "baking-01", "target": "nope"}, 404, "'nope' is not in the active index"),
        ({"source": "baking-01", "target": "baking-02", "format": "bmp"}, 422, "json"),
        ({"source": "baking-01"}, 422, "target"),
        ({"source": "", "target": "baking-02"}, 422, "source"),
    ],
)
def test_bad_input(client: TestClient, params: dict, status: int, detail: str) -> None:
    response = client.get("/explain", params=params)
    assert response.status_code == status
    assert detail in json.dumps(response.json()["detail"])


def test_expired_query_ids_are_404(indexed_settings: ServiceSettings) -> None:
    settings = indexed_settings.model_copy(update={"api": ApiSettings(query_cache_ttl_seconds=0.3)})
    with TestClient(create_app(settings)) as client:
        ranked = client.post(
            "/similar", json={"document": POSTED, "top_k": 1, "method": "sdr"}
        ).json()
        params = {"source": ranked["query_id"], "target": ranked["results"][0]["document_id"]}
        assert client.get("/explain", params=params).status_code == 200
        time.sleep(0.4)
        expired = client.get("/explain", params=params)
        assert expired.status_code == 404 and "run POST /similar again" in expired.json()["detail"]
        assert "version" not in expired.json()["detail"]  # ids do not expire on a swap


def test_pairs_over_the_cell_limit_are_413(indexed_settings: ServiceSettings) -> None:
    settings = indexed_settings.model_copy(update={"api": ApiSettings(explain_max_cells=20)})
    with TestClient(create_app(settings)) as client:
        response = client.get("/explain", params={"source": "baking-01", "target": "baking-02"})
        assert response.status_code == 413
        assert "paragraph pairs; the limit is 20" in response.json()["detail"]


def test_search_page_is_served(client: TestClient) -> None:
    response = client.get("/")
    assert response.status_code == 200 and '<form id="search">' in response.text


def test_indexed_vectors_are_read_from_files(app: FastAPI, tmp_path: Path) -> None:
    """The helper above reads the files, not the loaded tensors: both must agree."""
    searcher: Searcher = served_state(app).searcher
    query = searcher.query_from_index("baking-03")
    assert torch.allclose(stored(searcher, "baking-03", "chunk"), query.level_vectors["chunk"])


def test_only_the_default_rankings_statistics_are_remembered(app: FastAPI) -> None:
    """A candidate-mode or pooled /similar must not change what /explain of an indexed source
    normalises with: that is always the default ranking's (here, the whole collection)."""
    base: Searcher = served_state(app).searcher
    searcher = Searcher(base.index, base.encoder, base.splitter, base.engine, base.settings)
    query = searcher.query_from_index("running-01")
    sdr = Method.sdr
    sample = searcher.similar(query, SimilarOptions(method=sdr, mode=ScoringMode.candidate)).stats
    pooled = searcher.similar(
        query, SimilarOptions(method=sdr, candidates=["running-02", "baking-01"])
    ).stats
    assert (sample.population, pooled.population) == ("sample", "pool")
    assert pooled.documents == 2
    stats = searcher.ranking_stats(query)
    assert stats.population == "collection" and stats.documents == base.index.n_documents - 1
    fresh = Searcher(base.index, base.encoder, base.splitter, base.engine, base.settings)
    expected = fresh.similar(fresh.query_from_index("running-01"), SimilarOptions(method=sdr)).stats
    assert torch.allclose(stats.stats.mean, expected.stats.mean, atol=1e-6)
    assert torch.allclose(stats.stats.std, expected.stats.std, atol=1e-6)


def test_explain_keeps_its_rankings_population_over_a_swap(
    fresh_settings, sample_corpus: Path, tiny_encoder_dir: Path
) -> None:
    """Issue 12: after a swap, /explain of a pooled or candidate-mode query_id normalised over
    the whole collection (another score). It must use the same kind of population again; a
    pool that lost a member expires with the 404 that asks for a new /similar."""
    from tests.utils.indexes import publish

    settings = fresh_settings(embedded_worker=False)
    with TestClient(create_app(settings)) as client:
        requests = {
            "pool": {"candidates": ["baking-01", "oceans-02", "coffee-03"]},
            "sample": {"mode": "candidate"},
            "collection": {},
        }
        explained = {}
        for population, options in requests.items():
            for source in ({"document": POSTED}, {"document_id": "baking-02"}):
                ranked = client.post(
                    "/similar", json={**source, "top_k": 1, "method": "sdr", **options}
                ).json()
                hit = ranked["results"][0]
                params = {"source": ranked["query_id"], "target": hit["document_id"]}
                body = client.get("/explain", params=params).json()
                assert body["statistics"]["population"] == population
                assert body["score"] == pytest.approx(hit["score"], abs=1e-4)
                explained[population, str(source)] = (params, body)
        publish(sample_corpus, settings, tiny_encoder_dir)  # version 2: the same documents
        deadline = time.monotonic() + 20  # the watcher swaps it in
        while client.get("/ready").json()["index_version"] != 2:
            assert time.monotonic() < deadline, "the service did not swap"
            time.sleep(0.05)
        for (population, _), (params, before) in explained.items():
            after = client.get("/explain", params=params).json()
            assert after["index_version"] == 2
            assert after["statistics"]["population"] == population
            assert after["statistics"]["documents"] == before["statistics"]["documents"]
            assert after["score"] == pytest.approx(before["score"], abs=1e-4), population
        assert client.delete("/documents/oceans-02").status_code == 200
        pooled, _ = explained["pool", str({"document": POSTED})]
        gone = client.get("/explain", params=pooled)
        assert gone.status_code == 404 and "run POST /similar again" in gone.json()["detail"]


QUOTED = (  # a passage of coffee-02, quoted without its commas and across a line break
    "Coffea canephora sold under the name robusta supplies most of the remainder\nand is "
    "favoured for instant products"
)


def test_a_quoted_passage_is_found_in_both_texts(client: TestClient) -> None:
    posted = {"title": "Notes", "text": f"As the planters' manual puts it, {QUOTED}. We agree."}
    ranked = client.post("/similar", json={"document": posted, "top_k": 3}).json()
    body = client.get(
        "/explain", params={"source": ranked["query_id"], "target": "coffee-02"}
    ).json()
    source, target = body["source"]["text"], body["target"]["text"]
    longest = body["shared_passages"][0]
    assert longest["words"] == 18
    assert source[longest["source_start"] : longest["source_end"]] == QUOTED
    assert target[longest["target_start"] : longest["target_end"]] == (
        "Coffea canephora, sold under the name robusta, supplies most of the remainder and is "
        "favoured for instant products"
    )
    assert longest["text"] == QUOTED
    for passage in body["shared_passages"]:  # each a run of equal words, at least 8
        words = [
            re.findall(r"\w+", text[passage[f"{side}_start"] : passage[f"{side}_end"]].casefold())
            for side, text in (("source", source), ("target", target))
        ]
        assert words[0] == words[1] and len(words[0]) == passage["words"] >= 8
    unrelated = client.get("/explain", params={"source": ranked["query_id"], "target": "oceans-04"})
    assert unrelated.json()["shared_passages"] == []


def test_shared_passages_follow_their_settings(indexed_settings: ServiceSettings) -> None:
    posted = {"title": "Notes", "text": f"As the planters' manual puts it, {QUOTED}. We agree."}
    api, search = indexed_settings.api, indexed_settings.search
    fewer = search.model_copy(update={"verbatim": VerbatimSettings(passage_words=19)})
    for changed in ({"api": api.model_copy(update={"explain_passages": 0})}, {"search": fewer}):
        settings = indexed_settings.model_copy(update=changed)
        with TestClient(create_app(settings)) as client:
            ranked = client.post("/similar", json={"document": posted, "top_k": 1}).json()
            body = client.get(
                "/explain", params={"source": ranked["query_id"], "target": "coffee-02"}
            ).json()
            assert body["shared_passages"] == [], changed
