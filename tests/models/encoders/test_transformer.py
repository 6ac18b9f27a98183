from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from docsim.models.encoders.encoder import DocumentInput, Encoder
from docsim.models.encoders.loading import EncoderNotFoundError, load_encoder, resolve_encoder_path
from docsim.models.encoders.pooling import segment_mean
from docsim.models.encoders.transformer import TransformerEncoder
from docsim.models.inference.precision import autocast_dtype

TEXTS = [
    "The appellant was convicted under Section 302 of the Indian Penal Code.",
    "Bread dough rises because yeast ferments sugars into carbon dioxide.",
    "Short.",
    "A considerably longer sentence about exoplanets, transits, radial velocities and the "
    "telescopes that measure them from the ground and from orbit, in great detail.",
    "Marathon runners deplete glycogen after about thirty kilometres.",
]


def test_batched_encode_equals_one_by_one(tiny_encoder: TransformerEncoder) -> None:
    tiny_encoder.batch_tokens = 64  # force several length-sorted batches
    batched = tiny_encoder.encode(TEXTS)
    single = torch.cat([tiny_encoder.encode([t]) for t in TEXTS])
    torch.testing.assert_close(batched, single, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(batched.norm(dim=1), torch.ones(len(TEXTS)))
    assert tiny_encoder.encode([]).shape == (0, tiny_encoder.dim)


def test_encode_equals_a_plain_forward_pass(tiny_encoder: TransformerEncoder) -> None:
    tokens = tiny_encoder.tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = tiny_encoder.model(**tokens).last_hidden_state
    mask = tokens["attention_mask"].unsqueeze(-1).float()
    expected = F.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)
    torch.testing.assert_close(tiny_encoder.encode(TEXTS), expected, atol=1e-5, rtol=1e-5)


def test_default_encoder_bf16_stays_close_to_fp32(minilm: TransformerEncoder) -> None:
    assert isinstance(minilm, Encoder)
    fp32 = minilm.encode(TEXTS)
    bf16 = TransformerEncoder(
        minilm.model,
        minilm.tokenizer,
        name="minilm",
        max_length=minilm.max_length,
        precision="bf16",
    ).encode(TEXTS)
    cosine = (fp32 * bf16).sum(dim=1)
    assert cosine.min().item() >= 0.999, cosine
    # the model knows that legal text is closer to legal text than to baking
    similar = minilm.encode(["The court dismissed the criminal appeal.", TEXTS[0], TEXTS[1]])
    assert similar[0] @ similar[1] > similar[0] @ similar[2]


