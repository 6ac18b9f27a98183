"""`search.evaluation.selection` against plain loops over the same per-query values."""

from __future__ import annotations

import numpy as np
import pytest

from docsim.search.evaluation.selection import (
    Family,
    choose,
    cv_score,
    held_out,
    leave_one_out,
    nested,
)

pytestmark = pytest.mark.no_sql


def ref_objective(values, baseline, keep, c):  # noqa: ANN001, ANN201
    gains = []
    for s in values:
        kept = [q for q in range(values[s].shape[1]) if keep[s][q]]
        mean = sum(values[s][c, q] for q in kept) / len(kept)
        base = sum(baseline[s][q] for q in kept) / len(kept)
        gains.append(mean / base)
    return min(gains)


def ref_choose(values, baseline, keep, members):  # noqa: ANN001, ANN201
    best, pick = -np.inf, -1
    for c in members:
        value = ref_objective(values, baseline, keep, c)
        if value > best:
            best, pick = value, int(c)
    return pick


def ref_loo(values, baseline, keep, members):  # noqa: ANN001, ANN201
    picks = {s: [-1] * values[s].shape[1] for s in values}
    for s in values:
        for q in range(values[s].shape[1]):
            if keep[s][q]:
                inner = {t: keep[t].copy() for t in keep}
                inner[s][q] = False
                picks[s][q] = ref_choose(values, baseline, inner, members)
    return picks


def ref_cv_score(values, baseline, keep, members):  # noqa: ANN001, ANN201
    picks = ref_loo(values, baseline, keep, members)
    per_set = {}
    for s in values:
        kept = [q for q in range(values[s].shape[1]) if keep[s][q]]
        base = sum(baseline[s][q] for q in kept) / len(kept)
        per_set[s] = [values[s][picks[s][q], q] / base for q in kept]
    worst = min(per_set, key=lambda s: sum(per_set[s]) / len(per_set[s]))
    ratios = per_set[worst]
    mean = sum(ratios) / len(ratios)
    var = sum((r - mean) ** 2 for r in ratios) / (len(ratios) - 1)
    return mean, (var / len(ratios)) ** 0.5


def ref_nested(values, baseline, families, rule):  # noqa: ANN001, ANN201
    picks = {s: [] for s in values}
    for s in values:
        for q in range(values[s].shape[1]):
            keep = {t: np.ones(values[t].shape[1], bool) for t in values}
            keep[s][q] = False
            scores = [ref_cv_score(values, baseline, keep, f.members) for f in families]
            best = max(range(len(scores)), key=lambda i: scores[i][0])
            f = best
            if rule == "one-se":
                floor = scores[best][0] - scores[best][1]
                f = min(i for i in range(len(scores)) if scores[i][0] >= floor)
            picks[s].append(ref_choose(values, baseline, keep, families[f].members))
    return picks


@pytest.fixture()
def problem() -> tuple[dict, dict, list[Family]]:
    rng = np.random.default_rng(7)
    values = {"a": rng.random((24, 6)), "b": rng.random((24, 5))}
    baseline = {"a": rng.random(6) + 0.1, "b": rng.random(5) + 0.1}
    families = [
        Family("default", np.array([3])),
        Family("few", np.array([3, 5, 11, 17])),
        Family("grid", np.arange(24)),
    ]
    return values, baseline, families


def test_choose_and_leave_one_out_equal_the_plain_loops(problem) -> None:  # noqa: ANN001
    values, baseline, families = problem
    keep = {"a": np.array([1, 1, 0, 1, 1, 1], bool), "b": np.ones(5, bool)}
    for family in families:
        assert choose(values, baseline, keep, family.members) == ref_choose(
            values, baseline, keep, family.members
        )
        picks = leave_one_out(values, baseline, keep, family.members)
        assert {s: p.tolist() for s, p in picks.items()} == ref_loo(
            values, baseline, keep, family.members
        )
        assert np.allclose(
            cv_score(values, baseline, keep, family.members),
            ref_cv_score(values, baseline, keep, family.members),
        )
    assert leave_one_out(values, baseline, keep, families[2].members)["a"][2] == -1
    assert np.isnan(held_out(values, leave_one_out(values, baseline, keep, np.arange(24)))["a"][2])


@pytest.mark.parametrize("rule", ["best", "one-se"])
def test_nested_equals_the_plain_loops(problem, rule: str) -> None:  # noqa: ANN001
    values, baseline, families = problem
    result = nested(values, baseline, families, rule)
    assert {s: p.tolist() for s, p in result.picks.items()} == ref_nested(
        values, baseline, families, rule
    )
    for s in values:  # each pick lies in the family chosen for that query
        for pick, family in zip(result.picks[s], result.families[s], strict=True):
            assert pick in families[family].members


def test_a_configuration_best_on_every_query_is_always_chosen(problem) -> None:  # noqa: ANN001
    values, baseline, families = problem
    values = {s: v.copy() for s, v in values.items()}
    for v in values.values():
        v[11] = v.max(axis=0) + 0.5
    for rule in ("best", "one-se"):
        result = nested(values, baseline, families, rule)
        assert all((p == 11).all() for p in result.picks.values())
        assert all((f == 1).all() for f in result.families.values()) or rule == "best"


def test_equal_configurations_choose_the_first(problem) -> None:  # noqa: ANN001
    """Ties go to the lower index, alone and in every leave-one-out fold."""
    values, baseline, _ = problem
    values = {s: v.copy() for s, v in values.items()}
    for v in values.values():
        v[7] = v.max(axis=0) + 0.5
        v[2] = v[7]  # the same row twice: every mean and every fold ties
    everyone = {s: np.ones(v.shape[1], bool) for s, v in values.items()}
    members = np.array([9, 7, 2])
    assert choose(values, baseline, everyone, np.sort(members)) == 2
    picks = leave_one_out(values, baseline, everyone, np.sort(members))
    assert all((p == 2).all() for p in picks.values())


def test_sets_too_small_are_refused(problem) -> None:  # noqa: ANN001
    values, baseline, families = problem
    keep = {"a": np.array([1, 0, 0, 0, 0, 0], bool), "b": np.ones(5, bool)}
    with pytest.raises(ValueError, match="at least 2 queries"):
        leave_one_out(values, baseline, keep, families[2].members)
    small = {s: v[:, :2] for s, v in values.items()}
    with pytest.raises(ValueError, match="at least 3 queries"):
        nested(small, {s: b[:2] for s, b in baseline.items()}, families, "best")
