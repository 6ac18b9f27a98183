"""CoLDE's batched inference against its per-text definition."""

from __future__ import annotations

from pathlib import Path

import torch

from docsim.models.encoders.colde import ColdeConfig, ColdeEncoder, from_base, normalized
from docsim.models.encoders.encoder import DocumentInput
from tests.models.encoders.test_transformer import TEXTS


def colde(tiny_encoder_dir: Path) -> ColdeEncoder:
    torch.manual_seed(0)
    model = from_base(tiny_encoder_dir, ColdeConfig(max_tokens=12, dim=16, lstm_hidden=8))
    return ColdeEncoder(
        model, name="colde", source_dir=tiny_encoder_dir, precision="fp32", max_batch_size=3
    )


def test_batched_heads_equal_one_text_at_a_time(tiny_encoder_dir: Path) -> None:
    encoder = colde(tiny_encoder_dir)
    texts = TEXTS * 2 + ["x"]  # 1 to 4 chunks of 10 tokens each
    got = encoder.encode(texts)
    model, chunker = encoder.model, encoder.chunker
    with torch.inference_mode():
        expected = []
        for text in texts:  # the definition: one text is a one-section document
            chunks = chunker.section_chunks(text)
            batch = chunker.batch(chunks, [0] * len(chunks), list(range(len(chunks))))
            output = model(batch, [len(chunks)])
            expected.append(normalized(output.sections[0]))
    assert len({len(chunker.section_chunks(t)) for t in texts}) >= 3  # groups of several sizes
    torch.testing.assert_close(got, torch.stack(expected), atol=1e-5, rtol=1e-5)


def test_documents_encoded_together_equal_one_by_one(tiny_encoder_dir: Path) -> None:
    encoder = colde(tiny_encoder_dir)
    docs = [
        DocumentInput(
            sentences=TEXTS[i:],
            sentence_paragraph=[0] * (len(TEXTS) - i),
            paragraph_section=[0],
            chunks=[" ".join(TEXTS[i:])[:60]],
            chunk_section=[0],
            chunk_tokens=[10],
        )
        for i in range(3)
    ]
    together = encoder.encode_documents(docs)
    for doc, vectors in zip(docs, together, strict=True):
        alone = encoder.encode_documents([doc])[0]
        torch.testing.assert_close(vectors.sentences, alone.sentences, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(vectors.document, alone.document, atol=1e-5, rtol=1e-5)


def test_the_int8_backbone_stays_close_to_fp32(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    encoder = colde(tiny_encoder_dir)
    docs = [
        DocumentInput(
            sentences=TEXTS,
            sentence_paragraph=[0, 0, 1, 1, 1],
            paragraph_section=[0, 1],
            chunks=[" ".join(TEXTS[:2]), " ".join(TEXTS[2:])],
            chunk_section=[0, 1],
            chunk_tokens=[10, 10],
        )
    ]
    reference = encoder.encode_documents(docs)[0]
    encoder.export_openvino(TEXTS * 4, tmp_path / "ov")
    assert "FakeQuantize" in (tmp_path / "ov" / "model.xml").read_text()
    encoder.use_openvino(tmp_path / "ov")
    assert encoder.backend_record["name"] == "openvino-int8"
    got = encoder.encode_documents(docs)[0]
    for level in ("sentences", "sections", "chunks"):
        cosine = (getattr(got, level) * getattr(reference, level)).sum(dim=1)
        assert cosine.min() > 0.95, (level, cosine)
        assert not torch.equal(getattr(got, level), getattr(reference, level))
