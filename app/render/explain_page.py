"""`format=html`: one self-contained page (no external requests) with the maps drawn on
canvases and the two texts side by side; a click on a cell highlights and scrolls to the pair.

The page's data is the explanation with maps pooled for display (`app.render.grids`), embedded
as JSON; the script and styles are inline in `app/web/explain.html`.
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from docsim.app.render.grids import explanation_maps
from docsim.search.api import PairExplanation, Side

_templates = Environment(
    loader=PackageLoader("docsim.app", "web"), autoescape=select_autoescape(["html"])
)


def _side(side: Side) -> dict[str, Any]:
    return {
        "ref": side.ref,
        "kind": side.kind,
        "title": side.title,
        "text": side.text,
        "section_titles": side.section_titles,
        "sections": [[s.start, s.end] for s in side.sections],
        "paragraphs": [[p.start, p.end] for p in side.paragraphs],
        "sentences": [
            [s.start, s.end, side.sentence_paragraph[k]] for k, s in enumerate(side.sentences)
        ],
        "chunks": [[c.start, c.end] for c in side.chunks],
        "pages": [side.page(i) for i in range(len(side.paragraphs))],
    }


def page_data(explanation: PairExplanation, max_per_axis: int) -> dict[str, Any]:
    alignment = explanation.alignment
    sentence_paragraph = explanation.source.sentence_paragraph
    aligned: list[list[list[float]]] = [[] for _ in explanation.source.paragraphs]
    for k, (r, score) in enumerate(
        zip(alignment.sentence_target.tolist(), alignment.sentence_score.tolist(), strict=True)
    ):
        aligned[sentence_paragraph[k]].append([k, r, round(score, 4)])
    stats = explanation.stats
    return {
        "source": _side(explanation.source),
        "target": _side(explanation.target),
        "score": explanation.score,
        "document_cosine": explanation.document_cosine,
        "statistics": None
        if stats is None
        else {"population": stats.population, "documents": stats.documents},
        "best_paragraph": alignment.best_paragraph.tolist(),
        "alignments": aligned,
        "maps": [
            {
                "key": m.key,
                "title": m.title,
                "unit": m.unit,
                "note": m.note,
                "rows": m.rows,
                "columns": m.columns,
                "block_rows": m.grid.block_rows,
                "block_columns": m.grid.block_columns,
                "values": m.grid.values.double().round(decimals=4).tolist(),
                "arg_rows": m.grid.rows.tolist(),
                "arg_columns": m.grid.columns.tolist(),
            }
            for m in explanation_maps(explanation, max_per_axis)
        ],
        "top_pairs": [vars(p) for p in explanation.top_pairs],
        "passages": [p.model_dump() for p in explanation.shared_passages],
    }


def render_html(explanation: PairExplanation, max_per_axis: int) -> str:
    data = page_data(explanation, max_per_axis)
    return _templates.get_template("explain.html").render(
        data=data,
        source=explanation.source,
        target=explanation.target,
        score=explanation.score,
    )
