"""Offline sentence splitting with NLTK's Punkt.

`nltk.sent_tokenize` needs the `punkt_tab` download, which is not available offline. docsim
ships its own Punkt parameters instead (`indexer/data/punkt_params.json`): trained with NLTK's
unsupervised `PunktTrainer` on legal and general English text, plus a hand-written list of
abbreviations that court judgments and expository prose use. `docsim splitter train` retrains
them on any corpus.

A few rules are layered on top of Punkt, for what it gets wrong on legal and structured text
(measured on the hand-labelled set in `tests/indexer/data/sentence_gold.json`):
- a number, an ellipsis or a time/company abbreviation that ends with a period and is followed
  by a capitalised word ends a sentence (`... in 1995. The`, `... 11.30 a.m. Nobody`);
- a paragraph enumerator such as `12.` or `(iv)` is never a sentence of its own;
- a piece that starts with a lower-case letter or closing punctuation continues the previous
  sentence, and so does a number after a short abbreviation (`Rs. 450`, `See. 2(j)`).

Splitting is linear in the text, whatever the text: Punkt and the rules read it a segment of at
most `SEGMENT_CHARS` at a time (the last sentence of a segment is read again with what follows,
so that segments never decide a break), and a "sentence" longer than `MAX_SENTENCE_CHARS` (text
without sentence marks, OCR output, a run of punctuation) is cut into windows of about
`FALLBACK_SENTENCE_WORDS` words. No regular expression ever sees more than one segment, so the
wall-clock budget NLTK gives each of its matches is never near (`benchmarks/split_scaling.py`).
"""

from __future__ import annotations

import copyreg
import hashlib
import importlib
import importlib.machinery
import importlib.util
import json
import os
import re
import sys
import threading
import types
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Punkt loads with the first splitter or training run (see `punkt`)
    from nltk.tokenize.punkt import PunktParameters

DEFAULT_PARAMS = Path(__file__).parents[1] / "data" / "punkt_params.json"
# Bump when the rules layered on Punkt change: recorded in manifests with the parameters' hash.
RULES_VERSION = 3
# Punkt and the rules read at most this many characters at a time.
SEGMENT_CHARS = 8_000
# A longer "sentence" is cut into windows of about FALLBACK_SENTENCE_WORDS words (a word longer
# than MAX_SENTENCE_CHARS into pieces of that length). 5 of 74,622 AILA sentences are longer,
# and the encoder reads only their first 256 tokens (about 1,100 characters) anyway.
MAX_SENTENCE_CHARS = 1_500
FALLBACK_SENTENCE_WORDS = 40

# Abbreviations (lower case, without the final period) that Punkt should know even when the
# training text is too small to learn them.
EXTRA_ABBREVIATIONS: frozenset[str] = frozenset(
    """
    mr mrs ms dr prof rs ex retd sr jr st messrs hon sh smt shri ld
    no nos vs v art arts sec secs s ss cl cls ch chap para paras p pp vol vols fig figs ed eds
    r rr o ors anr ord cr crl spl addl asstt dist distt govt dept corp co inc ltd pvt bros
    e.g i.e viz cf approx est ca al ibid id op cit seq nr
    u.s u.k u.n a.m p.m a.d b.c
    jan feb mar apr jun jul aug sep sept oct nov dec
    a.i.r s.c.r s.c.c s.c w.p c.a s.l.p i.p.c cr.p.c crl.a cri.l.j
    """.split()
) | frozenset("abcdefghijklmnopqrstuvwxyz")

_ENUMERATOR = re.compile(r"^[\"“'‘]?\(?(?:\d{1,3}|[ivxlc]{1,6}|[a-zA-Z])[.)]\)?$")
# A period that ends a sentence although Punkt keeps going: after a number, an ellipsis or
# an abbreviation that usually closes a sentence, before a capitalised word.
# A match starts only where a run of number characters or of periods starts: a start inside
# the run would find no end the run's own start does not, and would make the search quadratic.
_MISSED_BREAK = re.compile(
    r"(?:(?<![\w.,/-])[\d][\d,./-]*\.|(?<!\.)\.{3,}|\b(?:a\.m|p\.m|etc|Ltd|Inc)\.)[\"”’']?"
    r"(?=\s+[\"“‘']?[A-Z][a-z]*\b(?!\.))"
)
_CLOSERS = "\"”’')]}"
_CONTINUATION = re.compile(r"^[a-z,;:)\]}]")
_SHORT_ABBREVIATION_END = re.compile(r"\b[A-Za-z]{1,4}\.$")
_INITIALISM_END = re.compile(r"(?:\b[A-Z]\.){2,}$")
_NUMBERED_REFERENCE = re.compile(r"(?:No|Nos|S|Ss|Sec|Art|Cl|Para|pp?)\.\s*\d")


