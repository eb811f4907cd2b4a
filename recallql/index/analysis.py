"""The text analyser shared by indexing and query-term extraction."""

from __future__ import annotations

import functools

import tantivy

#: Name under which the analyser is registered with every tantivy index.
ANALYZER_NAME = "recallql_en"


@functools.cache
def analyzer() -> tantivy.TextAnalyzer:
    """The index analyser: simple tokenizer → remove_long(40) → lowercase → English stopwords →
    English (Porter/Snowball) stemmer. Built once per process."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stopword("english"))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def analyze(text: str) -> list[str]:
    """Turn text into index terms, in order, duplicates kept.

    No character is syntax: ``"C++"`` gives ``["c"]``, ``"OR"`` (a stopword) gives ``[]``.

    Args:
        text: any string.

    Returns:
        The terms, e.g. ``analyze("Backup retention policies") == ["backup", "retent", "polici"]``.
    """
    return analyzer().analyze(text)
