"""Score-level fusion: each method's scores normalised per query over the documents it ranked,
then summed with weights.

    fused(d) = sum over methods m of w_m * norm_m(score_m(d))

`zscore`: (s - mean) / std over the ranked documents; `minmax`: (s - min) / (max - min). A
document a method did not score (-inf, e.g. outside candidate mode's candidates) gets that
method's lowest normalised score. A method fused by its outliers only (`outliers`) counts
`max(z - t, 0) / (max z - t)` with z its z-scores: 0 for every document when none is more than
t standard deviations above the mean (a query or collection without the signal keeps the
others' ranking), up to 1 for the strongest outlier (issue 69: verbatim reuse).
Reciprocal-rank fusion (`search.order`) uses only ranks; this keeps how far apart the scores
are, which is what lets a strong signal outvote weak ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

import numpy as np

NORMALISERS = ("zscore", "minmax")
Name = TypeVar("Name", bound=str)  # a method's name: a plain string or a `Method`


def normalise(scores: np.ndarray, ranked: np.ndarray, how: str = "zscore") -> np.ndarray:
    """`scores` `(D,)` normalised over the positions `ranked` `(k,)`; 0 elsewhere."""
    out = np.zeros(len(scores), dtype=np.float64)
    if not len(ranked):
        return out
    values = scores[ranked].astype(np.float64)  # (k,)
    finite = np.isfinite(values)
    if not finite.any():
        return out
    low = values[finite].min()
    values = np.where(finite, values, low)
    if how == "zscore":
        spread = values.std()
        out[ranked] = (values - values.mean()) / spread if spread > 0 else 0.0
    elif how == "minmax":
        spread = values.max() - low
        out[ranked] = (values - low) / spread if spread > 0 else 0.0
    else:
        raise ValueError(f"unknown normaliser {how!r}; choose one of {', '.join(NORMALISERS)}")
    return out


def outliers_only(
    scores: np.ndarray, ranked: np.ndarray, threshold: float, population: np.ndarray | None = None
) -> np.ndarray:
    """`scores` `(D,)` as outliers at `ranked` `(k,)`: `max(z - t, 0) / (max z - t)` with z
    the z-scores over `population` `(p,)` (default: `ranked`; the whole population a query
    ranks, so that candidate mode's narrower pool does not move the threshold) and t
    `threshold`; 0 everywhere when no z exceeds t, and outside `ranked`."""
    population = ranked if population is None else population
    z = normalise(scores, population, "zscore")  # (D,) 0 outside `population`
    top = float(z[population].max()) if len(population) else 0.0
    out = np.zeros(len(scores), dtype=np.float64)
    if top <= threshold or not len(ranked):
        return out
    out[ranked] = np.maximum(z[ranked] - threshold, 0.0) / (top - threshold)
    return out


def fuse(
    scores: Mapping[Name, np.ndarray],
    weights: Mapping[Name, float],
    ranked: np.ndarray,
    how: str = "zscore",
    outliers: Mapping[Name, float] | None = None,
    population: np.ndarray | None = None,
) -> np.ndarray:
    """`(D,)` the weighted sum of each method's normalised `scores` over `ranked`; a method of
    `outliers` counts its outliers above its threshold only, z-scored over `population`
    (`outliers_only`)."""
    missing = sorted(set(weights) - set(scores))
    if missing:
        raise ValueError(f"no scores for {', '.join(missing)}")
    gates = outliers or {}
    out = np.zeros(len(next(iter(scores.values()))), dtype=np.float64)
    for name, weight in weights.items():
        if weight and name in gates:
            out += weight * outliers_only(scores[name], ranked, gates[name], population)
        elif weight:
            out += weight * normalise(scores[name], ranked, how)
    return out
