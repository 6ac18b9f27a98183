"""A Hugging Face transformer with mean pooling: the default encoder and any local HF model.

Inference only: tokenise everything once, sort by length, cut into batches under a token
budget, run the forward pass on the encoder's backend (`models.inference.backends`: PyTorch under
bf16 autocast where supported, or the int8 OpenVINO export of the same model), mean-pool,
L2-normalise and put rows back in input order.

Dimensions: B batch, T tokens, H hidden size, N texts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

# the tokenizer side only: transformers' model classes (`AutoModel`) take seconds to import,
# and an encoder served on its OpenVINO export never needs them (`from_directory`)
from transformers import AutoTokenizer, PretrainedConfig, PreTrainedTokenizerBase

from docsim.models.encoders.document_encoding import encode_documents
from docsim.models.encoders.encoder import DocumentInput, DocumentVectors
from docsim.models.encoders.model_directory import (
    loaded_config,
    max_length,
    pooling_mode,
    sha256_file,
    weights_file,
)
from docsim.models.encoders.pooling import POOLING_MODES, pool_states
from docsim.models.inference.backends import (
    TORCH,
    ForwardBackend,
    TorchBackend,
    openvino_backend,
)
from docsim.models.inference.batching import (
    Batch,
    default_batching,
    default_max_padding,
    plan_batches,
)
from docsim.models.inference.openvino_export import export_openvino
from docsim.models.inference.precision import autocast, autocast_dtype, to_device
from docsim.models.inference.tokens import content_tokens, truncated_ids

if TYPE_CHECKING:
    from transformers import PreTrainedModel

CHUNK_VECTORS = ("encode", "sentences", "late")
_MODEL_LOCK = threading.Lock()  # one thread loads a deferred model (`TransformerEncoder.model`)


class TransformerRunner:
    """A transformer backbone's forward pass and pooling: where it runs (torch on a device,
    or the int8 OpenVINO export), its batches, and the pooled, normalised vectors of token ids.
    `TransformerEncoder` adds the texts: tokens, documents, identity, loading.

    Args:
        model: the backbone; its forward returns `last_hidden_state`. None defers it: then
            `config` is the backbone's configuration and `load_model` loads it on first use
            (an encoder that runs on an OpenVINO export never does).
        tokenizer: a fast tokenizer (offsets are needed for chunking).
        name: a short name recorded in manifests.
        max_length: the most tokens one input may hold, special tokens included.
        source_dir: the directory the weights came from (for the checkpoint hash).
        pooling: `mean` or `cls`.
        device: where the forward pass runs; results always come back on the CPU.
        precision: `auto`, `fp32` or `bf16` (autocast).
        batch_tokens: padded tokens per batch (batch size x longest input); default: the
            device's (`models.inference.batching.default_batching`).
        max_batch_size: cap on inputs per batch; default: the device's.
        head: an optional projection after pooling.
        source: how a loader finds the encoder again, recorded in manifests (a built-in's name,
            such as `minilm`); default: `source_dir`.
        chunk_vectors: how the sentence and chunk levels are encoded: `encode` (each
            sentence and each chunk through the model on its own: two passes), `sentences`
            (one pass over the sentences: a chunk is the token-weighted mean of its
            sentences' pooled token states) or `late` (one pass over the chunks: a sentence
            is the mean of its tokens' states in its chunk, `models.encoders.late`); `auto`: `late`
            with mean pooling, else `encode`.
        display_name: what answers report (`all-MiniLM-L6-v2`); default: `name`.
        config: the backbone's configuration, with a deferred `model`.
        load_model: loads the deferred `model`.
    """

    def __init__(
        self,
        model: PreTrainedModel | None,
        tokenizer: PreTrainedTokenizerBase,
        *,
        name: str,
        max_length: int,
        source_dir: Path | None = None,
        pooling: str = "mean",
        device: str | torch.device = "cpu",
        precision: str = "auto",
        batch_tokens: int | None = None,
        max_batch_size: int | None = None,
        head: torch.nn.Module | None = None,
        source: str | None = None,
        display_name: str | None = None,
        chunk_vectors: str = "encode",
        config: PretrainedConfig | None = None,
        load_model: Callable[[], PreTrainedModel] | None = None,
    ) -> None:
        if model is None and (config is None or load_model is None):
            raise ValueError("a deferred model needs its config and a load_model")
        if chunk_vectors == "auto":  # late chunking pools token states: mean pooling only
            chunk_vectors = "late" if pooling == "mean" else "encode"
        _check_modes(pooling, chunk_vectors, tokenizer)
        self.device = torch.device(device)
        self._model = self._placed(model) if model is not None else None
        self._load_model = load_model
        if model is not None:
            config = model.config
        assert config is not None  # checked above
        self.config: PretrainedConfig = config
        self.tokenizer = tokenizer
        self.name, self.display_name = name, display_name or name
        self.source_dir = source_dir
        self.source = source  # how a loader finds it again (a built-in's name); default: its dir
        self.max_length, self.pooling, self.chunk_vectors = max_length, pooling, chunk_vectors
        self.precision = precision
        self.amp_dtype = autocast_dtype(precision, self.device)
        tokens, inputs = default_batching(self.device)
        self.batch_tokens = batch_tokens or tokens
        self.max_batch_size = max_batch_size or inputs
        self.max_padding = default_max_padding(self.device)
        self.head = head.to(self.device).eval() if head is not None else None
        self.dim = _output_dim(self.config, head)
        self.load_options: dict[str, Any] | None = None  # set by `load_encoder`
        self._identity: dict[str, Any] | None = None
        self._special: tuple[list[int], list[int]] | None = None
        # `content_ids`: the last two `token_offsets` calls (a build chunks one block ahead)
        self._content_ids: tuple[tuple[list[str], list[list[int]]], ...] = ()
        self._backend: ForwardBackend | None = None  # torch's, made on first use
        self.backend_record: dict[str, str] = {"name": TORCH}

    def _placed(self, model: PreTrainedModel) -> PreTrainedModel:
        module: torch.nn.Module = model  # nn.Module's signatures: transformers' are unannotated
        module.to(self.device).eval()
        return model

    @property
    def model(self) -> PreTrainedModel:
        """The torch backbone, loaded now if it was deferred."""
        if self._model is None:
            with _MODEL_LOCK:
                if self._model is None:
                    assert self._load_model is not None
                    self._model = self._placed(self._load_model())
        return self._model

    @property
    def backend(self) -> ForwardBackend:
        """What runs the forward pass: torch on `model` unless `use_openvino` set another."""
        if self._backend is None:
            self._backend = TorchBackend(self.model, self.device, self.amp_dtype)
        return self._backend

    @backend.setter
    def backend(self, backend: ForwardBackend) -> None:
        self._backend = backend

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        return autocast(self.device, self.amp_dtype)

    def use_openvino(
        self, directory: Path, *, streams: int = 1, shape_cache: int | None = None
    ) -> None:
        """Run the forward pass on the OpenVINO model exported into `directory` (see
        `models.inference.openvino_export.export_openvino`), keeping `shape_cache` prepared kernels
        (default: a service's); identity and load options record the export, so that
        manifests name the backend and another process loads the same one. A head
        (projection after pooling) stays on torch."""
        self.backend = openvino_backend(
            self.device,
            directory,
            streams=streams,
            shape_cache=shape_cache,
            precision=self.precision,
        )
        self.backend_record = self.backend.record()
        self._identity = None
        if self.load_options is not None:
            self.load_options = {**self.load_options, "backend_dir": str(directory)}

    def pooled(self, batch: Batch, hidden: torch.Tensor, *, host: bool = True) -> torch.Tensor:
        """Pooled, normalised vectors of one batch from its `(B, T, H)` token states:
        `(B, dim)` float32 on the CPU (`host`) or where the states are."""
        with torch.inference_mode():
            mask = to_device(batch.attention_mask, hidden.device)
            pooled = pool_states(hidden, mask, self.pooling)  # (B, H)
        return self.project(pooled, host=host)

    def project(self, pooled: torch.Tensor, *, host: bool = True) -> torch.Tensor:
        """The head (if any) and L2 normalisation of pooled states `(n, H)`: `(n, d)`, on
        the CPU (`host`) or where they were computed."""
        with torch.inference_mode():
            if self.head is not None:
                with self._autocast():
                    pooled = self.head(pooled.to(self.device)).to(torch.float32)
            projected = F.normalize(pooled, dim=-1)
            return projected.cpu() if host else projected

    def plan_batches(self, token_ids: Sequence[Sequence[int]]) -> Iterator[Batch]:
        """Length-sorted, padded batches whose padded size stays under the token budget."""
        return plan_batches(
            token_ids,
            pad_id=self.tokenizer.pad_token_id or 0,
            batch_tokens=self.batch_tokens,
            max_batch_size=self.max_batch_size,
            max_padding=self.max_padding,
        )

    def encode_token_ids(self, token_ids: Sequence[Sequence[int]]) -> torch.Tensor:
        out = torch.empty((len(token_ids), self.dim), dtype=torch.float32)  # (N, d)
        # batches are padded lazily: the next one is built while the backend runs this one
        for batch, hidden in self.backend.hidden_states(self.plan_batches(token_ids)):
            out[torch.from_numpy(batch.rows)] = self.pooled(batch, hidden)
        return out


class TransformerEncoder(TransformerRunner):
    """A transformer backbone + mean (or CLS) pooling, loaded from a local directory
    (`from_directory`): the texts' tokens, every level of whole documents, and the identity
    an index records. Its arguments are `TransformerRunner`'s."""

    @classmethod
    def from_directory(
        cls,
        path: Path,
        *,
        name: str | None = None,
        backend_dir: str | Path | None = None,
        streams: int = 1,
        **options: Any,
    ) -> TransformerEncoder:
        """Load a local Hugging Face model directory (never touches a model hub); with
        `backend_dir`, on the OpenVINO int8 model exported there (`use_openvino`), with the
        torch model deferred until something asks for it (`model`): serving an export then
        neither imports transformers' model classes nor holds a second copy of the weights."""
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True, use_fast=True)

        def load_model() -> PreTrainedModel:
            from transformers import AutoModel

            loaded: PreTrainedModel = AutoModel.from_pretrained(path, local_files_only=True)
            return loaded

        model = load_model() if backend_dir is None else None
        config = model.config if model is not None else loaded_config(path)
        encoder = cls(
            model,
            tokenizer,
            name=name or path.name,
            max_length=max_length(path, tokenizer, config),
            source_dir=path,
            pooling=pooling_mode(path),
            config=config,
            load_model=load_model,
            **options,
        )
        if backend_dir is not None:
            encoder.use_openvino(Path(backend_dir), streams=streams)
        return encoder

    @property
    def chunk_capacity(self) -> int:
        return self.max_length - int(self.tokenizer.num_special_tokens_to_add(pair=False))

    def identity(self) -> dict[str, Any]:
        if self._identity is None:
            self._identity = _identity(self)
        return dict(self._identity)

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids with special tokens, truncated to `max_length`."""
        return truncated_ids(self.tokenizer, texts, self.max_length)

    def token_offsets(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """Character spans of each text's content tokens. The ids come from the same call and
        are kept for the texts (the last two calls'): chunking a block asks for its sentences'
        spans, then late chunking for the same sentences' ids (`content_ids`), which need no
        second pass, also when the next block was chunked in between."""
        ids, offsets = content_tokens(self.tokenizer, texts)
        self._content_ids = (*self._content_ids, (list(texts), ids))[-2:]  # one assignment
        return offsets

    def content_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's content token ids (no special tokens, not truncated): those of one of
        the last two `token_offsets` calls when it was given the same texts, else tokenised
        now. Other threads' calls in between are only a miss: the texts are compared, not
        trusted."""
        wanted = list(texts)
        for kept_texts, kept_ids in self._content_ids:  # one read: another thread may replace it
            if kept_texts == wanted:
                return kept_ids
        return content_tokens(self.tokenizer, texts)[0]

    def export_openvino(self, texts: list[str], out_dir: Path, *, int8: bool = True) -> None:
        """Export the backbone to OpenVINO (`models.inference.openvino_export`), int8 calibrated on
        `texts` batched as `encode` batches them, or float32."""
        batches = list(self.plan_batches(self.tokenize(texts)))
        export_openvino(self.model, batches, out_dir, int8=int8)

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        if len(texts) == 0:
            return torch.empty((0, self.dim), dtype=torch.float32)
        return self.encode_token_ids(self.tokenize(texts))

    def encode_documents(
        self,
        documents: Sequence[DocumentInput],
        sentence_vectors: Sequence[torch.Tensor] | None = None,
    ) -> list[DocumentVectors]:
        """Encode sentences and chunks of all documents, then pool, by `chunk_vectors`'
        mode (`models.encoders.document_encoding.encode_documents`)."""
        return encode_documents(self, documents, sentence_vectors)

    def special_tokens(self) -> tuple[list[int], list[int]]:
        """The ids the tokenizer puts before and after a text's content tokens."""
        if self._special is None:
            content = self.tokenizer("a", add_special_tokens=False)["input_ids"]
            full = self.tokenizer("a", add_special_tokens=True)["input_ids"]
            at = next(i for i in range(len(full)) if full[i : i + len(content)] == content)
            self._special = (list(full[:at]), list(full[at + len(content) :]))
        return self._special


def _check_modes(pooling: str, chunk_vectors: str, tokenizer: PreTrainedTokenizerBase) -> None:
    """Raises ValueError for an unknown pooling or chunk_vectors mode, or a slow tokenizer."""
    if chunk_vectors not in CHUNK_VECTORS or (chunk_vectors != "encode" and pooling != "mean"):
        raise ValueError(
            f"Invalid chunk_vectors {chunk_vectors!r} for {pooling} pooling: `encode`, or "
            "`sentences` or `late` with mean pooling."
        )
    if pooling not in POOLING_MODES:
        raise ValueError(
            f"Invalid pooling mode {pooling!r}. Valid pooling modes are: {POOLING_MODES}."
        )
    if not tokenizer.is_fast:
        raise ValueError("TransformerEncoder needs a fast tokenizer (character offsets).")


def _output_dim(config: PretrainedConfig, head: torch.nn.Module | None) -> int:
    """The vector size: the head's output, else the model's hidden size."""
    if head is None:
        return int(config.hidden_size)
    out_features = getattr(head, "out_features", None)
    if not isinstance(out_features, int):
        raise ValueError(f"the head {type(head).__name__} does not declare its out_features")
    return out_features


def _identity(encoder: TransformerEncoder) -> dict[str, Any]:
    """What an index manifest records of `encoder`: its config's hash, its weights' sha256."""
    config = encoder.config.to_dict()
    config.pop("transformers_version", None)
    config.pop("_name_or_path", None)
    described = {"config": config, "pooling": encoder.pooling, "max_length": encoder.max_length}
    if encoder.chunk_vectors != "encode":  # hashes of earlier indexes stay as they were
        described["chunk_vectors"] = encoder.chunk_vectors
    config_blob = json.dumps(described, sort_keys=True, default=str)
    weights = weights_file(encoder.source_dir)
    source_dir = str(encoder.source_dir) if encoder.source_dir else None
    return {
        "name": encoder.name,
        "type": getattr(encoder.config, "docsim_type", None) or "transformer",
        "architecture": config.get("model_type"),
        "dim": encoder.dim,
        "max_length": encoder.max_length,
        "pooling": encoder.pooling,
        "config_hash": hashlib.sha256(config_blob.encode()).hexdigest(),
        "checkpoint_sha256": sha256_file(weights) if weights else None,
        "source": encoder.source or source_dir,
        "display_name": encoder.display_name,
        "backend": dict(encoder.backend_record),
        "chunk_vectors": encoder.chunk_vectors,
    }
