"""The int8 OpenVINO backend against the torch fp32 forward pass of the same model."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from copy import deepcopy
from pathlib import Path

import pytest
import torch

from docsim.models.encoders.loading import load_encoder
from docsim.models.encoders.transformer import TransformerEncoder
from docsim.models.inference.backends import (
    OPENVINO_INT8,
    TORCH,
    BackendUnavailableError,
    OpenVinoBackend,
    files_sha256,
)
from docsim.models.inference.openvino_export import export_openvino
from tests.models.encoders.test_transformer import TEXTS

CALIBRATION = [
    "The appellant challenged the order of the High Court under Article 226.",
    "Yeast, flour, water and salt are all a plain loaf needs.",
    "The telescope measured the transit depth to within a few parts per million.",
    "Runners who start too fast pay for it in the last ten kilometres of a marathon.",
] * 8


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory, tiny_encoder_dir: Path) -> Path:
    encoder = load_encoder(tiny_encoder_dir, precision="fp32")
    batches = list(encoder.plan_batches(encoder.tokenize(CALIBRATION)))
    out = tmp_path_factory.mktemp("exported") / "ov"
    export_openvino(encoder.model, batches, out)
    return out


def test_export_is_quantised_and_leaves_the_torch_model_alone(
    exported: Path, tiny_encoder: TransformerEncoder
) -> None:
    graph = (exported / "model.xml").read_text()
    assert "FakeQuantize" in graph or "FakeConvert" in graph  # int8 ranges on the matmuls
    # tracing patches the module it is given: the export must have traced a copy
    before = tiny_encoder.encode(TEXTS)
    export_openvino(
        tiny_encoder.model,
        list(tiny_encoder.plan_batches(tiny_encoder.tokenize(CALIBRATION))),
        exported.parent / "again",
    )
    torch.testing.assert_close(tiny_encoder.encode(TEXTS), before)


def test_int8_vectors_stay_close_to_fp32(exported: Path, tiny_encoder: TransformerEncoder) -> None:
    reference = tiny_encoder.encode(TEXTS)  # torch fp32
    tiny_encoder.use_openvino(exported)
    vectors = tiny_encoder.encode(TEXTS)
    assert tiny_encoder.backend.name == OPENVINO_INT8
    assert vectors.shape == reference.shape and vectors.dtype == torch.float32
    torch.testing.assert_close(vectors.norm(dim=1), torch.ones(len(TEXTS)))
    cosine = (vectors * reference).sum(dim=1)
    assert cosine.min() > 0.98, cosine
    assert not torch.equal(vectors, reference)  # it did run the other model


def test_a_head_after_pooling_stays_on_torch(
    exported: Path, tiny_encoder: TransformerEncoder
) -> None:
    torch.manual_seed(0)
    tiny_encoder.head = torch.nn.Linear(tiny_encoder.model.config.hidden_size, 8)
    tiny_encoder.dim = 8
    reference = tiny_encoder.encode(TEXTS)
    tiny_encoder.use_openvino(exported)
    vectors = tiny_encoder.encode(TEXTS)
    assert vectors.shape == (len(TEXTS), 8)
    assert (vectors * reference).sum(dim=1).min() > 0.95


def test_batched_and_in_flight_equal_one_by_one(
    exported: Path, tiny_encoder: TransformerEncoder
) -> None:
    tiny_encoder.use_openvino(exported, streams=2)
    tiny_encoder.batch_tokens = 32  # many small batches, two in flight at a time
    texts = TEXTS * 5
    batched = tiny_encoder.encode(texts)
    single = torch.cat([tiny_encoder.encode([t]) for t in texts])
    torch.testing.assert_close(batched, single, atol=2e-3, rtol=0)
    torch.testing.assert_close(batched[: len(TEXTS)], batched[len(TEXTS) : 2 * len(TEXTS)])


def test_threads_encoding_at_once_get_their_own_results(
    exported: Path, tiny_encoder: TransformerEncoder
) -> None:
    tiny_encoder.use_openvino(exported)
    tiny_encoder.batch_tokens = 32
    inputs = [TEXTS[i:] + TEXTS[:i] for i in range(4)]
    expected = [tiny_encoder.encode(texts) for texts in inputs]
    got: dict[int, torch.Tensor] = {}

    def work(i: int) -> None:
        for _ in range(5):
            got[i] = tiny_encoder.encode(inputs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i in range(4):
        torch.testing.assert_close(got[i], expected[i], atol=2e-3, rtol=0)


def test_a_consumer_that_stops_early_leaves_the_backend_usable(exported: Path) -> None:
    backend = OpenVinoBackend(exported, streams=2)
    encoder_batches = [
        type("B", (), {"input_ids": torch.full((2, 5), 101), "attention_mask": torch.ones(2, 5)})
        for _ in range(6)
    ]
    for b in encoder_batches:
        b.attention_mask = b.attention_mask.long()
    stream = backend.hidden_states(encoder_batches)
    first = next(stream)[1]
    stream.close()  # two requests were in flight
    again = [hidden for _, hidden in backend.hidden_states(encoder_batches)]
    assert len(again) == 6
    torch.testing.assert_close(again[0], first)


def test_identity_and_load_options_name_the_backend(exported: Path, tiny_encoder_dir: Path) -> None:
    plain = load_encoder(tiny_encoder_dir, precision="fp32")
    assert plain.identity()["backend"] == {"name": TORCH}
    loaded = load_encoder(tiny_encoder_dir, precision="fp32", backend_dir=exported)
    backend = loaded.identity()["backend"]
    assert backend["name"] == OPENVINO_INT8 and backend["sha256"] == files_sha256(exported)
    assert loaded.identity()["config_hash"] == plain.identity()["config_hash"]
    assert Path(loaded.load_options["backend_dir"]) == exported  # what a Ray actor loads


def test_what_the_backend_cannot_run_is_refused(
    exported: Path, tiny_encoder: TransformerEncoder, tmp_path: Path
) -> None:
    with pytest.raises(BackendUnavailableError, match="no exported model"):
        OpenVinoBackend(tmp_path)
    elsewhere = deepcopy(tiny_encoder)
    elsewhere.device = torch.device("meta")
    with pytest.raises(BackendUnavailableError, match="run on the CPU, not meta"):
        elsewhere.use_openvino(exported)
    with pytest.raises(ValueError, match="at least one batch"):
        export_openvino(tiny_encoder.model, [], tmp_path / "none")


def test_a_copied_encoder_shares_the_compiled_model_and_encodes_alike(
    exported: Path, tiny_encoder: TransformerEncoder
) -> None:
    tiny_encoder.use_openvino(exported)
    clone = deepcopy(tiny_encoder)
    assert clone.backend is not tiny_encoder.backend
    assert clone.backend.compiled is tiny_encoder.backend.compiled
    torch.testing.assert_close(clone.encode(TEXTS), tiny_encoder.encode(TEXTS))


def test_the_compiled_model_keeps_a_bounded_cache_of_shapes(
    exported: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenVINO keeps at most `SHAPE_CACHE_CAPACITY` prepared kernels, one an operation and an
    input shape (its default, 5,000, let a build's memory grow with the variety of its
    batches; 256 was too few for a query's batches)."""
    import openvino

    from docsim.models.inference import backends as inference

    configs: list[dict] = []
    compile_model = openvino.Core.compile_model

    def recorded(self, model, device, config):  # noqa: ANN001, ANN202
        configs.append(dict(config))
        return compile_model(self, model, device, config)

    monkeypatch.setattr(openvino.Core, "compile_model", recorded)
    backend = OpenVinoBackend(exported, streams=3)  # not compiled yet with 3 streams
    assert configs and configs[-1]["CPU_RUNTIME_CACHE_CAPACITY"] == "1024"
    assert inference.SHAPE_CACHE_CAPACITY == 1024
    OpenVinoBackend(exported, streams=3, shape_cache=inference.BUILD_SHAPE_CACHE_CAPACITY)
    assert (
        configs[-1]["CPU_RUNTIME_CACHE_CAPACITY"]
        == "256"
        == str(inference.BUILD_SHAPE_CACHE_CAPACITY)
    )  # compiled apart: the cache is part of the compiled model's key
    batch = type("B", (), {"input_ids": torch.full((1, 7), 101), "attention_mask": None})
    batch.attention_mask = torch.ones(1, 7, dtype=torch.long)
    ((_, hidden),) = list(backend.hidden_states([batch]))
    assert hidden.shape[:2] == (1, 7)


