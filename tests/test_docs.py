"""The documentation: the site builds with `--strict` (a broken link or a page missing from the
navigation fails it), its reference pages hold everything the code has, the README stays a
front door, and the site's pages are photographed in the headless browser."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import pytest

from docs.settings_reference import setting_rows
from docsim.app.cli import docsim
from docsim.app.core.settings import ServiceSettings
from docsim.app.main import create_app
from tests.app.browser import ARTIFACTS, required_chromium

pytestmark = pytest.mark.no_sql

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 150


def build_site(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    return subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = build_site(ROOT, out)
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    return out


def page_text(site: Path, page: str) -> str:
    html = (site / page / "index.html").read_text(encoding="utf-8")
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_the_settings_page_lists_every_variable(site: Path) -> None:
    text = page_text(site, "settings")
    squeezed = "".join(text.split())  # rendered code and punctuation move the spaces
    for row in setting_rows(ServiceSettings):
        assert row.variable in text, row.variable
        assert "".join(row.description.replace("`", "").split()) in squeezed, row.variable


def test_the_cli_page_lists_every_command_and_option(site: Path) -> None:
    import typer

    text = page_text(site, "cli")
    group = typer.main.get_command(docsim())
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        assert f"docsim {name}" in text, name
        for param in command.params:
            if param.param_type_name == "option":
                assert param.opts[0] in text, (name, param.opts)


def test_the_http_page_and_openapi_json_cover_every_route(site: Path, tmp_path: Path) -> None:
    spec = create_app(ServiceSettings(data_dir=tmp_path)).openapi()
    assert json.loads((site / "openapi.json").read_text()) == spec
    text = page_text(site, "http-api")
    for path, operations in spec["paths"].items():
        for verb in operations:
            assert f"{verb.upper()} {path}" in text, (verb, path)
    for schema in spec["components"]["schemas"]:
        assert schema in text


def test_the_changelog_page_is_the_changelog(site: Path) -> None:
    text = page_text(site, "changelog")
    assert "Unreleased" in text and "docsim --version" in text


@pytest.mark.long
def test_a_broken_link_a_missing_anchor_or_a_page_left_out_fails_the_build(
    tmp_path: Path,
) -> None:
    """A copy of the site with three faults: each is a warning, and --strict fails on them."""
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    shutil.copy(ROOT / "CHANGELOG.md", copy / "CHANGELOG.md")
    with (copy / "docs" / "quickstart.md").open("a", encoding="utf-8") as out:
        out.write("\nSee [the missing page](missing.md).\n")
    with (copy / "docs" / "concepts.md").open("a", encoding="utf-8") as out:
        out.write("\nSee [a section that is not there](quickstart.md#no-such-heading).\n")
    (copy / "docs" / "orphan.md").write_text("# Orphan\n")
    built = build_site(copy, tmp_path / "site")
    assert built.returncode != 0
    # each warning starts "WARNING"; the pages left out of the navigation follow theirs
    warnings = re.split(r"^(?=WARNING)", built.stderr, flags=re.M)[1:]
    assert len(warnings) == 3, built.stderr
    for fault in ("'missing.md'", "'#no-such-heading'", "- orphan.md"):
        assert sum(fault in warning for warning in warnings) == 1, fault


def test_the_readme_is_a_front_door() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_MAX_LINES
    assert "make run" in readme and "make test" in readme
    for target in re.findall(r"\]\((?!https?://|#)([^)#]+)", readme):
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with required_chromium() as session:
        yield session


def test_screenshots_of_the_home_and_settings_pages(site: Path, browser) -> None:  # noqa: ANN001
    """Saved under build/test-artifacts/ (DOCSIM_TEST_ARTIFACTS), as the search page's are."""
    from selenium.webdriver.common.by import By

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for page, heading in (("", "docsim"), ("settings/", "Settings")):
        browser.get((site / page / "index.html").as_uri())
        assert browser.find_element(By.CSS_SELECTOR, "article h1").text.startswith(heading)
        shot = ARTIFACTS / f"docs-{page.strip('/') or 'home'}.png"
        browser.save_screenshot(str(shot))
        assert shot.stat().st_size > 20_000
    rows = browser.find_elements(By.CSS_SELECTOR, "article table tbody tr")
    assert len(rows) == len(list(setting_rows(ServiceSettings)))
