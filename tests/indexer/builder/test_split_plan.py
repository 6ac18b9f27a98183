from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from docsim.indexer.builder.backend import CALIBRATION_SEED, calibration_texts
from docsim.indexer.builder.split_plan import PLAN_PREFIX, SplitPlan
from docsim.indexer.settings import Settings
from docsim.indexer.text.corpus import Skipped, read_corpus
from docsim.indexer.text.documents import SourceDocument
from docsim.indexer.text.sentences import SentenceSplitter
from docsim.indexer.text.split import split_document
from docsim.models.encoders.transformer import TransformerEncoder

pytestmark = pytest.mark.no_sql  # never opens a database (tests/conftest.py checks)


def sources(corpus: Path) -> list[SourceDocument | Skipped]:
    """The sample corpus, with a skipped input and an empty document among its documents."""
    items: list[SourceDocument | Skipped] = list(read_corpus(corpus))
    items.insert(1, Skipped("broken.pdf", "not a PDF"))
    items.insert(3, SourceDocument(doc_id="blank", title="Blank", text="   "))
    return items


@pytest.mark.parametrize("workers", [1, 2])  # 2: split in processes after the first block
def test_a_plan_on_disk_gives_back_the_documents_split_in_memory(
    sample_corpus: Path, splitter: SentenceSplitter, tmp_path: Path, workers: int
) -> None:
    items = sources(sample_corpus)
    expected = [  # the reference: every document split in memory
        split_document(s, splitter)
        for s in items
        if isinstance(s, SourceDocument) and s.doc_id != "blank"
    ]
    plan = SplitPlan.write(
        items,
        splitter,
        tmp_path,
        block_documents=2,
        show_progress=False,
        workers=workers,
        in_process_seconds=0,
    )

    assert len(plan) == len(expected) and plan.n_blocks == -(-len(expected) // 2)
    assert len(list(plan.folder.glob("*.pickle"))) == plan.n_blocks
    assert list(plan) == expected and list(plan.documents()) == expected
    assert [d for block in plan.blocks() for d in block] == expected
    assert all(len(block) <= 2 for block in plan.blocks())
    assert [d for block in plan.blocks(1) for d in block] == expected[2:]
    assert [plan[i] for i in range(len(plan))] == expected
    assert plan[-1] == expected[-1] and plan[1:4] == expected[1:4]
    with pytest.raises(IndexError):
        plan[len(plan)]
    assert plan.sentence_counts == [d.counts()["sentence"] for d in expected]
    assert plan.n_sentences == sum(plan.sentence_counts)
    assert plan.sentences_before(1) == sum(plan.sentence_counts[:2])
    assert [s.ref for s in plan.skipped] == ["broken.pdf", "blank"]
    assert plan.skipped[1].reason == "no sentences"

    plan.remove()
    assert not plan.folder.exists()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_source_that_fails_half_way_leaves_no_plan_behind(
    sample_corpus: Path, splitter: SentenceSplitter, tmp_path: Path, workers: int
) -> None:
    def failing() -> Iterator[SourceDocument]:
        yield from list(read_corpus(sample_corpus))[:30]
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        SplitPlan.write(
            failing(),
            splitter,
            tmp_path,
            block_documents=1,
            show_progress=False,
            workers=workers,
            in_process_seconds=0,
        )
    assert list(tmp_path.iterdir()) == []


def test_stale_plans_are_removed(
    sample_corpus: Path, splitter: SentenceSplitter, tmp_path: Path
) -> None:
    kept = tmp_path / "000001"
    kept.mkdir()
    for _ in range(2):
        SplitPlan.write(
            read_corpus(sample_corpus), splitter, tmp_path, block_documents=3, show_progress=False
        )
    assert len(list(tmp_path.glob(f"{PLAN_PREFIX}*"))) == 2
    SplitPlan.remove_stale(tmp_path)
    assert list(tmp_path.iterdir()) == [kept]


def test_calibration_from_a_plan_draws_what_a_sample_of_every_sentence_draws(
    sample_corpus: Path,
    settings: Settings,
    tiny_encoder: TransformerEncoder,
    splitter: SentenceSplitter,
    tmp_path: Path,
) -> None:
    """Calibration reads the plan by position instead of listing every sentence; the sample
    is the one a plain `random.sample` over the whole list draws (the reference)."""
    docs = [split_document(s, splitter) for s in read_corpus(sample_corpus)]
    settings.encoder.calibration_sentences, settings.encoder.calibration_chunks = 40, 6
    every_sentence = [doc.text[s.start : s.end] for doc in docs for s in doc.sentences()]
    reference = random.Random(CALIBRATION_SEED).sample(every_sentence, 40)

    plan = SplitPlan.write(
        read_corpus(sample_corpus), splitter, tmp_path, block_documents=2, show_progress=False
    )
    sentences, chunks = calibration_texts(plan, tiny_encoder, 60, settings)
    assert sentences == reference
    assert (sentences, chunks) == calibration_texts(docs, tiny_encoder, 60, settings)
