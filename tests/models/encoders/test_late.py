"""Late chunking against a reference that knows nothing of `models.encoders.late`: each chunk's text
through the plain model, tokens assigned to sentences by their character offsets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from docsim.models.encoders.encoder import DocumentInput
from docsim.models.encoders.late import chunk_tokens, token_owners
from docsim.models.encoders.loading import load_encoder
from docsim.models.encoders.transformer import TransformerEncoder

SENTENCES = [
    "The appellant was convicted under Section 302 of the Indian Penal Code.",
    "The High Court confirmed the sentence on appeal.",
    "   ",  # no content token: encoded alone
    "A considerably longer sentence about the evidence of the eye witnesses, the recovery of "
    "the weapon, the medical report and the motive that the prosecution put forward at trial.",
    "The appeal is dismissed.",
]


def _count(encoder: TransformerEncoder, text: str) -> int:
    return len(encoder.tokenizer(text, add_special_tokens=False)["input_ids"])


def _document(encoder: TransformerEncoder) -> tuple[DocumentInput, list[list[tuple[int, int]]]]:
    """Chunks: sentences 0-2 packed, sentence 3 in two windows cut at a space, sentence 4;
    and, per chunk, each sentence's character span in the chunk's text."""
    long = SENTENCES[3]
    spans = encoder.token_offsets([long])[0]
    cut = next(k for k in range(len(spans) // 2, len(spans)) if spans[k - 1][1] < spans[k][0])
    first, second = long[: spans[cut - 1][1]], long[spans[cut][0] :]
    packed = " ".join(SENTENCES[:3])
    starts = [0, len(SENTENCES[0]) + 1, len(SENTENCES[0]) + len(SENTENCES[1]) + 2]
    chunks = [packed, first, second, SENTENCES[4]]
    doc = DocumentInput(
        sentences=SENTENCES,
        sentence_paragraph=[0, 0, 0, 1, 1],
        paragraph_section=[0, 0],
        chunks=chunks,
        chunk_section=[0, 0, 0, 0],
        chunk_tokens=[_count(encoder, c) for c in chunks],
        chunk_sentences=[(0, 3), (3, 4), (3, 4), (4, 5)],
    )
    sentence_spans = [
        [(s, s + len(SENTENCES[i])) for i, s in enumerate(starts)],
        [(0, len(first))],
        [(0, len(second))],
        [(0, len(SENTENCES[4]))],
    ]
    return doc, sentence_spans


def _reference(
    encoder: TransformerEncoder, doc: DocumentInput, spans: list[list[tuple[int, int]]]
) -> torch.Tensor:
    """`(N, d)` each sentence's mean token state over the chunks that hold it, tokens
    assigned by character offsets in the chunk's own tokenisation; None where it has none."""
    hidden_size = encoder.model.config.hidden_size
    sums = torch.zeros(len(doc.sentences), hidden_size)
    counts = torch.zeros(len(doc.sentences))
    for text, (a, b), chunk_spans in zip(doc.chunks, doc.chunk_sentences, spans, strict=True):
        tokens = encoder.tokenizer([text], return_tensors="pt", return_offsets_mapping=True)
        offsets = tokens.pop("offset_mapping")[0]
        with torch.no_grad():
            states = encoder.model(**tokens).last_hidden_state[0]  # (T, H)
        special = torch.isin(
            tokens["input_ids"][0], torch.tensor(encoder.tokenizer.all_special_ids)
        )
        for s, (start, end) in zip(range(a, b), chunk_spans, strict=True):
            inside = (offsets[:, 0] >= start) & (offsets[:, 1] <= end) & ~special
            sums[s] += states[inside].sum(0)
            counts[s] += inside.sum()
    return sums / counts.clamp(min=1)[:, None], counts


def test_late_sentences_are_their_tokens_states_in_their_chunks(tiny_encoder_dir: Path) -> None:
    encoder = load_encoder(tiny_encoder_dir, precision="fp32", chunk_vectors="late")
    assert isinstance(encoder, TransformerEncoder)
    encoder.batch_tokens = 64  # several length-sorted batches
    doc, spans = _document(encoder)
    out = encoder.encode_documents([doc, doc])[1]
    means, counts = _reference(encoder, doc, spans)
    assert counts.tolist()[2] == 0 and min(counts.tolist()[:2] + counts.tolist()[3:]) > 0
    expected = F.normalize(means, dim=-1)
    expected[2] = encoder.encode([SENTENCES[2]])[0]  # no token in any chunk: alone
    torch.testing.assert_close(out.sentences, expected, atol=1e-5, rtol=1e-5)
    # the chunk vectors are the plain encoding of the chunks' texts, as with two passes
    torch.testing.assert_close(out.chunks, encoder.encode(doc.chunks), atol=1e-5, rtol=1e-5)
    # in context: not the sentences encoded alone
    alone = encoder.encode(SENTENCES)
    assert (out.sentences[[0, 1, 3, 4]] * alone[[0, 1, 3, 4]]).sum(1).max() < 0.999


