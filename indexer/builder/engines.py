"""Where the encode stage of a build runs: in this process (`local`) or on Ray Data (`ray`).

An engine turns blocks of split documents into their vectors, block by block and in order;
everything else about a build (SQL rows, ids, block files, FAISS, publishing) stays in the
process that runs `build_index`, so both engines produce the same version.

The Ray engine sends every document's encoder input through `Dataset.map_batches` with an
actor class: each actor loads the encoder once (from the directory or built-in name the local
encoder came from, with the same precision and batching) and encodes one block of documents
per batch, on a GPU of its own when the cluster has them. Results stream back in order
(`preserve_order`), so the first blocks are stored while later ones are still encoding.
Without `DOCSIM_RAY__ADDRESS` a local Ray is started for the build and stopped after it:
temporary files under `<data_dir>/ray`, usage reporting off, and token authentication on
with a random token (see `indexer.ray_session.private_cluster_environment` for why).
"""

from __future__ import annotations

import logging
import pickle
import queue
import threading
import time
from collections.abc import Generator, Iterable, Iterator
from typing import Any, Protocol

import numpy as np

from docsim.indexer.choices import EngineName
from docsim.indexer.errors import EngineError, RaySessionError
from docsim.indexer.ray_session import connect_ray
from docsim.indexer.settings import Settings
from docsim.indexer.text.documents import Document
from docsim.models.encoders.encoder import DocumentVectors, Encoder
from docsim.models.inference.pacing import current_hook, paced

logger = logging.getLogger(__name__)


ENGINES: tuple[str, ...] = tuple(e.value for e in EngineName)
# Ray Data's executor runs in the driver and needs a raylet of its own there: through Ray
# Client it fails mid-run ("'Worker' object has no attribute 'core_worker'", Ray 2.60; Ray's
# maintainers call Ray Data unsupported on Ray Client), so it is refused before any work.
RAY_DATA_NEEDS_A_NODE = (
    "the ray engine runs Ray Data, which does not work through Ray Client ({address}): run "
    "the build on a Ray node (`ray start --address=HEAD:6379 --num-cpus=0` first, then "
    "DOCSIM_RAY__ADDRESS=auto), or use the local engine"
)
# AF_UNIX socket paths are limited to 107 bytes; Ray puts its sockets ~60 bytes below its
# temporary folder, so the folder itself must be short.


# Each block with its documents' vectors, in order: a generator, which the build closes
# (`contextlib.closing`) to free the engine's resources as soon as its loop ends or fails.
EncodedBlocks = Generator[tuple[list[Document], list[DocumentVectors]], None, None]


class EncodeEngine(Protocol):
    def encode_blocks(self, blocks: Iterable[list[Document]]) -> EncodedBlocks: ...


class LocalEngine:
    """The encode stage in this process, with the build's encoder, one block ahead: a thread
    chunks and encodes the next block while the caller stores the last one (the forward
    pass releases the GIL; SQL inserts and file writes then cost no encoding time)."""

    def __init__(self, encoder: Encoder, *, ahead: bool = True) -> None:
        self.encoder = encoder
        self.ahead = ahead
        self.seconds = 0.0  # spent encoding (not waiting for blocks)

    def _encoded(self, blocks: Iterable[list[Document]]) -> EncodedBlocks:
        for block in blocks:
            started = time.perf_counter()
            inputs = [doc.encoder_input() for doc in block]
            vectors = self.encoder.encode_documents(inputs) if inputs else []
            self.seconds += time.perf_counter() - started
            yield block, vectors

    def encode_blocks(self, blocks: Iterable[list[Document]]) -> EncodedBlocks:
        if not self.ahead:
            yield from self._encoded(blocks)
            return
        yield from one_ahead(self._encoded(blocks))


_DONE = object()


class _Stopped(Exception):
    """Raised in the producer's thread, before its next batch, once the consumer stopped."""


def one_ahead(items: Iterator[Any]) -> Generator[Any, None, None]:
    """`items`, produced by a thread one item ahead of the consumer. The producer's error is
    raised in the consumer. A consumer that stops (or fails, or is interrupted: SIGTERM) waits
    for the batch being made (an encoder's forward pass, through `models.inference.pacing`), and the
    item it belonged to is dropped: no thread is left running native code while the process
    winds down, and a block of one huge document no longer holds an interrupted build until
    it is encoded whole. The consumer's own hook (a write's deadline and fair share) runs
    before each of the producer's batches too."""
    ready: queue.Queue[Any] = queue.Queue(maxsize=1)
    stop = threading.Event()
    outer = current_hook()

    def stop_before_batch(rows: int) -> None:
        if stop.is_set():
            raise _Stopped
        if outer is not None:
            outer(rows)

    def produce() -> None:
        try:
            with paced(stop_before_batch):
                _produce()
        except _Stopped:
            return
        except BaseException as error:  # noqa: BLE001 - handed to the consumer as it is
            ready.put((_DONE, error))

    def _produce() -> None:
        for item in items:
            while not stop.is_set():
                try:
                    ready.put((item, None), timeout=0.1)
                    break
                except queue.Full:
                    continue
            if stop.is_set():
                return
        ready.put((_DONE, None))

    worker = threading.Thread(target=produce, name="docsim-encode", daemon=True)
    worker.start()
    try:
        while True:
            item, error = ready.get()
            if error is not None:
                raise error
            if item is _DONE:
                return
            yield item
    finally:
        stop.set()
        worker.join()


