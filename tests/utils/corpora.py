"""Small corpora written on the fly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from docsim.models.training.data import TrainingDocument

AILA_DIR = Path(__file__).resolve().parents[3] / "shared" / "data" / "aila2019" / "casedocs"


def write_text_corpus(folder: Path, docs: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text(
        "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n",
        encoding="utf-8",
    )
    return path


def synthetic_markdown(n_docs: int, sections: int = 3, paragraphs: int = 3) -> dict[str, str]:
    """Deterministic documents with varied words, for builds that must take a while."""
    topics = ["rivers", "engines", "courts", "gardens", "markets", "storms", "libraries"]
    docs = {}
    for d in range(n_docs):
        topic = topics[d % len(topics)]
        parts = [f"# Report {d} on {topic}"]
        for s in range(sections):
            parts.append(f"## Part {s + 1}")
            for p in range(paragraphs):
                parts.append(
                    f"The {topic} of district {d} changed in year {1900 + p}. "
                    f"Observers noted {s + p} new {topic} near the old bridge. "
                    f"Nobody expected the {topic} to last, e.g. beyond the winter."
                )
        docs[f"doc-{d:04d}.md"] = "\n\n".join(parts) + "\n"
    return docs


def training_documents(n: int) -> list[TrainingDocument]:
    """`n` documents of two sections, each of a three-sentence and a one-sentence paragraph;
    every sentence names its document (`d7 s1 p0 a.`)."""
    return [
        TrainingDocument(
            doc_id=f"doc-{i:02d}",
            sections=[
                [[f"d{i} s{s} p0 a.", f"d{i} s{s} p0 b.", f"d{i} s{s} p0 c."], [f"d{i} s{s} p1."]]
                for s in range(2)
            ],
        )
        for i in range(n)
    ]
