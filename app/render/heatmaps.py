"""`format=png`: the section, chunk and paragraph maps of a pair as labelled heatmaps.

Drawn with matplotlib's object API (no pyplot state), so that renders in the server's worker
threads do not share a figure. Large maps are max-pooled into blocks and say so in their title.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Iterator

import matplotlib
import torch

matplotlib.use("Agg")

from matplotlib.axes import Axes  # noqa: E402
from matplotlib.colors import Normalize  # noqa: E402
from matplotlib.figure import Figure, FigureBase, SubFigure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from docsim.app.render.grids import Map, explanation_maps  # noqa: E402
from docsim.search.api import PairExplanation  # noqa: E402

TITLE_TICKS = 20  # label rows / columns with section titles up to this many sections


def _label(text: str, width: int = 28) -> str:
    text = " ".join(text.split()) or "(untitled)"
    return text if len(text) <= width else text[: width - 1] + "…"


def _draw(axes: Axes, figure: FigureBase, item: Map, explanation: PairExplanation) -> None:
    grid = item.grid
    image = axes.imshow(
        grid.values.numpy(),
        cmap="viridis",
        aspect="auto",
        interpolation="nearest",
        extent=(-0.5, item.columns - 0.5, item.rows - 0.5, -0.5),  # unit indices at cell centres
    )
    figure.colorbar(image, ax=axes, fraction=0.046, pad=0.02)
    title = item.title if not item.note else f"{item.title}\n{item.note}"
    axes.set_title(title, fontsize=10)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel(f"target {item.unit}s ({item.columns})")
    axes.set_ylabel(f"source {item.unit}s ({item.rows})")
    if item.key == "section" and max(item.rows, item.columns) <= TITLE_TICKS:
        axes.set_yticks(
            range(item.rows),
            [_label(t) for t in explanation.source.section_titles],
            fontsize=7,
        )
        axes.set_xticks(
            range(item.columns),
            [_label(t) for t in explanation.target.section_titles],
            fontsize=7,
            rotation=60,
            ha="right",
        )
    if item.key == "paragraph" and not grid.pooled:
        for i, j in enumerate(explanation.alignment.best_paragraph.tolist()):
            axes.add_patch(
                Rectangle(
                    (j - 0.5, i - 0.5),
                    1,
                    1,
                    fill=False,
                    edgecolor="red",
                    linewidth=1.2,
                    label="best target paragraph of each source paragraph" if i == 0 else None,
                )
            )
        axes.legend(loc="upper right", fontsize=7, framealpha=0.8)
    if item.key == "paragraph" and grid.pooled:  # too small to box every row: number the top
        for pair in explanation.top_pairs:
            axes.annotate(
                str(pair.rank),
                (pair.target_paragraph, pair.source_paragraph),
                color="red",
                fontsize=8,
                fontweight="bold",
                ha="center",
                va="center",
            )
        axes.text(
            0.0,
            -0.06,
            "red numbers: the top paragraph pairs, by rank",
            transform=axes.transAxes,
            fontsize=8,
            color="red",
        )
    scale = image.norm  # imshow's own: a linear `Normalize` of the values' range
    if max(item.rows, item.columns) <= 12 and not grid.pooled and isinstance(scale, Normalize):
        for (i, j), value in _cells(grid.values):
            shade = "black" if scale(value) > 0.6 else "white"
            axes.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7, color=shade)


def _cells(values: torch.Tensor) -> Iterator[tuple[tuple[int, int], float]]:
    """Each cell of a small `(rows, columns)` map: its place and its value."""
    for i, row in enumerate(values.tolist()):
        for j, value in enumerate(row):
            yield (i, j), value


def scoring_note(explanation: PairExplanation) -> str:
    """How the maps' scores were normalised, in words (the image's title says it)."""
    stats = explanation.stats
    if stats is None:
        return "not normalised"
    return f"z-scored against the {stats.population.value} of {stats.documents} documents"


def render_png(explanation: PairExplanation, max_per_axis: int) -> bytes:
    """The three maps of a pair and its scores as one PNG image."""
    section, chunk, paragraph = explanation_maps(explanation, max_per_axis)
    figure = Figure(figsize=(15, 15), dpi=100, layout="constrained")
    # a paragraph map of a few rows (a one-paragraph query) gets a low panel, not tall bars
    bottom_height = 1.6 if paragraph.grid.values.shape[0] >= 8 else 0.7
    panels = figure.subfigures(2, 1, squeeze=False, height_ratios=[1, bottom_height])  # (2, 1)
    top: SubFigure = panels[0, 0]
    bottom: SubFigure = panels[1, 0]
    left, right = top.subplots(1, 2)
    _draw(left, top, section, explanation)
    _draw(right, top, chunk, explanation)
    _draw(bottom.subplots(), bottom, paragraph, explanation)
    source, target = explanation.source, explanation.target
    scoring = scoring_note(explanation)
    figure.suptitle(
        "\n".join(
            [
                textwrap.shorten(
                    f"source: {source.title or source.ref} [{source.kind} {source.ref}]", 120
                ),
                textwrap.shorten(f"target: {target.title or target.ref} [{target.ref}]", 120),
                f"SDR score {explanation.score:.3f} ({scoring}); "
                f"document cosine {explanation.document_cosine:.3f}",
            ]
        ),
        fontsize=11,
    )
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()