class RayEngine:
    """The encode stage on Ray Data: one encoder per actor, one block per batch."""

    def __init__(self, settings: Settings, encoder: Encoder, block_documents: int) -> None:
        identity = encoder.identity()
        self.source = str(identity.get("source") or identity["name"])
        self.settings = settings
        self.encoder = encoder
        self.block_documents = block_documents

    @property
    def load_options(self) -> dict[str, Any]:
        """The options the build's encoder was loaded with, so that actors encode alike; read
        when the blocks come, after the build has put the encoder on its backend."""
        return dict(
            getattr(self.encoder, "load_options", None)
            or {
                "precision": self.settings.encoder.precision,
                "batch_tokens": self.settings.encoder.batch_tokens,
                "max_batch_size": self.settings.encoder.max_batch_size,
            }
        )

    def encode_blocks(self, blocks: Iterable[list[Document]]) -> EncodedBlocks:
        blocks = list(blocks)
        if not any(blocks):  # nothing to encode (every document's vectors were reused)
            for block in blocks:
                yield block, []
            return
        address = self.settings.ray.address or ""
        if address.startswith("ray://"):
            raise EngineError(RAY_DATA_NEEDS_A_NODE.format(address=address))
        try:
            ray, started_here = connect_ray(self.settings, data=True)
        except RaySessionError as error:
            raise EngineError(str(error)) from error
        try:
            yield from self._run(ray, blocks)
        finally:
            if started_here:
                ray.shutdown()

    def _run(self, ray: Any, blocks: list[list[Document]]) -> EncodedBlocks:
        options = self.settings.ray
        gpus = int(ray.cluster_resources().get("GPU", 0))
        actors = options.actors or max(1, gpus)
        context = ray.data.DataContext.get_current()
        context.execution_options.preserve_order = True
        context.enable_progress_bars = False
        items = [
            {"position": i, "payload": pickle.dumps(doc.encoder_input())}
            for i, doc in enumerate(doc for block in blocks for doc in block)
        ]
        encoder_options = {
            "source": self.source,
            "device": "cuda" if gpus else "cpu",
            "options": self.load_options,
            "threads": max(1, int(options.cpus_per_actor)),
        }
        dataset = ray.data.from_items(items).map_batches(
            EncodeActor,
            fn_constructor_kwargs=encoder_options,
            batch_size=self.block_documents,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=actors),
            num_cpus=options.cpus_per_actor,
            num_gpus=1 if gpus else 0,
        )
        logger.info("Encoding %d documents on Ray with %d actor(s)", len(items), actors)
        rows = iter(dataset.iter_rows())
        expected = 0
        for block in blocks:
            vectors = []
            for _ in block:
                row = next(rows)
                if int(row["position"]) != expected:  # order is the contract
                    raise EngineError(f"Ray returned document {row['position']}, not {expected}")
                expected += 1
                vectors.append(pickle.loads(row["payload"]))
            yield block, vectors


class EncodeActor:
    """A Ray Data actor: one encoder, loaded once, encoding one batch of documents a call."""

    def __init__(self, source: str, device: str, options: dict[str, Any], threads: int) -> None:
        import torch

        from docsim.models.encoders.loading import load_encoder

        torch.set_num_threads(threads)
        self.encoder = load_encoder(source, device=torch.device(device), **options)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        inputs = [pickle.loads(payload) for payload in batch["payload"]]
        vectors = self.encoder.encode_documents(inputs)
        out = np.empty(len(vectors), dtype=object)
        out[:] = [pickle.dumps(_on_cpu(v)) for v in vectors]
        return {"position": batch["position"], "payload": out}


def _on_cpu(vectors: DocumentVectors) -> DocumentVectors:
    fields = {
        name: value.cpu() if hasattr(value, "cpu") else value
        for name, value in vars(vectors).items()
    }
    return type(vectors)(**fields)


def make_encode_engine(
    kind: str, settings: Settings, encoder: Encoder, block_documents: int
) -> EncodeEngine:
    if kind == "local":
        return LocalEngine(encoder)
    if kind == "ray":
        return RayEngine(settings, encoder, block_documents)
    raise EngineError(f"unknown engine {kind!r}: use one of {', '.join(ENGINES)}")