def test_encode_documents_pools_levels(tiny_encoder: TransformerEncoder) -> None:
    doc = DocumentInput(
        sentences=TEXTS,
        sentence_paragraph=[0, 0, 1, 2, 2],
        paragraph_section=[0, 0, 1],
        chunks=[" ".join(TEXTS[:3]), " ".join(TEXTS[3:])],
        chunk_section=[0, 1],
        chunk_tokens=[30, 40],
    )
    out = tiny_encoder.encode_documents([doc, doc])[1]
    sentences = tiny_encoder.encode(TEXTS)
    chunks = tiny_encoder.encode(doc.chunks)
    torch.testing.assert_close(out.sentences, sentences, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        out.paragraphs[0], F.normalize(sentences[:2].mean(0), dim=0), atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(out.sections, chunks, atol=1e-5, rtol=1e-5)  # one chunk per section
    expected_doc = F.normalize(30 * chunks[0] + 40 * chunks[1], dim=0)
    torch.testing.assert_close(out.document, expected_doc, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        out.paragraphs, segment_mean(sentences, torch.tensor([0, 0, 1, 2, 2]), 3)
    )


def test_token_offsets_index_the_text(tiny_encoder: TransformerEncoder) -> None:
    for text, spans in zip(TEXTS, tiny_encoder.token_offsets(TEXTS), strict=True):
        assert spans and all(0 <= a < b <= len(text) for a, b in spans)
        assert len(spans) == len(
            tiny_encoder.tokenizer(text, add_special_tokens=False)["input_ids"]
        )


def test_loading_errors_and_identity(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(EncoderNotFoundError, match="neither a built-in encoder"):
        resolve_encoder_path(tmp_path / "nope")
    with pytest.raises(EncoderNotFoundError, match="not a model directory"):
        resolve_encoder_path(tmp_path)
    encoder = load_encoder(tiny_encoder_dir)
    identity = encoder.identity()
    assert identity["type"] == "transformer" and len(identity["checkpoint_sha256"]) == 64
    assert load_encoder(tiny_encoder_dir).identity()["config_hash"] == identity["config_hash"]
    with pytest.raises(ValueError, match="Valid precisions are"):
        autocast_dtype("fp8", torch.device("cpu"))


def test_one_pass_chunks_are_their_sentences_pooled_token_states(
    tiny_encoder_dir: Path,
) -> None:
    encoder = load_encoder(tiny_encoder_dir, precision="fp32", chunk_vectors="sentences")
    doc = DocumentInput(
        sentences=TEXTS,
        sentence_paragraph=[0, 0, 1, 2, 2],
        paragraph_section=[0, 0, 1],
        chunks=[" ".join(TEXTS[:2]), TEXTS[2], TEXTS[3][:40], TEXTS[3][40:], TEXTS[4]],
        chunk_section=[0, 0, 1, 1, 1],
        chunk_tokens=[20, 2, 9, 20, 12],
        chunk_sentences=[(0, 2), (2, 3), (3, 4), (3, 4), (4, 5)],
    )
    out = encoder.encode_documents([doc, doc])[1]
    # reference: every sentence alone through the plain model, its token states summed
    sums, counts = [], []
    for text in TEXTS:
        tokens = encoder.tokenizer([text], return_tensors="pt")
        with torch.no_grad():
            hidden = encoder.model(**tokens).last_hidden_state[0]  # (T, H)
        sums.append(hidden.sum(0))
        counts.append(hidden.shape[0])
    expected = torch.stack(
        [
            F.normalize(sum(sums[i] for i in range(a, b)) / sum(counts[a:b]), dim=0)
            for a, b in doc.chunk_sentences
        ]
    )
    torch.testing.assert_close(out.chunks, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.sentences, encoder.encode(TEXTS), atol=1e-5, rtol=1e-5)
    weights = torch.tensor(doc.chunk_tokens, dtype=torch.float32)
    torch.testing.assert_close(
        out.document, segment_mean(expected, torch.zeros(5, dtype=torch.long), 1, weights)[0]
    )
    assert encoder.identity()["chunk_vectors"] == "sentences"
    plain = load_encoder(tiny_encoder_dir, precision="fp32")
    assert plain.identity()["config_hash"] != encoder.identity()["config_hash"]
    with pytest.raises(ValueError, match="chunk_vectors"):
        load_encoder(tiny_encoder_dir, chunk_vectors="tokens")


def test_batching_defaults_follow_the_device(tiny_encoder_dir: Path) -> None:
    from docsim.models.inference.batching import CPU_BATCHING, GPU_BATCHING, default_batching

    assert default_batching(torch.device("cpu")) == CPU_BATCHING == (2048, 256)
    assert default_batching(torch.device("cuda", 0)) == GPU_BATCHING == (32768, 4096)
    default = load_encoder(tiny_encoder_dir, device="cpu")
    assert isinstance(default, TransformerEncoder)
    assert (default.batch_tokens, default.max_batch_size) == CPU_BATCHING
    chosen = load_encoder(tiny_encoder_dir, device="cpu", batch_tokens=64, max_batch_size=3)
    assert isinstance(chosen, TransformerEncoder)
    assert (chosen.batch_tokens, chosen.max_batch_size) == (64, 3)
    none = load_encoder(tiny_encoder_dir, device="cpu", batch_tokens=None, max_batch_size=None)
    assert isinstance(none, TransformerEncoder)  # the settings' "unset" is the device's default
    assert (none.batch_tokens, none.max_batch_size) == CPU_BATCHING


def test_content_ids_reuse_the_last_two_offsets_calls_only_for_the_same_texts(
    tiny_encoder: TransformerEncoder,
) -> None:
    texts = ["One sentence here.", "Another, longer sentence with more words in it."]
    reference = [tiny_encoder.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    spans = tiny_encoder.token_offsets(texts)
    assert [len(s) for s in spans] == [len(r) for r in reference]
    reused = tiny_encoder.content_ids(texts)
    assert reused == reference
    assert reused is tiny_encoder.content_ids(list(texts))  # the same call's ids, kept
    tiny_encoder.token_offsets(["Something else entirely."])  # the next block, chunked ahead
    assert tiny_encoder.content_ids(texts) is reused  # still one of the last two calls
    tiny_encoder.token_offsets(["And a third text."])
    fresh = tiny_encoder.content_ids(texts)
    assert fresh == reference and fresh is not reused  # no longer kept: tokenised afresh


def test_content_tokens_equal_the_tokenizer_wrappers_even_after_a_truncating_call(
    minilm: TransformerEncoder,
) -> None:
    from docsim.models.inference.tokens import content_tokens, truncated_ids

    long = " ".join(["The appellant's counsel argued at length."] * 80)  # > 512 tokens
    texts = ["Café au lait, s'il vous plaît!", "", "  spaced  out  ", long, "No. 5 of 1990."]
    truncated_ids(minilm.tokenizer, texts, 16)  # leaves truncation set on the wrapper's backend
    ids, offsets = content_tokens(minilm.tokenizer, texts)
    reference = minilm.tokenizer(  # the plain wrapper call
        texts, add_special_tokens=False, return_offsets_mapping=True, verbose=False
    )
    assert ids == reference["input_ids"] and len(ids[3]) > 512
    assert offsets == [[tuple(span) for span in spans] for spans in reference["offset_mapping"]]