_PUNKT_LOCK = threading.Lock()
_PUNKT: list[types.ModuleType] = []  # the module, once loaded


def punkt() -> types.ModuleType:
    """NLTK's `nltk.tokenize.punkt`, loaded without NLTK's package `__init__`s.

    `import nltk` (which importing any of its submodules runs first) imports most of NLTK,
    and with it scipy.stats, scikit-learn and pandas: about 2 s of CPU and 180 MB of memory in
    every process that splits text (servers, builds, job workers, split workers), for modules
    docsim never calls. Punkt itself needs eight small NLTK modules. Empty stand-ins for the
    `nltk` and `nltk.tokenize` packages (their real folders, none of their code) let it import
    those alone. Everything this loads is then taken out of `sys.modules` again, kept only by
    the module returned here, so that a later `import nltk` anywhere gets the whole package,
    loaded as usual (with its own copy of Punkt's classes; parameters pickle as JSON, so that
    either copy reads them). Where NLTK was imported before the first call, its own Punkt is
    returned, and the first call's module is kept for the process.

    For the tenth of a second the stand-ins are in place, an `import nltk` on another thread
    would get one: docsim imports NLTK nowhere else.
    """
    with _PUNKT_LOCK:
        if not _PUNKT:
            module = _load_punkt()
            if module is not sys.modules.get("nltk.tokenize.punkt"):  # our own copy
                copyreg.pickle(module.PunktParameters, _pickled_params)
            _PUNKT.append(module)
        return _PUNKT[0]


def _pickled_params(
    params: PunktParameters,
) -> tuple[Callable[[str], PunktParameters], tuple[str]]:
    """Punkt parameters pickled as their JSON: pickle finds a class by its module's name,
    which here names NLTK's own copy, not the one `punkt` loaded."""
    return params_from_json, (params_to_json(params),)


def _reset_after_fork() -> None:
    """A child forked while another thread held the lock gets a free one."""
    global _PUNKT_LOCK
    _PUNKT_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


def _load_punkt() -> types.ModuleType:
    if "nltk" in sys.modules:
        return importlib.import_module("nltk.tokenize.punkt")
    spec = importlib.util.find_spec("nltk")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        return importlib.import_module("nltk.tokenize.punkt")  # fails as NLTK's own
    roots = list(spec.submodule_search_locations)
    before = set(sys.modules)
    for name, folders in (("nltk", roots), ("nltk.tokenize", [f"{r}/tokenize" for r in roots])):
        stand_in = types.ModuleType(name)
        stand_in.__path__ = folders
        stand_in.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        stand_in.__spec__.submodule_search_locations = folders
        sys.modules[name] = stand_in
    try:
        return importlib.import_module("nltk.tokenize.punkt")
    finally:
        for name in set(sys.modules) - before:
            if name == "nltk" or name.startswith("nltk."):
                del sys.modules[name]


def train_params(
    texts: Iterable[str], extra_abbreviations: Iterable[str] = EXTRA_ABBREVIATIONS
) -> PunktParameters:
    """Train Punkt parameters on `texts` and add `extra_abbreviations`."""
    trainer = punkt().PunktTrainer()
    trainer.INCLUDE_ALL_COLLOCS = True
    for text in texts:
        trainer.train(text, finalize=False)
    trainer.finalize_training()
    params = trainer.get_params()
    params.abbrev_types.update(extra_abbreviations)
    return params


def params_to_json(params: PunktParameters) -> str:
    return json.dumps(
        {
            "abbrev_types": sorted(params.abbrev_types),
            "collocations": sorted([a, b] for a, b in params.collocations),
            "sent_starters": sorted(params.sent_starters),
            "ortho_context": dict(sorted(params.ortho_context.items())),
        },
        indent=0,
    )


def params_from_json(blob: str) -> PunktParameters:
    data = json.loads(blob)
    params = punkt().PunktParameters()
    params.abbrev_types = set(data["abbrev_types"])
    params.collocations = {(a, b) for a, b in data["collocations"]}
    params.sent_starters = set(data["sent_starters"])
    for word, flags in data["ortho_context"].items():
        params.ortho_context[word] = int(flags)
    return params


