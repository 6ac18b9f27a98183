"""What the trainers read: documents as nested lists of text (no indexer types), checks that
a corpus can fill the requested batches, the positive pairs a document's structure gives, and
the held-out split of documents that early stopping evaluates on."""

from __future__ import annotations

import random
from dataclasses import dataclass

from docsim.models.errors import TrainingError


@dataclass(frozen=True)
class TrainingDocument:
    """A split document: sections -> paragraphs -> sentences, plus an optional class label."""

    doc_id: str
    sections: list[list[list[str]]]
    label: str | None = None
    section_titles: list[str] | None = None

    def paragraphs(self) -> list[list[str]]:
        return [p for section in self.sections for p in section]

    def sentences(self) -> list[str]:
        return [s for p in self.paragraphs() for s in p]

    def section_texts(self) -> list[str]:
        return [" ".join(s for p in section for s in p) for section in self.sections]

    def text(self) -> str:
        return " ".join(self.sentences())


def require(condition: bool, message: str) -> None:
    if not condition:
        raise TrainingError(message)


def require_documents(n_docs: int, batch_size: int, what: str) -> None:
    """The corpus must hold at least `batch_size` (and 2) usable documents."""
    require(n_docs >= 2, f"the corpus has {n_docs} usable documents for {what}; it needs 2")
    require(
        n_docs >= batch_size,
        f"the corpus has {n_docs} usable documents for {what}, fewer than the batch size "
        f"{batch_size}: use --batch-size {max(2, n_docs)} or less",
    )


PAIR_SOURCES = ("neighbours", "halves", "opening", "excerpt")
WINDOW_SENTENCES = 2  # a `neighbours` window: about a chunk's worth of one idea
# Query-shaped pairs (`opening`, `excerpt`): a short statement against the rest of its document.
# The bounds are pseudo-queries' (benchmarks/pseudo_queries.py), fixed before any measurement.
OPENING_MIN_WORDS = 8  # an opening starts at the first sentence this long (after headers)
QUERY_WORDS = 150  # a query-shaped side holds at most this many words ...
QUERY_SHARE = 1 / 3  # ... and at most this share of the document's sentences
PASSAGE_WORDS = 100  # `opening`: the rest is cut into passages of about this many words


def document_pairs(doc: TrainingDocument, source: str) -> list[tuple[str, str]]:
    """The positive pairs a document's own structure gives.

    - `neighbours`: two consecutive windows of `WINDOW_SENTENCES` sentences of a paragraph
      (single sentences in a paragraph too short for two such windows); a one-sentence
      paragraph pairs with the opening window of the next paragraph of its section.
    - `halves`: the two halves (by sentences) of each section with at least two sentences.
    - `opening` (query-shaped, for documents that state their facts first, as judgments do):
      the document's opening, from its first sentence of `OPENING_MIN_WORDS` words until
      `QUERY_WORDS` words or `QUERY_SHARE` of its sentences, against each passage of about
      `PASSAGE_WORDS` words of what follows it.
    - `excerpt` (query-shaped, for short documents such as abstracts, whose queries are one
      facet's sentences): from each sentence, the run of consecutive sentences that starts
      there (`QUERY_SHARE` of the document at most, and `QUERY_WORDS` words unless it is one
      sentence; shorter at the document's end), against the document without that run.

    Raises:
        ValueError: an unknown `source`.
    """
    if source not in PAIR_SOURCES:
        raise ValueError(f"Unknown pair source {source!r}. Valid pair sources are: {PAIR_SOURCES}.")
    if source in ("opening", "excerpt"):
        worded = [s for s in doc.sentences() if _words(s)]  # no blank side, no empty passage
        return _opening_pairs(worded) if source == "opening" else _excerpt_pairs(worded)
    pairs = []
    for section in doc.sections:
        if source == "halves":
            sentences = [s for p in section for s in p]
            half = (len(sentences) + 1) // 2
            if len(sentences) >= 2:
                pairs.append((" ".join(sentences[:half]), " ".join(sentences[half:])))
            continue
        windows = [_windows(p) for p in section if p]
        for i, paragraph in enumerate(windows):
            pairs.extend(zip(paragraph, paragraph[1:], strict=False))
            if len(paragraph) == 1 and i + 1 < len(windows):  # a one-sentence paragraph
                pairs.append((paragraph[0], windows[i + 1][0]))
    return pairs


def _words(sentence: str) -> int:
    return len(sentence.split())


def _query_length(sentences: list[str], start: int) -> int:
    """How many sentences from `start` a query-shaped side takes: at least one, then more
    while it stays within `QUERY_WORDS` words and `QUERY_SHARE` of the document."""
    most = max(1, int(QUERY_SHARE * len(sentences)))
    words = _words(sentences[start])
    n = 1
    while n < most and start + n < len(sentences):
        words += _words(sentences[start + n])
        if words > QUERY_WORDS:
            break
        n += 1
    return n


def _opening_pairs(sentences: list[str]) -> list[tuple[str, str]]:
    start = next((i for i, s in enumerate(sentences) if _words(s) >= OPENING_MIN_WORDS), None)
    if start is None:
        return []
    end = start + _query_length(sentences, start)
    opening = " ".join(sentences[start:end])
    passages: list[list[str]] = []
    words = PASSAGE_WORDS  # a full passage is "open": the next sentence starts a new one
    for sentence in sentences[end:]:
        if words >= PASSAGE_WORDS:
            passages.append([])
            words = 0
        passages[-1].append(sentence)
        words += _words(sentence)
    if len(passages) > 1 and words < PASSAGE_WORDS // 2:  # a short tail joins the passage before
        passages[-2].extend(passages.pop())
    return [(opening, " ".join(p)) for p in passages]


def _excerpt_pairs(sentences: list[str]) -> list[tuple[str, str]]:
    if len(sentences) < 2:
        return []
    pairs = []
    for start in range(len(sentences)):
        end = start + _query_length(sentences, start)  # never all of them: a third at most
        pairs.append(
            (" ".join(sentences[start:end]), " ".join(sentences[:start] + sentences[end:]))
        )
    return pairs


def _windows(paragraph: list[str]) -> list[str]:
    """Consecutive runs of a paragraph's sentences; two at least when it has two sentences."""
    size = max(1, min(WINDOW_SENTENCES, len(paragraph) // 2))
    return [" ".join(paragraph[i : i + size]) for i in range(0, len(paragraph), size)]


def held_out_split(
    docs: list[TrainingDocument], seed: int, fraction: float = 0.05, minimum: int = 4
) -> tuple[list[TrainingDocument], list[TrainingDocument]]:
    """Documents to train on and documents held out for early stopping (never trained on).

    `fraction` of the documents (at least `minimum`) are held out, drawn by `seed` over the
    sorted doc ids, so the split does not depend on the corpus's order. Both lists keep the
    corpus's order.

    Raises:
        TrainingError: too few documents to leave two to train on.
    """
    doc_ids = sorted({d.doc_id for d in docs})
    n_held = max(minimum, round(fraction * len(doc_ids)))
    require(
        len(doc_ids) >= n_held + 2,
        f"the corpus has {len(doc_ids)} usable documents: too few to hold {n_held} out for "
        "early stopping; use --eval-every 0 or a larger corpus",
    )
    held = set(random.Random(seed).sample(doc_ids, n_held))
    return [d for d in docs if d.doc_id not in held], [d for d in docs if d.doc_id in held]
