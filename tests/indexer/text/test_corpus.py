from __future__ import annotations

from pathlib import Path

import pytest

from docsim.indexer.choices import CorpusFormat
from docsim.indexer.errors import CorpusError
from docsim.indexer.text.corpus import Skipped, detect_format, read_corpus
from docsim.indexer.text.documents import SourceDocument
from tests.utils.corpora import AILA_DIR, write_jsonl, write_text_corpus


def split_items(items: list) -> tuple[list[SourceDocument], list[Skipped]]:
    return (
        [i for i in items if isinstance(i, SourceDocument)],
        [i for i in items if isinstance(i, Skipped)],
    )


def test_sample_corpus_is_text_and_rich_enough(sample_corpus: Path) -> None:
    assert detect_format(sample_corpus) is CorpusFormat.text
    docs, skipped = split_items(list(read_corpus(sample_corpus)))
    assert not skipped and len(docs) >= 40
    topics = {d.doc_id.rsplit("-", 1)[0] for d in docs}
    assert len(topics) >= 6
    assert all(len(d.text.split()) >= 400 for d in docs)


def test_bad_files_are_skipped_with_reasons(tmp_path: Path) -> None:
    folder = write_text_corpus(
        tmp_path / "c", {"good.txt": "Title\n\nA fine sentence.", "empty.txt": "  \n"}
    )
    (folder / "binary.txt").write_bytes(b"\x00\x01\x02 binary")
    (folder / "late-nul.txt").write_bytes(b"Text. " * 3000 + b"\x00")  # past the first 8 KB
    (folder / "latin1.md").write_bytes("caf\xe9 au lait".encode("latin-1"))
    # UTF-16 and UTF-32 with their byte order marks are text (Windows tools save them so);
    # without one, UTF-16 is told from binary by nothing
    (folder / "utf16.txt").write_bytes("Title\n\nWide text. It reads.".encode("utf-16"))
    (folder / "utf32.txt").write_bytes("Title\n\nWider text. It reads.".encode("utf-32"))
    (folder / "utf16-no-mark.txt").write_bytes("Title\n\nNo mark.".encode("utf-16-le"))
    sub = folder / "sub"
    sub.mkdir()
    (sub / "good.md").write_text("# Again\n\nDuplicate id.", encoding="utf-8")
    docs, skipped = split_items(list(read_corpus(folder)))
    assert [d.doc_id for d in docs] == ["good", "utf16", "utf32"]
    assert docs[1].text.endswith("Wide text. It reads.")
    reasons = {Path(s.ref).name: s.reason for s in skipped}
    assert reasons["empty.txt"] == "empty file"
    binary = "binary file (NUL bytes; UTF-16 and UTF-32 text needs its byte order mark)"
    assert reasons["binary.txt"] == reasons["late-nul.txt"] == binary
    assert reasons["utf16-no-mark.txt"] == binary
    assert reasons["latin1.md"].startswith("not UTF-8")
    assert reasons["good.md"].startswith("duplicate document id 'good'")


def test_jsonl_forms_and_bad_lines(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "c.jsonl",
        [
            {"id": "a", "title": "A", "text": "Plain text. Two sentences."},
            {
                "id": 7,
                "title": "B",
                "sections": [{"title": "S1", "text": "One."}, {"title": "S2", "text": "Two."}],
                "metadata": {"year": 2020},
            },
            "{not json",
            {"title": "no id", "text": "x"},
            {"id": "a", "text": "duplicate"},
            {"id": "c", "text": "   "},
            ["not", "an", "object"],
            {"id": "n", "text": "fine", "metadata": {"note": "a\x00b"}},
        ],
    )
    assert detect_format(path) is CorpusFormat.jsonl
    docs, skipped = split_items(list(read_corpus(path)))
    assert [d.doc_id for d in docs] == ["a", "7"]
    assert docs[1].metadata["year"] == 2020
    assert docs[1].sections is not None
    assert [docs[1].text[s.start : s.end] for s in docs[1].sections] == ["One.", "Two."]
    assert [s.reason.split(" (")[0] for s in skipped] == [
        "invalid JSON",
        "missing or non-string 'id'",
        "duplicate document id 'a'",
        "empty text",
        "not a JSON object",
        "contains NUL characters",
    ]
    assert skipped[0].ref.endswith("c.jsonl:3")


def test_unreadable_corpus_paths_raise(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="does not exist"):
        detect_format(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="holds no"):
        detect_format(tmp_path / "empty")
    (tmp_path / "x.csv").write_text("a,b")
    with pytest.raises(CorpusError, match="not JSONL"):
        detect_format(tmp_path / "x.csv")


@pytest.mark.skipif(not AILA_DIR.exists(), reason="../shared/data/aila2019 not available")
def test_aila_layout_is_detected_and_header_goes_to_metadata() -> None:
    assert detect_format(AILA_DIR) is CorpusFormat.aila
    first = next(iter(read_corpus(AILA_DIR)))
    assert isinstance(first, SourceDocument)
    assert first.doc_id == "C1"
    assert first.title == "Masud Khan v State Of Uttar Pradesh"
    assert first.metadata["header"][0] == "Supreme Court of India"
    assert first.metadata["delivered_by"].startswith("The Judgment was delivered by")
    assert first.text[first.body_start :].lstrip().startswith("1.  Petitioner Masud Khan")
