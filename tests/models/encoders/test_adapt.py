"""The adapt recipe's pieces: pairs from a document's structure, the held-out split, the
sampler's batches, the loss against a plain reference, and the held-out metric by hand."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from docsim.models.encoders.adapt import AdaptConfig, AdaptModel, PairBatch, PairSampler
from docsim.models.encoders.backbone import load_tokenizer
from docsim.models.inference.tokens import TextTokenizer, TokenBatch
from docsim.models.training.data import TrainingDocument, document_pairs, held_out_split
from docsim.models.training.held_out import (
    HeldOutPairs,
    held_out_pair_documents,
    held_out_pairs,
    partner_ranks,
)
from tests.utils.corpora import training_documents


def test_pairs_from_a_documents_structure() -> None:
    doc = TrainingDocument(
        doc_id="a",
        sections=[[["1.", "2.", "3.", "4.", "5."], ["6."], ["7.", "8."]], [["9."]]],
    )
    # windows of two sentences (1 2 | 3 4 | 5), of one in a short paragraph (7 | 8); a
    # one-sentence paragraph meets the next one; the lone sentence of section 2 has no pair
    assert document_pairs(doc, "neighbours") == [
        ("1. 2.", "3. 4."),
        ("3. 4.", "5."),
        ("6.", "7."),
        ("7.", "8."),
    ]
    assert document_pairs(doc, "halves") == [("1. 2. 3. 4.", "5. 6. 7. 8.")]
    with pytest.raises(ValueError, match="Valid pair sources are"):
        document_pairs(doc, "sections")


def words(n: int, tag: str) -> str:
    """A sentence of `n` words, recognisable by `tag`."""
    return " ".join(f"{tag}{i}" for i in range(n)) + "."


def test_opening_pairs_are_the_facts_against_passages_of_the_rest() -> None:
    header, short = words(3, "h"), words(5, "s")
    facts = [words(40, f"f{i}") for i in range(5)]  # 200 words: the opening stops at 150
    rest = [words(30, f"r{i}") for i in range(10)]
    doc = TrainingDocument(doc_id="j", sections=[[[header, short], facts[:2]], [facts[2:] + rest]])
    # the opening starts at the first sentence of 8 words and holds 3 x 40 words (a fourth
    # would pass 150). What follows is cut once a passage reaches 100 words (40 + 40 + 30, then
    # 4 x 30 twice), and the short tail of 30 words joins the passage before.
    opening = " ".join(facts[:3])
    tail = facts[3:] + rest
    assert document_pairs(doc, "opening") == [
        (opening, " ".join(tail[0:3])),
        (opening, " ".join(tail[3:7])),
        (opening, " ".join(tail[7:12])),
    ]
    # at most a third of the sentences: 9 sentences give an opening of 3 even when short
    small = TrainingDocument(doc_id="k", sections=[[[words(8, f"x{i}") for i in range(9)]]])
    pairs = document_pairs(small, "opening")
    assert [a for a, _ in pairs] == [" ".join(words(8, f"x{i}") for i in range(3))]
    assert [b for _, b in pairs] == [" ".join(words(8, f"x{i}") for i in range(3, 9))]
    # no sentence long enough to open with, or nothing after the opening: no pairs
    assert document_pairs(TrainingDocument("h", [[[header, short]]]), "opening") == []
    assert document_pairs(TrainingDocument("o", [[[facts[0]]]]), "opening") == []


def test_excerpt_pairs_are_every_run_against_the_rest_of_the_document() -> None:
    sentences = [words(10, f"a{i}") for i in range(7)]  # runs of 7 // 3 = 2 sentences
    doc = TrainingDocument(doc_id="abs", sections=[[sentences[:4], sentences[4:]]])
    pairs = document_pairs(doc, "excerpt")

    def reference(start: int) -> tuple[str, str]:
        end = min(start + 2, 7)
        return " ".join(sentences[start:end]), " ".join(sentences[:start] + sentences[end:])

    assert pairs == [reference(start) for start in range(7)]
    blank = TrainingDocument(doc_id="b", sections=[[sentences[:4] + [" "], sentences[4:]]])
    assert document_pairs(blank, "excerpt") == pairs  # a sentence without words takes no part
    assert document_pairs(blank, "opening") == document_pairs(doc, "opening")
    long = [words(100, f"b{i}") for i in range(9)]  # 150 words bound a run before a third
    long_pairs = document_pairs(TrainingDocument("l", [[long]]), "excerpt")
    assert [a for a, _ in long_pairs] == long
    assert document_pairs(TrainingDocument("one", [[[words(9, "c")]]]), "excerpt") == []
    two = [words(9, "c"), words(9, "d")]
    assert document_pairs(TrainingDocument("two", [[two]]), "excerpt") == [
        (two[0], two[1]),
        (two[1], two[0]),
    ]


def test_the_held_out_split_is_disjoint_by_document_and_seeded() -> None:
    docs = training_documents(100)
    train, held = held_out_split(docs, seed=3)
    assert len(held) == 5 and len(train) == 95
    assert not {d.doc_id for d in train} & {d.doc_id for d in held}
    again = held_out_split(list(reversed(docs)), seed=3)[1]  # the corpus's order does not matter
    assert {d.doc_id for d in again} == {d.doc_id for d in held}
    assert {d.doc_id for d in held_out_split(docs, seed=4)[1]} != {d.doc_id for d in held}
    assert len(held_out_split(training_documents(20), seed=0)[1]) == 4  # at least a few documents


def test_batches_never_repeat_a_document_nor_draw_held_out_ones(tiny_encoder_dir: Path) -> None:
    docs = training_documents(30)
    train, held = held_out_split(docs, seed=0)
    held_ids = {d.doc_id for d in held}
    tokens = TextTokenizer(load_tokenizer(tiny_encoder_dir), 32)
    sampler = PairSampler(train, batch_size=8, source="neighbours", tokens=tokens)
    for step in range(200):
        batch = sampler.draw(random.Random(step))
        assert len(set(batch.doc_ids)) == len(batch.doc_ids) == 8
        assert not set(batch.doc_ids) & held_ids
        for doc_id, first in zip(batch.doc_ids, batch.first, strict=True):
            assert first.startswith(f"d{int(doc_id[-2:])} ")  # each pair is its document's


def test_held_out_pairs_are_capped_and_spread_over_documents() -> None:
    pairs = held_out_pairs(training_documents(3), "neighbours", max_pairs=5)
    # each document's first pair, then each one's second: no document fills the set
    assert [p[0].split()[0] for p in pairs] == ["d0", "d1", "d2", "d0", "d1"]
    again, documents = held_out_pair_documents(training_documents(3), "neighbours", max_pairs=5)
    assert again == pairs and documents == [0, 1, 2, 0, 1]


def test_partner_ranks_leave_out_the_pairs_own_documents_other_pairs() -> None:
    generator = torch.Generator().manual_seed(0)
    first, second = torch.randn(12, 4, generator=generator), torch.randn(12, 4, generator=generator)
    documents = torch.tensor([0, 0, 0, 1, 1, 2, 3, 3, 3, 3, 4, 5])

    def cos(u: torch.Tensor, v: torch.Tensor) -> float:
        return float(u @ v) / (float(u.norm()) * float(v.norm()))

    expected = [
        1
        + sum(
            cos(first[i], second[j]) > cos(first[i], second[i])
            for j in range(12)
            if documents[j] != documents[i]
        )
        for i in range(12)
    ]
    assert partner_ranks(first, second, documents).tolist() == expected
    plain = partner_ranks(first, second)  # every other row counts
    assert (plain >= partner_ranks(first, second, documents)).all() and not torch.equal(
        plain, partner_ranks(first, second, documents)
    )
    # one pair a document: nothing is left out
    assert torch.equal(partner_ranks(first, second, torch.arange(12)), plain)


def reference_symmetric_infonce(first: torch.Tensor, second: torch.Tensor, tau: float) -> float:
    """-log softmax of each row's partner by cosine / tau, both directions, by plain loops."""

    def cos(u: torch.Tensor, v: torch.Tensor) -> float:
        return float(u @ v) / (float(u.norm()) * float(v.norm()))

    n, total = len(first), 0.0
    for a, b in ((first, second), (second, first)):
        for i in range(n):
            logits = [cos(a[i], b[j]) / tau for j in range(n)]
            total += -(logits[i] - math.log(sum(math.exp(x) for x in logits)))
    return total / (2 * n)


