"""bm25s' tokenisation, as `search.lexical.bm25` scores it: lower case, English stop words
removed, optionally Snowball-stemmed (PyStemmer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class WordStemmer(Protocol):
    """What bm25s asks of a stemmer: PyStemmer's `Stemmer.Stemmer`."""

    def stemWords(self, words: Sequence[str]) -> list[str]: ...


def stemmer_for(language: str | None) -> WordStemmer | None:
    """PyStemmer's Snowball stemmer for `language`, or None for no stemming."""
    if language is None:
        return None
    import Stemmer

    stemmer: WordStemmer = Stemmer.Stemmer(language)  # PyStemmer is untyped
    return stemmer


def tokenize(texts: Sequence[str], stemmer: str | None = None) -> list[list[str]]:
    """bm25s' tokenisation (lower case, English stop words removed, Snowball stems in
    `stemmer`'s language when given), as strings."""
    import bm25s

    if not texts:
        return []
    tokens: list[list[str]] = bm25s.tokenize(  # bm25s is untyped: its strings, per text
        list(texts),
        stopwords="en",
        stemmer=stemmer_for(stemmer),
        return_ids=False,
        show_progress=False,
    )
    return tokens
