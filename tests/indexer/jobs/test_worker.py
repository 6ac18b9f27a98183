"""Reindex jobs run by a real worker process: SIGKILL in the middle, recovery, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from sqlalchemy import Engine

from docsim.indexer.builder.pipeline import build_index
from docsim.indexer.jobs.queue import create_job, get_job, reap_stale, retry_job
from docsim.indexer.jobs.worker import Worker
from docsim.indexer.settings import JobSettings
from docsim.indexer.store.level_files import open_level_index
from docsim.indexer.store.tables import JobStatus
from docsim.indexer.store.units import count_units, level_ids
from docsim.indexer.store.versions import active_version, version_row
from docsim.indexer.text.chunking import add_chunks
from docsim.indexer.text.corpus import read_corpus
from docsim.indexer.text.sentences import SentenceSplitter
from docsim.indexer.text.split import split_document
from docsim.models.encoders.loading import load_encoder
from docsim.models.inference.backends import native_openvino_backend
from docsim.protocol.requests import SimilarOptions
from docsim.search.served.loaded_index import LoadedIndex
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings
from tests.utils.corpora import synthetic_markdown, write_text_corpus


@pytest.mark.heavy_sql
@pytest.mark.long
def test_a_killed_worker_fails_its_job_and_a_retry_resumes_it(
    tmp_path: Path,
    tiny_encoder_dir: Path,
    sample_corpus: Path,
    splitter: SentenceSplitter,
    engine: Engine,
    settings: QuerySettings,
) -> None:
    settings = settings.model_copy(
        update={
            "jobs": JobSettings(heartbeat_seconds=0.1, poll_seconds=0.05, stale_after_seconds=1)
        }
    )
    build_index(
        sample_corpus,
        settings=settings,
        engine=engine,
        encoder=load_encoder(tiny_encoder_dir),
        splitter=splitter,
        show_progress=False,
    )
    before = active_version(engine).version_id
    corpus = write_text_corpus(tmp_path / "corpus", synthetic_markdown(400, paragraphs=4))
    job = create_job(
        engine,
        "reindex",
        {"source": str(corpus), "encoder": str(tiny_encoder_dir), "block_documents": 2},
    )
    env = {
        **os.environ,
        "DOCSIM_JOBS__HEARTBEAT_SECONDS": "0.1",
        "DOCSIM_JOBS__POLL_SECONDS": "0.05",
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "docsim.indexer.cli.main",
            "worker",
            "--data-dir",
            str(settings.data_dir),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            seen = get_job(engine, job.job_id)
            if seen.status == "running" and seen.done > 0 and seen.total and seen.done < seen.total:
                break
            assert seen.status in ("queued", "running"), seen
            assert time.monotonic() < deadline, "the worker never got going"
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == -signal.SIGKILL

    # the old version still serves
    assert active_version(engine).version_id == before
    searcher = open_searcher(settings, engine)
    hits = searcher.similar(searcher.query_from_index("baking-01"), SimilarOptions(top_k=3))
    assert len(hits.results) == 3

    # the next worker notices the silence: the job fails, its build is kept to resume
    time.sleep(1.2)
    local = Worker(settings, engine, name="test-worker")
    assert local.run_once() is None  # nothing queued, but the dead worker's job was reaped
    failed = get_job(engine, job.job_id)
    assert failed.status == JobStatus.failed and "stopped sending heartbeats" in failed.error
    building = failed.version_id
    assert version_row(engine, building).status == "suspended"
    committed = version_row(engine, building).build_state["blocks_done"]
    assert committed >= 1
    indexes = settings.data_dir / "indexes"
    assert (indexes / f"{building:06d}.tmp" / "blocks").is_dir()

    # a retry resumes after the committed blocks, and leaves no temporary files
    retry_job(engine, job.job_id)
    assert local.run_once().job_id == job.job_id
    done = get_job(engine, job.job_id)
    assert done.status == JobStatus.succeeded and done.version_id == building and done.attempts == 2
    version = active_version(engine)
    assert version.version_id == building
    assert version.manifest["build"]["resumed_after_blocks"] == committed
    assert not list(indexes.glob("*.tmp"))
    # ...and the resumed version is whole: 400 documents, SQL and FAISS ids in agreement
    counts = count_units(engine, building)
    assert counts["document"] == 400 and version.manifest["counts"] == counts
    for level, info in version.manifest["levels"].items():
        index = open_level_index(Path(version.path), info)
        np.testing.assert_array_equal(index.ids(), level_ids(engine, building, level))
    loaded = LoadedIndex.load(engine, version)
    assert loaded.n_documents == 400
    # documents encoded before the kill and after the resume equal a direct encoding by the
    # version's own model (its OpenVINO export)
    backend = version.manifest["backend"]
    assert backend["name"] == native_openvino_backend()
    encoder = load_encoder(tiny_encoder_dir, backend_dir=Path(version.path) / backend["dir"])
    capacity = version.manifest["chunk_tokens"]
    sources = {d.doc_id: d for d in read_corpus(corpus)}
    for position in (0, 399):  # the first block, committed before the kill; the last one
        external = loaded.external_ids[position]
        doc = add_chunks([split_document(sources[external], splitter)], encoder, capacity)[0]
        direct = encoder.encode_documents([doc.encoder_input()])[0].document
        stored = loaded.vectors["document"][position]
        assert torch.allclose(stored, direct, atol=2e-3), external
    assert json.loads((Path(version.path) / "manifest.json").read_text())["counts"] == counts


def test_a_job_turns_succeeded_only_after_its_on_published_hook_returns(
    tiny_encoder_dir: Path, sample_corpus: Path, engine: Engine, settings: QuerySettings
) -> None:
    """The embedded worker's hook makes the service serve the version first; heartbeats go on
    while it loads, and a failing hook still records the publication."""
    settings = settings.model_copy(
        update={"jobs": JobSettings(heartbeat_seconds=0.05, stale_after_seconds=0.5)}
    )
    seen: list[tuple[int, str, int | None, list[int]]] = []

    def on_published(collection: str, version_id: int) -> None:
        assert collection == "default"
        time.sleep(1.0)  # a slow load, longer than stale_after_seconds
        job = get_job(engine, job_id)
        seen.append((version_id, job.status, job.published_version, reap_stale(engine, 0.5)))
        if len(seen) == 2:
            raise RuntimeError("the service could not load it")

    worker = Worker(settings, engine, name="embedded", on_published=on_published)
    for _ in range(2):
        job_id = create_job(
            engine, "reindex", {"source": str(sample_corpus), "encoder": str(tiny_encoder_dir)}
        ).job_id
        assert worker.run_once().job_id == job_id
        done = get_job(engine, job_id)
        assert done.status == JobStatus.succeeded and done.published_version == done.version_id
        assert seen[-1] == (
            done.version_id,
            JobStatus.running,
            None,
            [],
        )  # not reaped while loading
    assert "could not load" in done.message and done.error is None
    assert active_version(engine).version_id == done.version_id
