"""The search settings in groups (`DOCSIM_SEARCH__RM3__TERMS`), their flat names of before
issue 70 still read with a warning, and a collection's groups merged over the server's."""

from __future__ import annotations

import pytest

from docsim.indexer.settings import with_groups
from docsim.search.scorer_settings import FLAT_NAMES, regrouped
from docsim.search.settings import QuerySettings, SearchSettings

pytestmark = pytest.mark.no_sql


def test_every_flat_name_reads_as_its_group_field() -> None:
    """Each of the 31 flat names sets the field it names now, to a value other than the
    default (a default plus one, within its bounds, or another choice)."""
    assert len(FLAT_NAMES) == 31
    defaults = SearchSettings()
    for flat, (group, name) in FLAT_NAMES.items():
        default = getattr(getattr(defaults, group), name)
        if isinstance(default, bool) or not isinstance(default, int | float):
            continue
        changed = default / 2 if isinstance(default, float) else max(default - 1, 1)
        if changed == default:
            changed = default + 1
        with pytest.warns(DeprecationWarning, match=f"{flat} -> {group}.{name}"):
            settings = SearchSettings(**{flat: changed})
        assert getattr(getattr(settings, group), name) == changed, flat
        assert settings == SearchSettings(**{group: {name: changed}})


def test_the_old_environment_variables_still_set_their_fields(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCSIM_SEARCH__RM3_TERMS", "7")
    monkeypatch.setenv("DOCSIM_SEARCH__CANDIDATE_GENERATOR", "neighbours")
    monkeypatch.setenv("DOCSIM_SEARCH__RM3__DOCUMENTS", "3")
    with pytest.warns(DeprecationWarning, match="DOCSIM_SEARCH__RM3__TERMS"):
        search = QuerySettings().search
    assert (search.rm3.terms, search.rm3.documents) == (7, 3)
    assert search.candidates.generator == "neighbours"


def test_a_flat_name_beside_its_group_wins_and_other_keys_stay() -> None:
    with pytest.warns(DeprecationWarning):
        moved = regrouped({"rm3": {"terms": 5, "documents": 4}, "rm3_terms": 9, "seed": 3})
    assert moved == {"rm3": {"terms": 9, "documents": 4}, "seed": 3}
    assert regrouped({"seed": 3}) == {"seed": 3}  # nothing to move: no warning


def test_a_collections_group_is_merged_over_the_servers_own() -> None:
    """A collection that sets `rm3.documents` keeps the server's `rm3.terms`; one stored with
    the flat name of before reads the same."""
    server = QuerySettings(search=SearchSettings(rm3={"terms": 30}, seed=5))
    collection = with_groups(server, "notes", {"search": {"rm3": {"documents": 4}}})
    assert (collection.search.rm3.terms, collection.search.rm3.documents) == (30, 4)
    assert collection.search.seed == 5 and collection.collection == "notes"
    with pytest.warns(DeprecationWarning):
        stored_before = with_groups(server, "notes", {"search": {"rm3_documents": 4}})
    assert stored_before.search == collection.search


def test_replaced_validates_and_merges_groups() -> None:
    settings = SearchSettings(scan={"rescore": 7})
    replaced = settings.replaced(scan={"dimensions": 32}, seed=2)
    assert (replaced.scan.rescore, replaced.scan.dimensions, replaced.seed) == (7, 32, 2)
    with pytest.raises(ValueError, match="query_terms"):
        settings.replaced(bm25={"query_terms": 10**9})
