"""Every encoder honours `device` and `precision`, the composite ones (CoLDE, graph) included.

The composite encoders are built untrained from the tiny backbone and saved as `docsim train`
saves them, then loaded through `load_encoder` as the indexer loads them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from docsim.models.encoders import colde, graph
from docsim.models.encoders.backbone import load_tokenizer
from docsim.models.encoders.encoder import DocumentInput
from docsim.models.encoders.loading import load_encoder

TEXTS = [
    "Tea.",
    "The court held that the appeal must fail on every ground raised. " * 4,
    "A loaf rises in a warm kitchen while the oven heats.",
]
DOCUMENT = DocumentInput(
    sentences=["The tide turns.", "Waves break on rocks.", "Bakers fold dough.", "Ovens heat."],
    sentence_paragraph=[0, 0, 1, 2],
    paragraph_section=[0, 0, 1],
    chunks=["The tide turns. Waves break on rocks.", "Bakers fold dough. Ovens heat."],
    chunk_section=[0, 1],
    chunk_tokens=[8, 7],
)
BUILDERS = {
    "colde": lambda base: colde.from_base(
        base, colde.ColdeConfig(dim=16, lstm_hidden=16, max_tokens=32)
    ),
    "graph": lambda base: graph.from_base(base, graph.GraphConfig(dim=16, max_tokens=32)),
}


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def composite_dir(
    request: pytest.FixtureRequest, tiny_encoder_dir: Path, tmp_path_factory
) -> tuple[str, Path]:
    kind = request.param
    torch.manual_seed(0)
    model = BUILDERS[kind](tiny_encoder_dir)
    out = tmp_path_factory.mktemp(kind)
    model.save(out, load_tokenizer(tiny_encoder_dir), details={})
    return kind, out


def _devices(encoder) -> set[str]:
    return {p.device.type for p in encoder.model.parameters()}


def test_composite_encoders_honour_precision(composite_dir: tuple[str, Path]) -> None:
    kind, path = composite_dir
    fp32 = load_encoder(path, precision="fp32", device="cpu")
    bf16 = load_encoder(path, precision="bf16", device="cpu")
    assert _devices(fp32) == {"cpu"}
    full, half = fp32.encode(TEXTS), bf16.encode(TEXTS)  # (3, d) each
    assert full.dtype == half.dtype == torch.float32
    assert not torch.equal(full, half), f"{kind}: bf16 autocast did not run"
    assert (full * half).sum(dim=1).min() > 0.98, kind


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_composite_encoders_run_on_cuda(composite_dir: tuple[str, Path], precision: str) -> None:
    """Every weight on the GPU (the graph layers too), vectors back on the CPU, equal to the
    CPU's within the precision's noise."""
    kind, path = composite_dir
    cpu = load_encoder(path, precision=precision, device="cpu")
    gpu = load_encoder(path, precision=precision, device="cuda")
    assert _devices(gpu) == {"cuda"}, kind
    # fp32 on CUDA: cuDNN runs CoLDE's LSTM in TF32 by default (torch.backends.cudnn.allow_tf32)
    tolerance = 1e-3 if precision == "fp32" else 2e-2
    on_gpu = gpu.encode(TEXTS)
    assert on_gpu.device.type == "cpu"
    torch.testing.assert_close(on_gpu, cpu.encode(TEXTS), atol=tolerance, rtol=0)
    (expected,), (found,) = cpu.encode_documents([DOCUMENT]), gpu.encode_documents([DOCUMENT])
    for level in ("document", "sections", "paragraphs", "sentences", "chunks"):
        value = getattr(found, level)
        assert value.device.type == "cpu", (kind, level)
        torch.testing.assert_close(value, getattr(expected, level), atol=tolerance, rtol=0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_transformer_encoder_runs_on_cuda(tiny_encoder_dir: Path) -> None:
    cpu = load_encoder(tiny_encoder_dir, precision="fp32", device="cpu")
    gpu = load_encoder(tiny_encoder_dir, precision="fp32", device="cuda")
    assert _devices(gpu) == {"cuda"}
    torch.testing.assert_close(gpu.encode(TEXTS), cpu.encode(TEXTS), atol=1e-4, rtol=0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_late_chunking_on_cuda_equals_the_cpu(tiny_encoder_dir: Path) -> None:
    """Late chunking sums each sentence's token states on the GPU (`add_token_states`
    without runs); the vectors equal the CPU's, which sums runs on the host."""
    from dataclasses import replace

    cpu = load_encoder(tiny_encoder_dir, precision="fp32", device="cpu", chunk_vectors="late")
    gpu = load_encoder(tiny_encoder_dir, precision="fp32", device="cuda", chunk_vectors="late")
    document = replace(DOCUMENT, chunk_sentences=[(0, 2), (2, 4)])
    tokens = [len(t) for t in cpu.token_offsets(list(document.chunks))]
    document = replace(document, chunk_tokens=tokens)
    (expected,), (found,) = cpu.encode_documents([document]), gpu.encode_documents([document])
    for level in ("sentences", "chunks", "paragraphs", "sections", "document"):
        torch.testing.assert_close(
            getattr(found, level), getattr(expected, level), atol=1e-4, rtol=0
        )


def test_to_device_leaves_a_tensor_on_the_cpu_as_it_is() -> None:
    from docsim.models.inference.precision import to_device

    t = torch.arange(6).reshape(2, 3)
    assert to_device(t, torch.device("cpu")) is t


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_to_device_copies_through_pinned_memory_to_cuda() -> None:
    """The copy does not wait for the GPU, and the pinned block outlives the copy: the
    values arrive even when the source is changed right after the call."""
    from docsim.models.inference.precision import to_device

    source = torch.arange(1 << 20)
    copies = [to_device(source, torch.device("cuda")) for _ in range(4)]
    source.zero_()
    for copy in copies:
        assert torch.equal(copy.cpu(), torch.arange(1 << 20))
