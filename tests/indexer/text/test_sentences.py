from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from docsim.indexer.text.sentences import (
    DEFAULT_PARAMS,
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


_SPLIT = """
import json, pickle, sys
from docsim.indexer.text.sentences import load_splitter, params_to_json, train_params
text = open(sys.argv[1]).read()
spans = load_splitter().spans(text)
params = train_params([text])
again = pickle.loads(pickle.dumps(params))  # as it would cross to a worker process
assert params_to_json(again) == params_to_json(params)
heavy = sorted(m for m in ("nltk", "scipy.stats", "sklearn", "pandas") if m in sys.modules)
if sys.argv[2] == "then-nltk":  # the whole package, imported after the splitter
    import nltk
    from nltk.tokenize.punkt import PunktSentenceTokenizer
    assert callable(nltk.word_tokenize) and nltk.tokenize.punkt.PunktSentenceTokenizer
    assert nltk.tokenize.PunktSentenceTokenizer is PunktSentenceTokenizer  # whole and coherent
    assert load_splitter().spans(text) == spans  # the splitter made before is unchanged
print(json.dumps({"spans": spans, "heavy": heavy}))
"""


@pytest.mark.parametrize("after", ["alone", "then-nltk"])
def test_punkt_loads_without_the_rest_of_nltk(tmp_path: Path, after: str) -> None:
    """A process that splits text imports Punkt's few NLTK modules, never NLTK's package
    (scipy.stats, scikit-learn and pandas with it), and splits exactly as NLTK's own Punkt,
    imported the usual way, with the same parameters; NLTK imported afterwards is whole."""
    text = "\n\n".join(p["text"] for p in json.loads(GOLD.read_text())["passages"])
    source = tmp_path / "text.txt"
    source.write_text(text)
    done = subprocess.run(
        [sys.executable, "-c", _SPLIT, str(source), after],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    light = json.loads(done.stdout)
    assert light["heavy"] == []
    # the reference: NLTK's Punkt imported the usual way, its parameters set by hand
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    data = json.loads(DEFAULT_PARAMS.read_text())
    params = PunktParameters()
    params.abbrev_types = set(data["abbrev_types"])
    params.collocations = {(a, b) for a, b in data["collocations"]}
    params.sent_starters = set(data["sent_starters"])
    for word, flags in data["ortho_context"].items():
        params.ortho_context[word] = int(flags)
    reference = SentenceSplitter.from_file(DEFAULT_PARAMS)
    reference._tokenizer = PunktSentenceTokenizer(params)
    assert [list(s) for s in reference.spans(text)] == light["spans"]


# --- bounded splitting -------------------------------------------------------------------
def _long_ordinary_text() -> str:
    """The gold passages, one after another on one line: about 60,000 characters of legal and
    expository sentences, several segments long."""
    passages = json.loads(GOLD.read_text())["passages"]
    text = " ".join(p["text"].replace("\n", " ") for p in passages)
    while len(text) < 60_000:
        text = f"{text} {text}"
    return text


def test_segments_change_no_break_of_ordinary_text(
    splitter: SentenceSplitter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from docsim.indexer.text import sentences

    text = _long_ordinary_text()
    whole = splitter._rule_spans(text)  # the reference: Punkt and the rules over all of it
    read: list[int] = []
    original = splitter._tokenizer.span_tokenize
    monkeypatch.setattr(
        splitter._tokenizer, "span_tokenize", lambda t: read.append(len(t)) or original(t)
    )

    spans = splitter.spans(text)

    assert len(read) > 5 and max(read) <= sentences.SEGMENT_CHARS
    assert spans == [s for s in whole if s[1] - s[0] <= sentences.MAX_SENTENCE_CHARS]


@pytest.mark.parametrize(
    "text",
    [
        " ".join(f"word{i}" for i in range(3_000)),  # no sentence marks at all
        "x" * 20_000,  # one enormous word
        "It began. " + "and then " * 2_000 + "it ended.",
        "a" + "." * 30_000,
        "Rs. " + "1," * 10_000 + "5. Then",
    ],
    ids=["no-marks", "one-word", "endless-sentence", "periods", "number-run"],
)
def test_every_sentence_is_bounded_and_every_word_kept(
    splitter: SentenceSplitter, text: str
) -> None:
    from docsim.indexer.text import sentences

    spans = splitter.spans(text)

    assert all(0 < end - start <= sentences.MAX_SENTENCE_CHARS for start, end in spans)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))
    covered = "".join(text[a:b] for a, b in spans)
    assert covered.replace(" ", "") == text.replace(" ", "")


def test_text_without_marks_splits_into_sentence_sized_windows(splitter: SentenceSplitter) -> None:
    from docsim.indexer.text import sentences

    words = [f"w{i}" for i in range(1_000)]
    spans = splitter.spans(" ".join(words))

    counts = [len(" ".join(words)[a:b].split()) for a, b in spans]
    assert sum(counts) == 1_000
    assert max(counts) <= sentences.FALLBACK_SENTENCE_WORDS
    assert min(counts) >= sentences.FALLBACK_SENTENCE_WORDS // 2


def test_a_long_run_of_abbreviations_fits_nltks_time_budget(
    splitter: SentenceSplitter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """300 KB of `x. ` once went to Punkt whole, which ran out of NLTK's per-match time budget
    (5 s; 0.5 s here, as on a machine ten times busier) and failed the document."""
    from docsim.indexer.text.sentences import punkt

    monkeypatch.setattr(punkt().redos, "DEFAULT_TIMEOUT", 0.5)
    spans = splitter.spans("x. " * 100_000)

    assert spans and spans[-1][1] == 300_000 - 1
