"""Choosing a fusion configuration on judged queries, and estimating the choice's own error.

Everything here works on per-query values that are already computed: for each judged set `s`,
`values[s]` `(C, n_s)` is every configuration's value on each query (AP on AILA, (AP +
NDCG%20) / 2 on CSFCube), and `baseline[s]` `(n_s,)` is BM25's. The objective of a
configuration on a set of queries is the smaller, over the sets, of its mean value divided by
BM25's mean on the same queries: one configuration has to win on every set.

- `choose`: the configuration of a family that maximises the objective on the kept queries.
- `leave_one_out`: each kept query is ranked by the configuration chosen on the other kept
  queries; the mean of those held-out values estimates how well choosing does.
- `nested`: the same one level up. For each query, the family (how much freedom the choice
  has: the shipped default alone, a single method, equal weights over a few methods, the whole
  grid) is picked by leave-one-out on the other queries, then the configuration within it;
  the held-out query scores that pick. This estimates the error of the whole procedure,
  including the choice of how much to tune, never of one configuration chosen by looking at
  every query.

Nothing here reads a file or a ranking: the tests compare it with plain loops. Intervals and
paired tests of the chosen configurations are `search.evaluation.metrics`'.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Values = dict[str, np.ndarray]  # set -> (C, n_s) per-query value of each configuration
Masks = dict[str, np.ndarray]  # set -> (n_s,) bool, the queries in use


@dataclass(frozen=True)
class Family:
    """Configurations a choice may pick from; families are tried simplest first."""

    name: str
    members: np.ndarray  # (C_f,) configuration indices


def objective(values: Values, baseline: Values, keep: Masks) -> np.ndarray:
    """`(C,)` min over sets of (mean value / mean BM25 value) over the kept queries."""
    gains = [
        values[s][:, keep[s]].mean(axis=1) / max(float(baseline[s][keep[s]].mean()), 1e-12)
        for s in values
    ]
    best: np.ndarray = np.min(gains, axis=0)
    return best


def choose(values: Values, baseline: Values, keep: Masks, members: np.ndarray) -> int:
    """The configuration of `members` with the best objective on the kept queries (the
    first of equals)."""
    sub = {s: v[members] for s, v in values.items()}
    return int(members[int(np.argmax(objective(sub, baseline, keep)))])


def leave_one_out(
    values: Values, baseline: Values, keep: Masks, members: np.ndarray
) -> dict[str, np.ndarray]:
    """Per set `(n_s,)`: for each kept query, the configuration chosen on the other kept
    queries (-1 for queries not kept). Vectorised: the other queries' sums are the kept sums
    minus the held-out column."""
    _enough(keep, 2, "leave-one-out")
    sub = {s: v[members] for s, v in values.items()}  # (C_f, n_s)
    sums = {s: sub[s][:, keep[s]].sum(axis=1) for s in sub}  # (C_f,)
    base_sums = {s: float(baseline[s][keep[s]].sum()) for s in sub}
    counts = {s: int(keep[s].sum()) for s in sub}
    picks = {s: np.full(len(keep[s]), -1) for s in sub}
    for held in sub:
        for q in np.flatnonzero(keep[held]):
            gains = []
            for s in sub:
                total, base, n = sums[s], base_sums[s], counts[s]
                if s == held:
                    total, base, n = total - sub[s][:, q], base - baseline[s][q], n - 1
                gains.append((total / n) / max(base / n, 1e-12))
            picks[held][q] = members[int(np.argmax(np.min(gains, axis=0)))]
    return picks


def _enough(keep: Masks, least: int, what: str) -> None:
    """Refuse sets too small for `what`: a held-out fold would average over no query."""
    small = {s: int(m.sum()) for s, m in keep.items() if int(m.sum()) < least}
    if small:
        raise ValueError(f"{what} needs at least {least} queries in each set; got {small}")


def held_out(values: Values, picks: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per set `(n_s,)` each query's value under its own pick (nan where there is none)."""
    return {
        s: np.array([values[s][p, q] if p >= 0 else np.nan for q, p in enumerate(picks[s])])
        for s in values
    }


def cv_score(
    values: Values, baseline: Values, keep: Masks, members: np.ndarray
) -> tuple[float, float]:
    """Leave-one-out objective of choosing within `members` on the kept queries, and its
    standard error (that of the set giving the minimum: the spread of its held-out values
    over BM25's mean, over the square root of its query count)."""
    out = held_out(values, leave_one_out(values, baseline, keep, members))
    ratios = {}
    for s in values:
        kept = out[s][keep[s]]
        ratios[s] = kept / max(float(baseline[s][keep[s]].mean()), 1e-12)
    worst = min(ratios, key=lambda s: float(ratios[s].mean()))
    spread = ratios[worst]
    return float(spread.mean()), float(spread.std(ddof=1) / np.sqrt(len(spread)))


def pick_family(
    values: Values, baseline: Values, keep: Masks, families: list[Family], rule: str
) -> int:
    """The family the kept queries choose: `best` (the highest leave-one-out objective) or
    `one-se` (the simplest whose objective is within one standard error of the best)."""
    scores = [cv_score(values, baseline, keep, f.members) for f in families]
    best = int(np.argmax([m for m, _ in scores]))
    if rule == "best":
        return best
    if rule != "one-se":
        raise ValueError(f"unknown rule {rule!r}")
    floor = scores[best][0] - scores[best][1]
    return next(i for i, (m, _) in enumerate(scores) if m >= floor)


@dataclass
class NestedResult:
    """Per set `(n_s,)`: each query's configuration and family index, both chosen without it."""

    picks: dict[str, np.ndarray]
    families: dict[str, np.ndarray]


def nested(values: Values, baseline: Values, families: list[Family], rule: str) -> NestedResult:
    """Nested leave-one-out: for each query, the family and then the configuration are chosen
    on all the other queries (the family by their own leave-one-out), and the query is ranked
    by that configuration."""
    everyone = {s: np.ones(v.shape[1], bool) for s, v in values.items()}
    _enough(everyone, 3, "nested leave-one-out")  # 2 left in each inner fold
    picks = {s: np.full(v.shape[1], -1) for s, v in values.items()}
    chosen = {s: np.full(v.shape[1], -1) for s, v in values.items()}
    for held in values:
        for q in range(values[held].shape[1]):
            keep = {s: m.copy() for s, m in everyone.items()}
            keep[held][q] = False
            f = pick_family(values, baseline, keep, families, rule)
            chosen[held][q] = f
            picks[held][q] = choose(values, baseline, keep, families[f].members)
    return NestedResult(picks=picks, families=chosen)
