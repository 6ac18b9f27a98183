"""Document files posted to the API (multipart): `POST /similar` ranks with an uploaded PDF as
it does with the same document posted as JSON, `POST /documents` adds files under their names,
pages reach `/similar` and `/explain`, and every bad file is a 4xx that changes nothing."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

import docx
import pytest
from fastapi.testclient import TestClient

from docsim.app.core.settings import ServiceSettings
from docsim.app.main import create_app
from docsim.indexer.settings import FileSettings
from docsim.indexer.text.corpus import SAMPLE_CORPUS, read_file
from docsim.indexer.text.documents import SourceDocument
from tests.utils.pdfs import Block, write_document_pdf, write_pdf

PDF = "application/pdf"


@pytest.fixture(scope="module")
def essay(tmp_path_factory: pytest.TempPathFactory) -> tuple[SourceDocument, bytes]:
    """A sample document laid out in two columns over several pages, and the document
    docsim reads back from that PDF."""
    source = read_file(SAMPLE_CORPUS / "coffee-02.md")
    assert isinstance(source, SourceDocument)
    path = write_document_pdf(source, tmp_path_factory.mktemp("pdf") / "coffee.pdf", columns=2)
    read = read_file(path)
    assert isinstance(read, SourceDocument)
    return read, path.read_bytes()


def as_json(document: SourceDocument) -> dict:
    """The same document as a JSON body: its title and sections."""
    assert document.sections is not None
    return {
        "title": document.title,
        "sections": [
            {"title": s.title, "text": document.text[s.start : s.end]} for s in document.sections
        ],
    }


def test_an_uploaded_pdf_ranks_as_the_same_document_posted_as_json(
    client: TestClient, essay: tuple[SourceDocument, bytes]
) -> None:
    read, pdf = essay
    for method in ("sdr", "bm25", None):
        options = {"top_k": "8"} | ({"method": method} if method else {})
        uploaded = client.post("/similar", files={"file": ("coffee.pdf", pdf, PDF)}, data=options)
        assert uploaded.status_code == 200, uploaded.text
        body = {"document": as_json(read), "top_k": 8} | ({"method": method} if method else {})
        posted = client.post("/similar", json=body)
        assert posted.status_code == 200, posted.text
        got, expected = uploaded.json(), posted.json()
        assert got["method"] == expected["method"] and len(got["results"]) == 8
        assert [r["document_id"] for r in got["results"]] == [
            r["document_id"] for r in expected["results"]
        ], method
        for a, b in zip(got["results"], expected["results"], strict=True):
            assert a["score"] == pytest.approx(b["score"], abs=1e-5)
    # the query's paragraphs keep their pages; the JSON query has none
    pages = [m["source_page"] for r in uploaded.json()["results"] for m in r["matches"]]
    assert pages and all(isinstance(p, int) and p >= 1 for p in pages)
    assert all(m["source_page"] is None for r in expected["results"] for m in r["matches"])


def test_an_uploaded_pdf_query_explains_with_its_pages(
    client: TestClient, essay: tuple[SourceDocument, bytes]
) -> None:
    read, pdf = essay
    answer = client.post("/similar", files={"file": ("coffee.pdf", pdf, PDF)}).json()
    target = answer["results"][0]["document_id"]
    explained = client.get("/explain", params={"source": answer["query_id"], "target": target})
    assert explained.status_code == 200, explained.text
    source = explained.json()["source"]
    expected = [page for _, page in read.metadata["pages"]]
    assert [p["page"] for p in source["paragraphs"]] == expected and max(expected) >= 2
    assert all(p["page"] is None for p in explained.json()["target"]["paragraphs"])  # Markdown
    for pair in explained.json()["top_pairs"]:
        assert pair["source_page"] == expected[pair["source_paragraph"]]
        assert pair["target_page"] is None


@pytest.fixture()
def changing(fresh_settings) -> Iterator[TestClient]:  # noqa: ANN001
    with TestClient(create_app(fresh_settings(embedded_worker=False))) as client:
        yield client


def write_docx(path: Path) -> Path:
    document = docx.Document()
    document.add_heading("Airships", 0)
    document.add_heading("Hydrogen", 1)
    document.add_paragraph("The zeppelin rose above Lake Constance. Its hull held hydrogen.")
    document.add_paragraph("Ground crews walked the airship out of the floating hangar.")
    document.save(str(path))
    return path


def test_uploaded_files_are_added_under_their_names_with_their_pages(
    changing: TestClient, essay: tuple[SourceDocument, bytes], tmp_path: Path
) -> None:
    read, pdf = essay
    word = write_docx(tmp_path / "zeppelin.docx").read_bytes()
    added = changing.post(
        "/documents",
        files=[("file", ("brew notes.pdf", pdf, PDF)), ("file", ("zeppelin.docx", word, None))],
    )
    assert added.status_code == 200, added.text
    assert sorted(added.json()["added"]) == ["brew notes", "zeppelin"]
    stored = changing.get("/documents/brew notes").json()
    assert stored["text"] == read.text and stored["metadata"]["format"] == "pdf"
    assert stored["metadata"]["filename"] == "brew notes.pdf"
    word_doc = changing.get("/documents/zeppelin").json()
    assert word_doc["title"] == "Airships" and [s["title"] for s in word_doc["sections"]] == [
        "Hydrogen"
    ]
    # the PDF's pages are served: by /similar's matches and by /explain
    ranked = changing.post(
        "/similar", json={"document": as_json(read), "top_k": 3, "method": "sdr"}
    ).json()
    hit = next(r for r in ranked["results"] if r["document_id"] == "brew notes")
    pages = dict(read.metadata["pages"])
    for match in hit["matches"]:
        assert match["target_page"] == pages[match["target_start"]]
    explained = changing.get(
        "/explain", params={"source": ranked["query_id"], "target": "brew notes"}
    ).json()
    assert [p["page"] for p in explained["target"]["paragraphs"]] == list(pages.values())
    # one file may take another id
    again = changing.post("/documents", files={"file": ("x.pdf", pdf, PDF)}, data={"id": "brew"})
    assert again.json()["added"] == ["brew"]


def bad_files(tmp_path: Path) -> dict[str, tuple[str, bytes, str]]:
    """name -> (file name, content, the reason the API must give)."""
    write_pdf(tmp_path / "locked.pdf", [Block("Secret text.")], title="x", encrypt="s3cret")
    from reportlab.pdfgen import canvas

    scan = canvas.Canvas(str(tmp_path / "scan.pdf"))
    scan.rect(72, 72, 300, 500, fill=1)
    scan.showPage()
    scan.save()
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", "<w:document>" + " " * 50_000_000 + "</w:document>")
    return {
        "encrypted": ("locked.pdf", (tmp_path / "locked.pdf").read_bytes(), "encrypted PDF"),
        "scanned": ("scan.pdf", (tmp_path / "scan.pdf").read_bytes(), "no text layer"),
        "corrupt": (
            "broken.pdf",
            b"%PDF-1.4\n1 0 obj << /Type /Catalog >>\ngarbage",
            "corrupt PDF",
        ),
        "bomb": ("bomb.docx", bomb.read_bytes(), "zip bomb"),
        "legacy": ("old.doc", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 64, "legacy .doc"),
        "binary": ("blob.bin", bytes(range(256)) * 4, "binary file"),
        "empty": ("empty.txt", b"   \n", "empty file"),
    }


def test_bad_files_get_a_422_with_the_reason_and_change_nothing(
    changing: TestClient, essay: tuple[SourceDocument, bytes], tmp_path: Path
) -> None:
    _, pdf = essay
    before = changing.get("/ready").json()
    for name, (filename, content, reason) in bad_files(tmp_path).items():
        searched = changing.post("/similar", files={"file": (filename, content, None)})
        assert searched.status_code == 422, (name, searched.text)
        assert reason in searched.json()["detail"] and filename in searched.json()["detail"]
        # with a good file beside it: the whole request is refused
        added = changing.post(
            "/documents", files=[("file", ("good.pdf", pdf, PDF)), ("file", (filename, content))]
        )
        assert added.status_code == 422, (name, added.text)
        assert reason in added.json()["detail"]
    assert changing.get("/ready").json() == before
    assert changing.get("/documents/good").status_code == 404


def test_malformed_uploads_are_refused_with_what_is_wrong(
    changing: TestClient, essay: tuple[SourceDocument, bytes]
) -> None:
    _, pdf = essay
    client = changing
    file = {"file": ("coffee.pdf", pdf, PDF)}

    def refused(response, field: str, status: int = 422) -> None:  # noqa: ANN001
        assert response.status_code == status, response.text
        assert any(field in e["loc"] for e in response.json()["detail"]), response.text

    refused(client.post("/similar", data={"top_k": "3"}, files={"other": ("a.txt", b"x")}), "other")
    refused(
        client.post("/similar", files=[("file", ("a.pdf", pdf)), ("file", ("b.pdf", pdf))]), "file"
    )
    refused(client.post("/similar", files=file, data={"top_k": "0"}), "top_k")
    refused(client.post("/similar", files=file, data={"method": "magic"}), "method")
    refused(client.post("/similar", files=file, data={"document_id": "coffee-01"}), "document_id")
    refused(client.post("/documents", files=file, data={"top_k": "3"}), "top_k")
    refused(
        client.post(
            "/documents",
            files=[("file", ("a.pdf", pdf)), ("file", ("b.pdf", pdf))],
            data={"id": "x"},
        ),
        "id",
    )
    for name in (".pdf", "", "a/.docx"):
        nameless = client.post("/documents", files={"file": (name, pdf, PDF)})
        assert nameless.status_code == 422 and "no name" in nameless.json()["detail"], name
    too_long = client.post("/documents", files={"file": ("x" * 600 + ".pdf", pdf, PDF)})
    assert too_long.status_code == 422 and "ids may have 512" in too_long.json()["detail"]
    raw = (  # a NUL in the file name, as httpx would never send it (it escapes it)
        b'--B\r\nContent-Disposition: form-data; name="file"; filename="a\x00b.txt"\r\n'
        b"\r\nSome text of a file. Another sentence.\r\n--B--\r\n"
    )
    nul = client.post(
        "/documents", content=raw, headers={"content-type": "multipart/form-data; boundary=B"}
    )
    assert nul.status_code == 422 and "NUL" in nul.json()["detail"], nul.text
    assert client.get("/ready").json()["documents"] == 48
    # a JSON body still works, and malformed JSON is still a 422
    assert client.post("/similar", json={"document_id": "coffee-01"}).status_code == 200
    broken = client.post("/similar", content=b"{", headers={"content-type": "application/json"})
    assert broken.status_code == 422 and broken.json()["detail"][0]["type"] == "json_invalid"
    # candidates repeat as form fields
    pool = client.post(
        "/similar", files=file, data={"candidates": ["coffee-01", "baking-01"], "method": "bm25"}
    )
    assert pool.status_code == 200, pool.text
    assert {r["document_id"] for r in pool.json()["results"]} == {"coffee-01", "baking-01"}
    # every list option is a form field given once or repeated (`exclude` was read as text
    # when given once: a 422 that the conformance test found)
    for left_out in ("coffee-01", ["coffee-01", "baking-01"]):
        fields = {"exclude": left_out, "method": "bm25", "top_k": 48}
        ranked = client.post("/similar", files=file, data=fields)
        assert ranked.status_code == 200, ranked.text
        found = {r["document_id"] for r in ranked.json()["results"]}
        assert "coffee-01" not in found and (left_out == "coffee-01") == ("baking-01" in found)


def test_files_over_the_limits_get_a_413(
    indexed_settings: ServiceSettings, essay: tuple[SourceDocument, bytes]
) -> None:
    _, pdf = essay
    for files, reason in (
        (FileSettings(max_bytes=len(pdf) - 1), f"may have {len(pdf) - 1:,} bytes together"),
        (FileSettings(max_pdf_pages=1), "more than 1 pages"),
    ):
        settings = indexed_settings.model_copy(update={"files": files})
        with TestClient(create_app(settings)) as client:
            for path in ("/similar", "/documents"):
                answer = client.post(path, files={"file": ("coffee.pdf", pdf, PDF)})
                assert answer.status_code == 413, answer.text
                assert reason in answer.json()["detail"]
    # files that each fit but not together: memory holds an upload's files at once
    settings = indexed_settings.model_copy(
        update={"files": FileSettings(max_bytes=len(pdf) * 3 // 2)}
    )
    with TestClient(create_app(settings)) as client:
        two = [("file", ("a.pdf", pdf, PDF)), ("file", ("b.pdf", pdf, PDF))]
        answer = client.post("/documents", files=two)
        assert answer.status_code == 413, answer.text
        assert "file 'b.pdf' takes the upload over the limit" in answer.json()["detail"]


def test_a_form_field_that_is_not_utf8_is_refused_not_read_as_latin1(client: TestClient) -> None:
    """It was decoded as Latin-1: the server searched with a text the client never sent."""
    boundary = "docsimboundary"
    body = (
        (
            f"--{boundary}\r\n"
            'Content-Disposition: form-data; name="file"; filename="q.txt"\r\n'
            "Content-Type: text/plain\r\n\r\n"
            "Coffee beans roast. Water boils.\r\n"
            f"--{boundary}\r\n"
            'Content-Disposition: form-data; name="method"\r\n\r\n'
        ).encode()
        + b"caf\xe9\r\n"
        + f"--{boundary}--\r\n".encode()
    )
    answer = client.post(
        "/similar",
        content=body,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    assert answer.status_code == 422, answer.text
    assert "not valid utf-8 text" in answer.text and "method" in answer.text
