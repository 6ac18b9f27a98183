from __future__ import annotations

import json
from pathlib import Path

from docsim.indexer.text.sentences import (
    SentenceSplitter,
    params_from_json,
    params_to_json,
    train_params,
)

GOLD = Path(__file__).parents[1] / "data" / "sentence_gold.json"


def gold_spans(passage: dict) -> list[tuple[int, int]]:
    text, pos, spans = passage["text"], 0, []
    for sentence in passage["sentences"]:
        start = text.index(sentence, pos)
        spans.append((start, start + len(sentence)))
        pos = start + len(sentence)
    return spans


def test_gold_set_is_large_enough_and_consistent() -> None:
    passages = json.loads(GOLD.read_text())["passages"]
    assert sum(len(p["sentences"]) for p in passages) >= 100
    for passage in passages:
        spans = gold_spans(passage)
        text = passage["text"]
        gaps = [text[: spans[0][0]], text[spans[-1][1] :]] + [
            text[a[1] : b[0]] for a, b in zip(spans, spans[1:], strict=False)
        ]
        assert all(not gap.strip() for gap in gaps), passage["id"]


def test_splitter_scores_at_least_95_percent_exact_sentences(splitter: SentenceSplitter) -> None:
    passages = json.loads(GOLD.read_text())["passages"]
    total = exact = 0
    for passage in passages:
        predicted = set(splitter.spans(passage["text"]))
        for span in gold_spans(passage):
            total += 1
            exact += span in predicted
    assert exact / total >= 0.95, f"{exact}/{total} exact sentences"


def test_enumerator_stays_with_its_sentence(splitter: SentenceSplitter) -> None:
    text = "12.  The appeal is allowed. No costs."
    assert [text[a:b] for a, b in splitter.spans(text)] == [
        "12.  The appeal is allowed.",
        "No costs.",
    ]


def test_citations_and_abbreviations_do_not_end_sentences(splitter: SentenceSplitter) -> None:
    text = (
        "Reliance was placed on State of U.P. v. Ram Sagar, AIR 1973 SC 1461, and on Art. 21 "
        "of the Constitution. Mr. A. K. Sen paid Rs. 10,000 on 12.3.1995. The suit failed."
    )
    assert [text[a:b] for a, b in splitter.spans(text)] == [
        "Reliance was placed on State of U.P. v. Ram Sagar, AIR 1973 SC 1461, and on Art. 21 "
        "of the Constitution.",
        "Mr. A. K. Sen paid Rs. 10,000 on 12.3.1995.",
        "The suit failed.",
    ]


def test_spans_are_stripped_ordered_and_cover_all_words(splitter: SentenceSplitter) -> None:
    text = "  Zürich is cold — “very cold.”  It snows?\n\nYes! Café opens at 7.30 a.m. Done.  "
    spans = splitter.spans(text)
    assert spans == sorted(spans)
    for start, end in spans:
        assert text[start:end] == text[start:end].strip()
    covered = "".join(text[a:b] for a, b in spans)
    assert covered.replace(" ", "") == "".join(text.split())


def test_params_round_trip_through_json() -> None:
    params = train_params(["Dr. Smith went to Washington. He arrived at 5 p.m. on Monday."] * 5)
    blob = params_to_json(params)
    again = params_from_json(blob)
    assert again.abbrev_types == params.abbrev_types
    assert again.collocations == params.collocations
    assert dict(again.ortho_context) == dict(params.ortho_context)
    assert SentenceSplitter(blob).sha256 == SentenceSplitter(params_to_json(again)).sha256