def test_openvino_and_nncf_send_no_telemetry() -> None:
    """OpenVINO's converter and NNCF would send usage events to Google Analytics, each from a
    fork of the whole process: docsim imports them as if `openvino-telemetry` were absent.
    Checked in a fresh interpreter: NNCF turns itself off under pytest, and another test may
    have imported OpenVINO already."""
    script = (
        "from docsim.models.inference import backends as inference\n"
        "inference.import_openvino()\n"
        "import nncf.telemetry.wrapper as nncf_telemetry\n"
        "import openvino.tools.ovc.convert_impl as convert\n"
        "print(convert.tm.__name__, type(nncf_telemetry.telemetry).__name__)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "NNCF_CI", "NNCF_DEV")}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.split() == ["openvino.tools.ovc.telemetry_stub", "MagicMock"]


def test_an_encoder_loaded_on_its_export_defers_the_torch_model(
    exported: Path, tiny_encoder_dir: Path
) -> None:
    """`backend_dir` loads the tokenizer and the export only: the same identity and vectors
    as the torch model moved onto that export, and the model only when asked for."""
    deferred = load_encoder(tiny_encoder_dir, precision="fp32", backend_dir=str(exported))
    moved = load_encoder(tiny_encoder_dir, precision="fp32")
    moved.use_openvino(exported)
    assert deferred._model is None
    assert deferred.identity() == moved.identity()
    torch.testing.assert_close(deferred.encode(TEXTS), moved.encode(TEXTS))
    assert deferred._model is None  # encoding ran on the export
    assert deferred.model.config.to_dict() == moved.model.config.to_dict()  # loaded now


@pytest.mark.parametrize("which", ["tiny", "minilm"])
def test_the_config_read_alone_is_the_one_loading_leaves(
    which: str, tiny_encoder: TransformerEncoder, minilm: TransformerEncoder
) -> None:
    """The identity hashes the configuration: read without the model (`loaded_config`), it
    must equal what `AutoModel.from_pretrained` leaves on the model (which adds the dtype)."""
    from docsim.models.encoders.model_directory import loaded_config

    encoder = tiny_encoder if which == "tiny" else minilm
    assert encoder.source_dir is not None
    assert loaded_config(encoder.source_dir).to_dict() == encoder.model.config.to_dict()
