from __future__ import annotations

from pathlib import Path

import pytest

from docsim.indexer.text.chunking import add_chunks, chunk_document
from docsim.indexer.text.corpus import read_corpus
from docsim.indexer.text.readers.text import text_document
from docsim.indexer.text.sentences import SentenceSplitter
from docsim.indexer.text.split import split_document
from docsim.models.encoders.transformer import TransformerEncoder


@pytest.mark.parametrize("capacity", [8, 40, 126])
def test_chunks_respect_capacity_and_sections(
    sample_corpus: Path, splitter: SentenceSplitter, tiny_encoder: TransformerEncoder, capacity: int
) -> None:
    docs = [split_document(d, splitter) for d in list(read_corpus(sample_corpus))[:6]]
    for doc in add_chunks(docs, tiny_encoder, capacity):
        assert doc.chunks
        for chunk in doc.chunks:
            section = doc.sections[chunk.section]
            assert section.start <= chunk.start < chunk.end <= section.end
            assert 1 <= chunk.n_tokens <= capacity
            # reference: tokenising the chunk's own text gives the recorded count
            assert (
                len(tiny_encoder.token_offsets([doc.text[chunk.start : chunk.end]])[0])
                == chunk.n_tokens
            )
        # chunks cover every sentence, in order, without overlap
        ends = [c.end for c in doc.chunks]
        starts = [c.start for c in doc.chunks]
        assert all(a <= b for a, b in zip(ends, starts[1:], strict=False))
        for sentence in doc.sentences():
            assert any(c.start <= sentence.start and sentence.end <= c.end for c in doc.chunks) or (
                any(c.start <= sentence.start < c.end for c in doc.chunks)
            )


def test_sentence_longer_than_capacity_is_cut_at_token_boundaries(
    splitter: SentenceSplitter,
) -> None:
    text = "Title\n\none two three four five six seven. Eight nine."
    doc = split_document(text_document("x", text), splitter)
    tokens = []
    for s in doc.sentences():
        sentence = doc.text[s.start : s.end]
        spans, pos = [], 0
        for word in sentence.split(" "):
            spans.append((pos, pos + len(word)))
            pos += len(word) + 1
        tokens.append(spans)
    chunked = chunk_document(doc, tokens, capacity=3)
    assert [doc.text[c.start : c.end] for c in chunked.chunks] == [
        "one two three",
        "four five six",
        "seven.",
        "Eight nine.",
    ]
    assert [c.n_tokens for c in chunked.chunks] == [3, 3, 1, 2]
    # the windows of the long sentence hold that one sentence
    assert chunked.encoder_input().chunk_sentences == [(0, 1), (0, 1), (0, 1), (1, 2)]


@pytest.mark.parametrize("capacity", [8, 40, 126])
def test_chunk_sentences_name_the_sentences_each_chunk_overlaps(
    sample_corpus: Path, splitter: SentenceSplitter, tiny_encoder: TransformerEncoder, capacity: int
) -> None:
    docs = [split_document(d, splitter) for d in list(read_corpus(sample_corpus))[:6]]
    for doc in add_chunks(docs, tiny_encoder, capacity):
        sentences = list(doc.sentences())
        ranges = doc.encoder_input().chunk_sentences
        assert len(ranges) == len(doc.chunks)
        for chunk, (first, last) in zip(doc.chunks, ranges, strict=True):
            # reference: every sentence whose span overlaps the chunk's, by brute force
            overlapping = [
                i for i, s in enumerate(sentences) if s.start < chunk.end and chunk.start < s.end
            ]
            assert list(range(first, last)) == overlapping


def test_chunk_rejects_bad_capacity(splitter: SentenceSplitter) -> None:
    doc = split_document(text_document("x", "T\n\nA sentence."), splitter)
    with pytest.raises(ValueError, match="at least 1 token"):
        chunk_document(doc, [[(0, 1)]], capacity=0)


def test_chunked_documents_cross_a_pickle_unchanged(
    sample_corpus: Path, splitter: SentenceSplitter, tiny_encoder: TransformerEncoder
) -> None:
    """Split plans and split workers pickle documents (`__reduce__` of the slotted spans)."""
    import pickle

    docs = [split_document(d, splitter) for d in list(read_corpus(sample_corpus))[:4]]
    chunked = add_chunks(docs, tiny_encoder, 16)
    again = pickle.loads(pickle.dumps(chunked, protocol=pickle.HIGHEST_PROTOCOL))
    assert again == chunked and all(d.chunks for d in again)
    sentence = chunked[0].sections[0].paragraphs[0].sentences[0]
    assert pickle.loads(pickle.dumps(sentence)) == sentence
