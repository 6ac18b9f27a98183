"""What text without punctuation costs to index, per token, against the same judgments with
their marks: IL-PCR's corpus has none, and its 3.6 M words once took 30 minutes to index
beside other work, against 13 for AILA's 10 M.

    python benchmarks/unpunctuated_cost.py --casedocs AILA/casedocs [--documents 150]
        [--out benchmarks/results/unpunctuated_cost.json]

The first `--documents` judgments (sorted by name) are written twice: as they are, and
stripped as `unpunctuated.py` strips them (letters, digits and single spaces). For each
form: the split alone (`split_document`, every document, timed), then a default build of a
fresh data directory (`build_index`, the default encoder, int8 OpenVINO where the machine
has VNNI/AMX), timed as a whole and by its encode stage; the sentences, chunks and encoder
tokens it produced (the tokenizer over each text, so that both forms count the same words'
tokens). Costs are seconds per 1,000 tokens; the ratios are stripped over punctuated,
measured in the same run, alone on the machine.

Then, by level and per 1,000 words (a stripped text has fewer tokens for the same words, its
marks being tokens), the built version's encoder over the sentences and paragraphs of the
first `--level-documents` judgments: punctuated, and stripped with fallback windows of
`--windows` words (`FALLBACK_SENTENCE_WORDS`), each timed as the best of two passes.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
import time
from pathlib import Path

from record import save
from unpunctuated import stripped

from docsim.indexer.builder.pipeline import build_index
from docsim.indexer.settings import load_configured_encoder
from docsim.indexer.store.db import make_engine, upgrade
from docsim.indexer.text import sentences as sentences_module
from docsim.indexer.text.corpus import read_corpus
from docsim.indexer.text.documents import SourceDocument
from docsim.indexer.text.sentences import load_splitter
from docsim.indexer.text.split import split_document
from docsim.models.encoders.encoder import Encoder
from docsim.search.settings import QuerySettings

logger = logging.getLogger("benchmarks.unpunctuated_cost")


def measured(corpus: Path, work: Path, encoders: dict[str, Encoder]) -> dict:
    """The split's and a default build's cost over the judgments of `corpus`."""
    splitter = load_splitter()
    sources = [s for s in read_corpus(corpus) if hasattr(s, "text")]
    started = time.perf_counter()
    documents = [split_document(s, splitter) for s in sources]  # type: ignore[arg-type]
    split_seconds = time.perf_counter() - started
    settings = QuerySettings(data_dir=work / "data")
    upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    encoder = load_configured_encoder(settings)
    tokenizer = getattr(encoder, "tokenizer", None)
    tokens = sum(len(tokenizer(s.text)["input_ids"]) for s in sources) if tokenizer else None
    started = time.perf_counter()
    result = build_index(corpus, settings=settings, engine=engine, encoder=encoder,
                         splitter=splitter, show_progress=False)  # fmt: skip
    build_seconds = time.perf_counter() - started
    engine.dispose()
    manifest = json.loads((Path(result.path) / "manifest.json").read_text())
    encode_seconds = float(manifest["build"]["encode_seconds"])
    export_seconds = float(manifest["backend"].get("calibration", {}).get("seconds", 0.0))
    build_seconds -= export_seconds  # the int8 export, once per data directory, left out
    version_encoder = Path(result.path) / "encoder"
    encoders[backend_name(manifest)] = load_configured_encoder(
        settings, backend_dir=version_encoder if version_encoder.is_dir() else None
    )
    per_k = 1000 / tokens if tokens else float("nan")
    words = sum(len(s.text.split()) for s in sources)  # type: ignore[attr-defined]
    return {
        "documents": len(sources),
        "words": words,
        "tokens": tokens,
        "sentences": sum(d.counts()["sentence"] for d in documents),
        "counts": manifest["counts"],
        "split_seconds": round(split_seconds, 2),
        "build_seconds": round(build_seconds, 1),  # without the encoder's export
        "export_seconds": round(export_seconds, 1),
        "encode_seconds": round(encode_seconds, 1),
        "backend": manifest["backend"]["name"],
        "split_ms_per_1k_tokens": round(split_seconds * 1000 * per_k, 3),
        "build_s_per_1k_tokens": round(build_seconds * per_k, 4),
        "encode_s_per_1k_tokens": round(encode_seconds * per_k, 4),
        "encode_s_per_1k_words": round(encode_seconds * 1000 / words, 4),
    }


def backend_name(manifest: dict) -> str:
    return str(manifest["backend"]["name"])


def level_texts(texts: list[str], window: int) -> dict[str, list[str]]:
    """Every sentence and paragraph of `texts`, split with fallback windows of `window` words."""
    splitter = load_splitter()
    default = sentences_module.FALLBACK_SENTENCE_WORDS
    sentences_module.FALLBACK_SENTENCE_WORDS = window
    try:
        levels: dict[str, list[str]] = {"sentence": [], "paragraph": []}
        for i, text in enumerate(texts):
            source = SourceDocument(doc_id=str(i), title="", text=text)
            for section in split_document(source, splitter).sections:
                for paragraph in section.paragraphs:
                    levels["paragraph"].append(text[paragraph.start : paragraph.end])
                    levels["sentence"].extend(text[s.start : s.end] for s in paragraph.sentences)
        return levels
    finally:
        sentences_module.FALLBACK_SENTENCE_WORDS = default


def level_costs(texts: list[str], window: int, encoder: Encoder) -> dict[str, dict]:
    """Encoding cost by level, in ms per 1,000 words (best of two passes)."""
    costs = {}
    for level, units in level_texts(texts, window).items():
        passes = []
        for _ in range(2):
            started = time.perf_counter()
            encoder.encode(units)
            passes.append(time.perf_counter() - started)
        words = sum(len(u.split()) for u in units)
        costs[level] = {
            "units": len(units),
            "words_per_unit": round(words / len(units), 1),
            "ms_per_1k_words": round(min(passes) * 1e6 / words, 1),
        }
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--casedocs", type=Path, required=True)
    parser.add_argument("--documents", type=int, default=150)
    parser.add_argument("--level-documents", type=int, default=30)
    parser.add_argument("--windows", type=int, nargs="+", default=[40, 25, 20])
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/unpunctuated_cost.json")
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    work = Path(tempfile.mkdtemp(prefix="unpunctuated-cost-"))
    try:
        forms, encoders = {}, {}
        for form in ("punctuated", "stripped"):
            corpus = work / form / "casedocs"
            corpus.mkdir(parents=True)
            for path in sorted(args.casedocs.glob("*.txt"))[: args.documents]:
                text = path.read_text(encoding="utf-8", errors="replace")
                (corpus / path.name).write_text(stripped(text) if form == "stripped" else text)
            forms[form] = measured(corpus, work / form, encoders)
            logger.info("%s: %s", form, forms[form])
        ratios = {
            key: round(forms["stripped"][key] / forms["punctuated"][key], 3)
            for key in (
                "split_ms_per_1k_tokens",
                "build_s_per_1k_tokens",
                "encode_s_per_1k_tokens",
                "encode_s_per_1k_words",
            )
        }
        originals = [
            p.read_text(encoding="utf-8", errors="replace")
            for p in sorted(args.casedocs.glob("*.txt"))[: args.level_documents]
        ]
        encoder = next(iter(encoders.values()))
        levels = {f"punctuated-{args.windows[0]}": level_costs(originals, args.windows[0], encoder)}
        for window in args.windows:
            levels[f"stripped-{window}"] = level_costs(
                [stripped(t) for t in originals], window, encoder
            )
            logger.info("levels: %s", levels)
        figures = {"forms": forms, "stripped_over_punctuated": ratios, "levels": levels}
        print(save(args.out, figures))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