class SentenceSplitter:
    """Character spans of the sentences in a paragraph of text."""

    def __init__(self, params_json: str) -> None:
        self._params_json = params_json
        self._tokenizer = punkt().PunktSentenceTokenizer(params_from_json(params_json))
        self.sha256 = hashlib.sha256(params_json.encode()).hexdigest()

    def __reduce__(self) -> tuple[type[SentenceSplitter], tuple[str]]:
        """Pickled as its parameters (a split worker process builds its own)."""
        return SentenceSplitter, (self._params_json,)

    @classmethod
    def from_file(cls, path: Path) -> SentenceSplitter:
        return cls(path.read_text(encoding="utf-8"))

    def identity(self) -> dict[str, str]:
        return {"name": "punkt", "params_sha256": self.sha256, "rules_version": str(RULES_VERSION)}

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Sentence spans of `text`, without surrounding whitespace, in order, each at most
        `MAX_SENTENCE_CHARS` long. Linear in `len(text)`."""
        spans: list[tuple[int, int]] = []
        start, size = 0, len(text)
        while start < size:
            end = _segment_end(text, start)
            pieces = self._segment_spans(text, start, end)
            if end < size and len(pieces) > 1:
                # The last sentence may go on past the segment: it is read again, with what
                # follows it, as the start of the next one.
                start = pieces.pop()[0]
            else:
                start = end
            spans.extend(pieces)
        return [window for span in spans for window in _bounded(text, *span)]

    def _segment_spans(self, text: str, offset: int, end: int) -> list[tuple[int, int]]:
        """Punkt and the rules over `text[offset:end]`, as spans of `text`."""
        segment = text[offset:end]
        return [(offset + a, offset + b) for a, b in self._rule_spans(segment)]

    def _rule_spans(self, text: str) -> list[tuple[int, int]]:
        """Punkt's spans of `text` (one segment), with the rules of the module's docstring."""
        pieces = [
            piece
            for start, end in self._tokenizer.span_tokenize(text)
            for piece in _split_missed(text, *_strip(text, start, end))
        ]
        spans: list[tuple[int, int]] = []
        pending: tuple[int, int] | None = None  # an enumerator waiting for its sentence
        for start, end in pieces:
            if spans and start == spans[-1][1] and text[start] in _CLOSERS:
                # Punkt cut between `?` and its closing quote: the quote goes with the sentence
                # it closes, and so does what follows when it continues that sentence.
                closed = start
                while closed < end and text[closed] in _CLOSERS:
                    closed += 1
                spans[-1] = (spans[-1][0], closed)
                start = _strip(text, closed, end)[0]
                if start >= end:
                    continue
            if pending is not None:
                start, pending = pending[0], None
            elif spans and _continues(text, spans[-1], start):
                start = spans.pop()[0]
            if _ENUMERATOR.match(text[start:end]):
                pending = (start, end)
                continue
            spans.append((start, end))
        if pending is not None:  # a paragraph that is only an enumerator
            spans.append(pending)
        return spans


_WORD = re.compile(r"\S+")


def _segment_end(text: str, start: int) -> int:
    """Where the segment from `start` ends: at most `SEGMENT_CHARS` on, after the last
    whitespace of its second half (a hard cut where there is none)."""
    end = start + SEGMENT_CHARS
    if end >= len(text):
        return len(text)
    for space in range(end, start + SEGMENT_CHARS // 2, -1):
        if text[space - 1].isspace():
            return space
    return end


def _bounded(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """`(start, end)`, or windows of it of about `FALLBACK_SENTENCE_WORDS` words (balanced, so
    that no window is a short tail) when it is longer than `MAX_SENTENCE_CHARS`; a window still
    longer (one enormous word) is cut every `MAX_SENTENCE_CHARS` characters."""
    if end - start <= MAX_SENTENCE_CHARS:
        return [(start, end)]
    words = [(m.start(), m.end()) for m in _WORD.finditer(text, start, end)]
    n_windows = -(-len(words) // FALLBACK_SENTENCE_WORDS)
    windows: list[tuple[int, int]] = []
    for i in range(n_windows):
        first = words[i * len(words) // n_windows]
        last = words[(i + 1) * len(words) // n_windows - 1]
        windows.extend(
            (a, min(a + MAX_SENTENCE_CHARS, last[1]))
            for a in range(first[0], last[1], MAX_SENTENCE_CHARS)
        )
    return windows


def _split_missed(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Cut a Punkt sentence at the breaks `_MISSED_BREAK` finds."""
    pieces = []
    for match in _MISSED_BREAK.finditer(text, start, end):
        cut = match.end()
        if cut < end and not _ENUMERATOR.match(text[start:cut]):
            pieces.append((start, cut))
            start = _strip(text, cut, end)[0]
    if start < end:
        pieces.append((start, end))
    return pieces


def _continues(text: str, previous: tuple[int, int], start: int) -> bool:
    """Whether the piece at `start` continues the sentence `previous`."""
    if _CONTINUATION.match(text[start]):
        return True
    before = text[previous[0] : previous[1]]
    if text[start].isdigit():
        return bool(_SHORT_ABBREVIATION_END.search(before))
    # `the O.S.A. No. 225`: an initialism, then a numbered reference
    return bool(_NUMBERED_REFERENCE.match(text, start)) and bool(_INITIALISM_END.search(before))


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


@lru_cache(maxsize=4)
def load_splitter(path: Path | None = None) -> SentenceSplitter:
    """The splitter for a parameter file; the shipped parameters by default."""
    return SentenceSplitter.from_file(path or DEFAULT_PARAMS)
