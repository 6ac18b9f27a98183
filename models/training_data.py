"""What the trainers read: documents as nested lists of text (no indexer types), and checks
that a corpus can fill the requested batches."""

from __future__ import annotations

from dataclasses import dataclass


class TrainingError(ValueError):
    """A run that cannot start as asked (bad base, occupied output, changed config, ...)."""


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