def test_late_mode_is_recorded_and_needs_mean_pooling(tiny_encoder_dir: Path) -> None:
    late = load_encoder(tiny_encoder_dir, chunk_vectors="late")
    plain = load_encoder(tiny_encoder_dir)
    assert late.identity()["chunk_vectors"] == "late"
    assert late.identity()["config_hash"] != plain.identity()["config_hash"]
    # the default, `auto`: late chunking where the pooling allows it, two passes elsewhere
    assert load_encoder(tiny_encoder_dir, chunk_vectors="auto").chunk_vectors == "late"
    cls = TransformerEncoder(
        plain.model, plain.tokenizer, name="t", max_length=64, pooling="cls", chunk_vectors="auto"
    )
    assert cls.chunk_vectors == "encode"
    with pytest.raises(ValueError, match="chunk_vectors"):
        TransformerEncoder(
            plain.model, plain.tokenizer, name="t", max_length=64, pooling="cls",
            chunk_vectors="late",
        )  # fmt: skip


def test_chunk_tokens_take_windows_in_turn_and_check_counts() -> None:
    doc = DocumentInput(
        sentences=["a b", "c", "d e f g h", "i"],
        sentence_paragraph=[0, 0, 0, 0],
        paragraph_section=[0],
        chunks=["a b c", "d e f", "g h", "i"],
        chunk_section=[0, 0, 0, 0],
        chunk_tokens=[3, 3, 2, 1],
        chunk_sentences=[(0, 2), (2, 3), (2, 3), (3, 4)],
    )
    ids = [[1, 2], [3], [4, 5, 6, 7, 8], [9]]
    plan = chunk_tokens([doc, doc], ids + [[x + 10 for x in s] for s in ids])
    # several sentences whole; a long one's windows in turn; the second document's sentences
    # are numbered after the first's
    assert plan.ids == [
        [1, 2, 3],
        [4, 5, 6],
        [7, 8],
        [9],
        [11, 12, 13],
        [14, 15, 16],
        [17, 18],
        [19],
    ]
    assert [o.tolist() for o in plan.owners[:4]] == [[0, 0, 1], [2, 2, 2], [2, 2], [3]]
    assert plan.owners[4].tolist() == [4, 4, 5]
    bad = DocumentInput(**{**doc.__dict__, "chunk_tokens": [3, 3, 1, 1]})
    with pytest.raises(ValueError, match="tokenised differently"):
        chunk_tokens([bad], ids)
    with pytest.raises(ValueError, match="chunk_sentences"):
        chunk_tokens([DocumentInput(**{**doc.__dict__, "chunk_sentences": ()})], ids)
    owners = token_owners([np.array([0, 0, 1]), np.array([2])], 1, 5)
    assert owners.tolist() == [[-1, 0, 0, 1, -1], [-1, 2, -1, -1, -1]]


def test_token_states_added_one_by_one_equal_the_runs_summed_on_the_host() -> None:
    """The GPU's way (every token added where the sums are) against the CPU's (runs of a
    sentence's tokens summed first), on the CPU, against a plain loop."""
    from docsim.models.encoders.late import add_token_states

    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(3, 7, 5, generator=generator)  # (B, T, H)
    owner = torch.tensor(
        [[-1, 0, 0, 1, 1, 1, -1], [-1, 1, 2, 2, -1, -1, -1], [-1, 4, 4, 4, 4, 4, -1]]
    )  # (B, T): sentence 1 spans two chunks, sentence 3 has no token
    reference_sums, reference_counts = torch.zeros(5, 5), torch.zeros(5)
    for b in range(3):
        for t in range(7):
            if owner[b, t] >= 0:
                reference_sums[owner[b, t]] += hidden[b, t]
                reference_counts[owner[b, t]] += 1
    for by_runs in (True, False):
        sums, counts = torch.zeros(5, 5), torch.zeros(5)
        add_token_states(sums, counts, hidden, owner, by_runs=by_runs)
        torch.testing.assert_close(sums, reference_sums)
        assert torch.equal(counts, reference_counts)
