from __future__ import annotations

from pathlib import Path

import pytest

from docsim.indexer.errors import EmptyDocumentError
from docsim.indexer.text.corpus import aila_document, read_corpus, sectioned_document
from docsim.indexer.text.documents import Document, SourceDocument
from docsim.indexer.text.readers.text import text_document
from docsim.indexer.text.sentences import SentenceSplitter
from docsim.indexer.text.split import is_title_like, split_document
from tests.utils.corpora import AILA_DIR


def assert_offsets_round_trip(doc: Document) -> None:
    """Every unit is an exact, stripped slice, nested in its parent, in order, no overlap."""
    text = doc.text
    previous_end = 0
    for section in doc.sections:
        assert previous_end <= section.start < section.end <= len(text)
        previous_end = section.end
        p_end = section.start
        for paragraph in section.paragraphs:
            assert p_end <= paragraph.start and paragraph.end <= section.end
            p_end = paragraph.end
            unit = text[paragraph.start : paragraph.end]
            assert unit == unit.strip() and unit
            s_end = paragraph.start
            for sentence in paragraph.sentences:
                assert s_end <= sentence.start < sentence.end <= paragraph.end
                s_end = sentence.end
                unit = text[sentence.start : sentence.end]
                assert unit == unit.strip() and unit
            assert paragraph.sentences[0].start == paragraph.start
            assert paragraph.sentences[-1].end == paragraph.end


def test_sample_corpus_round_trips(sample_corpus: Path, splitter: SentenceSplitter) -> None:
    docs = [split_document(d, splitter) for d in read_corpus(sample_corpus)]
    assert len(docs) >= 40
    for doc in docs:
        assert_offsets_round_trip(doc)
        assert len(doc.sections) >= 3, doc.doc_id
        assert all(s.title for s in doc.sections), doc.doc_id
        # every non-heading word of the file is inside some sentence
        words = [
            w for line in doc.text.splitlines() if not line.startswith("#") for w in line.split()
        ]
        covered = [w for s in doc.sentences() for w in doc.text[s.start : s.end].split()]
        assert covered == words


@pytest.mark.skipif(not AILA_DIR.exists(), reason="../shared/data/aila2019 not available")
def test_aila_files_round_trip(splitter: SentenceSplitter) -> None:
    files = sorted(AILA_DIR.glob("*.txt"))[::60]
    for file in files:
        doc = split_document(aila_document(file.stem, file.read_text(encoding="utf-8")), splitter)
        assert_offsets_round_trip(doc)
        assert doc.title == file.read_text(encoding="utf-8").splitlines()[0].strip()
        # the header (court, date, judge) is metadata, not content
        first = doc.text[doc.sections[0].start : doc.sections[0].end]
        assert not first.startswith("Supreme Court of India")
        assert doc.counts()["paragraph"] >= 2


def test_unicode_offsets_round_trip(splitter: SentenceSplitter) -> None:
    text = (
        "# Ünïcödé — tëst\n\n## Première partie\n\nLe café coûte 3,50 €. Ça va? 東京は大きい。\n\n"
        "Emoji 🎉 count as one character. Done.\n\n## Zweiter Teil\n\nDie Straße ist naß. Ende."
    )
    doc = split_document(text_document("u", text), splitter)
    assert_offsets_round_trip(doc)
    assert [s.title for s in doc.sections] == ["Première partie", "Zweiter Teil"]
    assert doc.text[doc.sections[0].paragraphs[1].start : doc.sections[0].paragraphs[1].end] == (
        "Emoji 🎉 count as one character. Done."
    )


def test_lines_are_paragraphs_when_there_are_no_blank_lines(splitter: SentenceSplitter) -> None:
    text = "Title line\nFirst paragraph here. It has two sentences.\nSecond paragraph.\nThird one."
    doc = split_document(text_document("x", text), splitter)
    assert doc.title == "Title line"
    assert [doc.text[p.start : p.end] for p in doc.paragraphs()] == [
        "First paragraph here. It has two sentences.",
        "Second paragraph.",
        "Third one.",
    ]


def test_plain_headings_start_sections(splitter: SentenceSplitter) -> None:
    text = (
        "A Study\n\nIntroduction\n\nSome text here. More text.\n\nMethods And Materials\n\n"
        "We did things.\nOn wrapped lines.\n\nleave granted\n\nThe end."
    )
    doc = split_document(text_document("x", text), splitter)
    assert [s.title for s in doc.sections] == ["Introduction", "Methods And Materials"]
    assert doc.text[doc.sections[1].paragraphs[0].start : doc.sections[1].paragraphs[0].end] == (
        "We did things.\nOn wrapped lines."
    )


def test_title_like_lines() -> None:
    assert is_title_like("JUDGMENT")
    assert is_title_like("Supreme Court of India")
    assert not is_title_like("Leave granted.")
    assert not is_title_like("the appeal is dismissed")
    assert not is_title_like("This is a rather long line that goes on and on with many words in it")


def test_explicit_sections_are_used(splitter: SentenceSplitter) -> None:
    source = sectioned_document("j", "Doc", [("Intro", "One. Two."), ("", "Three.\n\nFour.")], {})
    assert isinstance(source, SourceDocument)
    doc = split_document(source, splitter)
    assert_offsets_round_trip(doc)
    assert [s.title for s in doc.sections] == ["Intro", ""]
    assert [doc.text[s.start : s.end] for s in doc.sentences()] == [
        "One.",
        "Two.",
        "Three.",
        "Four.",
    ]


def test_document_without_sentences_is_rejected(splitter: SentenceSplitter) -> None:
    with pytest.raises(EmptyDocumentError, match="no sentences"):
        split_document(text_document("e", "# Only a title\n\n## And a heading\n"), splitter)


def test_a_paragraph_of_hundreds_of_sentences_is_cut_into_runs(splitter: SentenceSplitter) -> None:
    from docsim.indexer.text import split

    body = " ".join(f"Sentence number {i} says one thing." for i in range(200))
    doc = split_document(text_document("long", f"Title\n{body}\n"), splitter)

    sizes = [len(p.sentences) for p in doc.paragraphs()]
    assert sum(sizes) == 200 and len(sizes) > 1
    assert max(sizes) <= split.FALLBACK_PARAGRAPH_SENTENCES
    assert min(sizes) >= split.FALLBACK_PARAGRAPH_SENTENCES - 1
    assert_offsets_round_trip(doc)


def test_text_without_punctuation_or_line_breaks_keeps_every_level(
    splitter: SentenceSplitter,
) -> None:
    """An OCR-like judgment: no sentence marks, no line breaks. It once became one sentence
    and one paragraph (every sentence method a truncated whole-document match)."""
    words = " ".join(f"term{i % 97} clause{i % 13}" for i in range(4_000))
    doc = split_document(text_document("ocr", f"Title\n{words}"), splitter)

    counts = doc.counts()
    assert counts["sentence"] >= 8_000 // 40 and counts["paragraph"] >= counts["sentence"] // 8
    assert_offsets_round_trip(doc)