def test_the_loss_equals_a_plain_symmetric_infonce(tiny_encoder_dir: Path) -> None:
    torch.manual_seed(0)
    model = AdaptModel.from_base(tiny_encoder_dir, AdaptConfig(temperature=0.05)).eval()
    tokens = TextTokenizer(load_tokenizer(tiny_encoder_dir), 32)
    first_texts = ["The bread rose.", "Stars are far away.", "The court held the appeal."]
    second_texts = ["An oven was hot.", "A comet passed by tonight.", "The judges agreed."]
    with torch.no_grad():
        terms = model.loss(PairBatch(tokens(first_texts + second_texts)))
        first, second = model.embed(tokens(first_texts)), model.embed(tokens(second_texts))
    assert set(terms) == {"infonce"}  # no MLM term
    expected = reference_symmetric_infonce(first, second, 0.05)
    assert terms["infonce"].item() == pytest.approx(expected, rel=1e-4)


def test_the_held_out_metric_by_hand() -> None:
    first = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    second = torch.tensor([[2.0, 0.2], [-1.0, 0.0], [1.0, 1.0]])
    # row 0 finds its partner first (cos 0.995); row 1's partner (cos 0) trails both others
    # (0.0995, 0.707); row 2's partner (cos 1) is first
    assert partner_ranks(first, second).tolist() == [1, 3, 1]

    def tokens(texts: list[str]) -> TokenBatch:  # the text "3" is the one token 3
        ids = torch.tensor([[int(t)] for t in texts])
        return TokenBatch(ids, torch.ones_like(ids))

    class Fixed(torch.nn.Module):  # embeds the tokens 0, 1, ... as rows of a table
        def embed(self, batch: TokenBatch) -> torch.Tensor:
            return torch.cat([first, second])[batch.input_ids[:, 0]]

    pairs = [("0", "3"), ("1", "4"), ("2", "5")]
    got = HeldOutPairs(pairs, tokens, temperature=0.5, batch_size=2)(Fixed())
    ranks = torch.cat([partner_ranks(first, second), partner_ranks(second, first)]).float()
    assert got.score == pytest.approx(float((1 / ranks).mean()))
    assert got.metrics["accuracy"] == pytest.approx(float((ranks == 1).float().mean()))
    a, b = F.normalize(first, dim=-1), F.normalize(second, dim=-1)
    assert got.metrics["loss"] == pytest.approx(reference_symmetric_infonce(a, b, 0.5), rel=1e-5)
    # pairs 0 and 1 of one document: row 1's partner no longer trails row 0's
    grouped = HeldOutPairs(pairs, tokens, temperature=0.5, batch_size=2, documents=[7, 7, 8])
    documents = torch.tensor([7, 7, 8])
    ranks = torch.cat(
        [partner_ranks(first, second, documents), partner_ranks(second, first, documents)]
    ).float()
    assert partner_ranks(first, second, documents).tolist() == [1, 2, 1]
    assert grouped(Fixed()).score == pytest.approx(float((1 / ranks).mean()))
    assert grouped(Fixed()).score > got.score
