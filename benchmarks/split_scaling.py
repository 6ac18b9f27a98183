"""Splitting time against input size for pathological texts, up to the posted-document limit.

    python benchmarks/split_scaling.py [--sizes 125000 250000 500000 1000000 2000000]
        [--out benchmarks/results/split_scaling.json]

Each kind of text is generated at each size and split whole (`split_document`, what a build and
a posted document run). Reported per kind and size: seconds, microseconds per character, the
sentences and paragraphs found and the longest sentence; per kind, the slowest single segment
Punkt reads (`SEGMENT_CHARS` characters: what NLTK's 5-second budget per match applies to) and
the growth exponent of time against size (1.0 is linear), fitted over the sizes.
"""

from __future__ import annotations

import argparse
import logging
import math
import random
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from record import save

from docsim.indexer.text.readers.text import text_document
from docsim.indexer.text.sentences import SEGMENT_CHARS, load_splitter
from docsim.indexer.text.split import split_document

logger = logging.getLogger("split_scaling")

_WORDS = (
    "the court held that appeal was dismissed petitioner respondent section act evidence "
    "witness trial judgment order high accused prosecution learned counsel facts case"
).split()


def _words(size: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words: list[str] = []
    total = 0
    while total < size:
        words.append(rng.choice(_WORDS))
        total += len(words[-1]) + 1
    return words


def ordinary_one_line(size: int) -> str:
    """Ordinary sentences of 8 to 30 words, with no line break at all."""
    rng = random.Random(1)
    words, out, pos = _words(size, 1), [], 0
    while pos < len(words):
        n = rng.randint(8, 30)
        sentence = " ".join(words[pos : pos + n])
        out.append(sentence[:1].upper() + sentence[1:] + ".")
        pos += n
    return " ".join(out)[:size]


KINDS: dict[str, Callable[[int], str]] = {
    "abbreviation periods (x. x. x.)": lambda n: ("x. " * (n // 3 + 1))[:n],
    "a run of periods": lambda n: "a" + "." * (n - 1),
    "no punctuation, no line breaks": lambda n: " ".join(_words(n, 2))[:n],
    "one word without spaces": lambda n: "a" * n,
    "heading marks (# a # a)": lambda n: ("Title\n" + "# a " * (n // 4 + 1))[:n],
    "numbers with commas (1,1,1)": lambda n: ("1," * (n // 2 + 1))[:n],
    "enumerators (1. 2. 3.)": lambda n: " ".join(f"{i % 100}." for i in range(n))[:n],
    "ordinary sentences, one line": ordinary_one_line,
}


def split_once(text: str) -> dict[str, float]:
    splitter = load_splitter()
    start = time.perf_counter()
    document = split_document(text_document("doc", text), splitter)
    seconds = time.perf_counter() - start
    counts = document.counts()
    return {
        "chars": len(text),
        "seconds": round(seconds, 4),
        "us_per_char": round(1e6 * seconds / len(text), 3),
        "sentences": counts["sentence"],
        "paragraphs": counts["paragraph"],
        "longest_sentence": max(s.end - s.start for s in document.sentences()),
    }


def slowest_segment(kind: Callable[[int], str]) -> float:
    """Seconds Punkt and the rules take over one segment of this kind (the worst of three)."""
    splitter = load_splitter()
    text = kind(SEGMENT_CHARS)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        splitter.spans(text)
        times.append(time.perf_counter() - start)
    return max(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[125_000, 250_000, 500_000, 1_000_000, 2_000_000]
    )
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/split_scaling.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    load_splitter().spans("Warm up. Punkt loads here.")
    report: dict[str, dict[str, object]] = {}
    header = ("input", "chars", "seconds", "us/char", "sentences", "longest")
    print("{:34} {:>9} {:>8} {:>8} {:>9} {:>7}".format(*header))
    for name, kind in KINDS.items():
        rows = [split_once(kind(size)) for size in args.sizes]
        for row in rows:
            print(
                f"{name:34} {row['chars']:>9,} {row['seconds']:>8.2f} {row['us_per_char']:>8.2f} "
                f"{row['sentences']:>9,} {row['longest_sentence']:>7,}"
            )
        sizes = np.log([r["chars"] for r in rows])
        times = np.log([max(r["seconds"], 1e-6) for r in rows])
        exponent = float(np.polyfit(sizes, times, 1)[0]) if len(rows) > 1 else math.nan
        segment = slowest_segment(kind)
        print(f"{'':34} growth exponent {exponent:.2f}; one segment {1000 * segment:.1f} ms")
        report[name] = {
            "rows": rows,
            "growth_exponent": round(exponent, 3),
            "slowest_segment_seconds": round(segment, 4),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, {"segment_chars": SEGMENT_CHARS, "kinds": report})
    logger.info("wrote %s", args.out)


if __name__ == "__main__":
    main()
