"""The search page and the explanation page in a real headless chromium (Selenium).

`make test` installs Debian's chromium and chromedriver when they are missing and sets
DOCSIM_REQUIRE_BROWSER=1, so that a missing browser fails the run instead of skipping it.
Screenshots are kept under build/test-artifacts/ (DOCSIM_TEST_ARTIFACTS), not committed.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from selenium.webdriver import ActionChains, Chrome
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from docsim.app.core.settings import ServiceSettings
from docsim.app.main import create_app
from docsim.indexer.settings import DatabaseSettings, JobSettings
from docsim.indexer.store.collections import create_collection
from docsim.indexer.store.db import make_engine
from docsim.indexer.text.corpus import SAMPLE_CORPUS, read_file
from docsim.indexer.text.documents import SourceDocument
from tests.app.browser import ARTIFACTS, console_errors, live_server, required_chromium
from tests.utils.indexes import publish
from tests.utils.pdfs import write_document_pdf
from tests.utils.postgres import PostgresServer


@pytest.fixture(scope="module")
def base_url(indexed_settings: ServiceSettings) -> Iterator[str]:
    with live_server(create_app(indexed_settings)) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Chrome]:
    with required_chromium() as session:
        yield session


def wait(browser: Chrome, seconds: float = 30) -> WebDriverWait:
    return WebDriverWait(browser, seconds)


def click_cell(browser: Chrome, key: str, i: int, j: int) -> None:
    """A real mouse click on the canvas cell of (source unit i, target unit j)."""
    canvas = browser.find_element(By.CSS_SELECTOR, f'canvas[data-map="{key}"]')
    centre = browser.execute_script(
        "return window.docsimExplain.cellCenter(arguments[0], arguments[1], arguments[2]);",
        key,
        i,
        j,
    )
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", canvas)
    size = canvas.size  # offsets are from the element's centre
    ActionChains(browser).move_to_element_with_offset(
        canvas, int(centre["x"] - size["width"] / 2), int(centre["y"] - size["height"] / 2)
    ).click().perform()


def visible_in_its_column(browser: Chrome, element_id: str) -> bool:
    return browser.execute_script(
        """const e = document.getElementById(arguments[0]); const box = e.closest('.doc');
        return e.offsetTop >= box.scrollTop && e.offsetTop < box.scrollTop + box.clientHeight;""",
        element_id,
    )


def search(browser: Chrome) -> list[str]:
    """Press Search; the ids of the results shown, in order."""
    browser.find_element(By.ID, "go").click()
    wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, "li.result")))
    return [
        e.get_attribute("data-document-id")
        for e in browser.find_elements(By.CSS_SELECTOR, "li.result")
    ]


def test_search_then_explain_in_a_browser(browser: Chrome, base_url: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.get(base_url + "/")
    assert console_errors(browser) == []
    text = (SAMPLE_CORPUS / "coffee-02.md").read_text(encoding="utf-8")
    box = browser.find_element(By.ID, "text")
    browser.execute_script("arguments[0].value = arguments[1];", box, text)  # a paste
    box.send_keys(" ")  # and a keystroke, as a user would leave it
    browser.find_element(By.ID, "title").send_keys("My coffee notes")
    shown = search(browser)
    expected = httpx.post(
        base_url + "/similar",
        json={"document": {"title": "My coffee notes", "text": text + " "}, "top_k": 10},
    ).json()
    assert shown == [r["document_id"] for r in expected["results"]]
    assert browser.find_elements(By.CSS_SELECTOR, "li.result .match div")  # best passages
    browser.save_screenshot(str(ARTIFACTS / "search.png"))
    assert console_errors(browser) == []

    browser.find_element(By.CSS_SELECTOR, "li.result a.explain-html").click()
    wait(browser).until(
        EC.presence_of_element_located((By.CSS_SELECTOR, 'canvas[data-map="paragraph"]'))
    )
    assert console_errors(browser) == []
    data = browser.execute_script(
        "return JSON.parse(document.getElementById('explain-data').textContent);"
    )
    assert data["target"]["ref"] == shown[0]
    for key in ("section", "chunk", "paragraph"):  # each heatmap is drawn, with several colours
        colours = browser.execute_script(
            """const c = document.querySelector(`canvas[data-map="${arguments[0]}"]`);
            const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            const seen = new Set();
            for (let n = 0; n < px.length; n += 4) seen.add(px.slice(n, n + 3).join());
            return seen.size;""",
            key,
        )
        assert colours > 3, key

    # a cell that is not the row's best: the two paragraphs are highlighted and scrolled to
    rows, columns = len(data["source"]["paragraphs"]), len(data["target"]["paragraphs"])
    i = rows - 1
    j = next(
        c for c in range(columns - 1, -1, -1) if c != data["best_paragraph"][i] or columns == 1
    )
    click_cell(browser, "paragraph", i, j)
    assert (
        browser.find_element(By.TAG_NAME, "body").get_attribute("data-selected")
        == f"paragraph:{i}:{j}"
    )
    highlighted = {
        e.get_attribute("id") for e in browser.find_elements(By.CSS_SELECTOR, ".para.hl")
    }
    assert highlighted == {f"s-p-{i}", f"t-p-{j}"}
    for side, unit, element_id in (("source", i, f"s-p-{i}"), ("target", j, f"t-p-{j}")):
        start, end = data[side]["paragraphs"][unit]
        shown_text = browser.execute_script(
            "return document.getElementById(arguments[0]).textContent;", element_id
        )
        assert shown_text == data[side]["text"][start:end]
        assert visible_in_its_column(browser, element_id)

    # the row's best cell: its sentence alignments are highlighted too
    best = data["best_paragraph"][0]
    click_cell(browser, "paragraph", 0, best)
    aligned = {e.get_attribute("id") for e in browser.find_elements(By.CSS_SELECTOR, ".sent.al")}
    expected_ids = {f"s-s-{k}" for k, _, _ in data["alignments"][0]} | {
        f"t-s-{r}" for _, r, _ in data["alignments"][0]
    }
    assert aligned == expected_ids

    # a section cell: the sentences of both sections
    sections = data["source"]["sections"], data["target"]["sections"]
    click_cell(browser, "section", 0, len(sections[1]) - 1)
    lit = [e.get_attribute("id") for e in browser.find_elements(By.CSS_SELECTOR, ".sent.hl")]
    for prefix, side, (start, end) in (
        ("s", "source", sections[0][0]),
        ("t", "target", sections[1][-1]),
    ):
        inside = {
            f"{prefix}-s-{k}"
            for k, s in enumerate(data[side]["sentences"])
            if s[0] < end and s[1] > start
        }
        assert inside and inside == {x for x in lit if x.startswith(prefix + "-")}
    browser.save_screenshot(str(ARTIFACTS / "explain.png"))
    assert console_errors(browser) == []


def test_long_paragraphs_are_shown_in_a_few_lines_under_labelled_columns(
    browser: Chrome, base_url: str
) -> None:
    """One long AILA paragraph once filled a 1,280 x 1,600 screen, and the query's and the
    match's columns had no labels."""
    browser.get(base_url + "/")
    text = (SAMPLE_CORPUS / "coffee-02.md").read_text(encoding="utf-8").split("\n", 1)[1]
    one_paragraph = " ".join(text.split())  # the whole body as one paragraph, no line breaks
    box = browser.find_element(By.ID, "text")
    browser.execute_script("arguments[0].value = arguments[1];", box, one_paragraph)
    box.send_keys(" ")
    search(browser)
    labels = browser.find_elements(By.CSS_SELECTOR, "li.result .match-labels span")
    assert [e.text for e in labels[:2]] == ["in the query", "in this document"]
    passage = browser.find_element(By.CSS_SELECTOR, "li.result .match div.passage")
    full = browser.execute_script("return arguments[0].scrollHeight;", passage)
    assert passage.size["height"] < 160 < full  # a few lines of a long paragraph
    passage.click()
    assert passage.size["height"] >= full - 2  # a click shows all of it
    assert console_errors(browser) == []


def test_search_page_shows_the_servers_message(browser: Chrome, base_url: str) -> None:
    browser.get(base_url + "/")
    browser.find_element(By.ID, "document-id").send_keys("no-such-document")
    browser.find_element(By.ID, "go").click()
    status = wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, "#status.error")))
    assert "not in the active index" in status.text
    errors = console_errors(browser)  # the failed request itself is logged by the browser
    assert all("404" in e["message"] for e in errors)


@pytest.fixture(scope="module")
def paged(
    tmp_path_factory: pytest.TempPathFactory,
    tiny_encoder_dir: Path,
    _postgres: PostgresServer | None,
) -> Iterator[tuple[str, Path]]:
    """A server over the sample corpus and one of its documents printed to PDF (two
    columns, several pages), and another PDF of that document to upload; in a database of
    its own (the session's belongs to `indexed_settings`)."""
    root = tmp_path_factory.mktemp("paged")
    corpus = root / "corpus"
    shutil.copytree(SAMPLE_CORPUS, corpus)
    source = read_file(SAMPLE_CORPUS / "coffee-02.md")
    assert isinstance(source, SourceDocument)
    write_document_pdf(source, corpus / "coffee-print.pdf", columns=2)
    upload = write_document_pdf(source, root / "my coffee notes.pdf")
    url = _postgres.database() if _postgres is not None else f"sqlite:///{root / 'docsim.db'}"
    settings = ServiceSettings(
        data_dir=root / "data",
        db=DatabaseSettings(url=url),
        jobs=JobSettings(embedded_worker=False),
    )
    publish(corpus, settings, tiny_encoder_dir)
    # a second collection, of three of the sample's documents under other ids
    notes = root / "notes"
    notes.mkdir()
    for path in sorted(SAMPLE_CORPUS.glob("*.md"))[:3]:
        (notes / f"note-{path.name}").write_text(path.read_text(encoding="utf-8"))
    engine = make_engine(settings.database_url)
    create_collection(engine, "notes")
    engine.dispose()
    publish(notes, settings.model_copy(update={"collection": "notes"}), tiny_encoder_dir)
    with live_server(create_app(settings)) as url:
        yield url, upload


def test_the_search_page_searches_the_collection_chosen(
    browser: Chrome, paged: tuple[str, Path]
) -> None:
    base_url, _upload = paged
    browser.get(base_url + "/")
    chooser = browser.find_element(By.ID, "collection")
    wait(browser).until(
        EC.presence_of_element_located((By.CSS_SELECTOR, '#collection option[value="notes"]'))
    )
    labels = [o.text for o in chooser.find_elements(By.TAG_NAME, "option")]
    assert labels == ["default", "notes (3 documents)"]
    browser.find_element(By.CSS_SELECTOR, '#collection option[value="notes"]').click()
    browser.find_element(By.ID, "document-id").send_keys("note-astronomy-01")
    shown = search(browser)
    expected = httpx.post(
        base_url + "/collections/notes/similar", json={"document_id": "note-astronomy-01"}
    ).json()
    assert shown == [r["document_id"] for r in expected["results"]]
    assert sorted(shown) == ["note-astronomy-02", "note-astronomy-03"]
    explain = browser.find_element(By.CSS_SELECTOR, "li.result a.explain-json")
    assert "/collections/notes/explain?" in explain.get_attribute("href")
    assert console_errors(browser) == []


def test_upload_a_pdf_then_explain_with_page_numbers(
    browser: Chrome, paged: tuple[str, Path]
) -> None:
    """Issue 16: a PDF chosen on the search page is posted as a file; its results and the
    explanation of a PDF result say which page each passage is on."""
    base_url, upload = paged
    browser.get(base_url + "/")
    browser.find_element(By.ID, "file").send_keys(str(upload))
    assert not browser.find_element(By.ID, "text").is_enabled()  # the file is the query
    shown = search(browser)
    expected = httpx.post(
        base_url + "/similar",
        files={"file": (upload.name, upload.read_bytes(), "application/pdf")},
        data={"top_k": "10"},
    ).json()
    assert shown == [r["document_id"] for r in expected["results"]]
    assert "coffee-print" in shown
    pages = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "li.result .match .page")]
    assert pages and all(p.startswith("page ") for p in pages)
    browser.save_screenshot(str(ARTIFACTS / "search-pdf.png"))
    assert console_errors(browser) == []

    browser.find_element(
        By.CSS_SELECTOR, 'li.result[data-document-id="coffee-print"] a.explain-html'
    ).click()
    wait(browser).until(
        EC.presence_of_element_located((By.CSS_SELECTOR, 'canvas[data-map="paragraph"]'))
    )
    assert console_errors(browser) == []
    data = browser.execute_script(
        "return JSON.parse(document.getElementById('explain-data').textContent);"
    )
    for side, box in (("source", "source-text"), ("target", "target-text")):
        marks = browser.find_elements(By.CSS_SELECTOR, f"#{box} .page-mark")
        first_of_each = [
            p
            for k, p in enumerate(data[side]["pages"])
            if k == 0 or p != data[side]["pages"][k - 1]
        ]
        assert [int(m.get_attribute("data-page")) for m in marks] == first_of_each
        assert len(first_of_each) >= 2 and marks[0].text == f"page {first_of_each[0]}"
    pair = browser.find_element(By.CSS_SELECTOR, "#pairs li")
    top = data["top_pairs"][0]
    assert f"[page {top['source_page']} ↔ page {top['target_page']}]" in pair.text
    i, j = top["source_paragraph"], top["target_paragraph"]
    click_cell(browser, "paragraph", i, j)
    selection = browser.find_element(By.ID, "selection").text
    assert f"(page {data['source']['pages'][i]})" in selection
    assert f"(page {data['target']['pages'][j]})" in selection
    browser.save_screenshot(str(ARTIFACTS / "explain-pdf.png"))
    assert console_errors(browser) == []


def test_shared_passages_are_marked_in_both_texts(browser: Chrome, base_url: str) -> None:
    quoted = (
        "Coffea canephora sold under the name robusta supplies most of the remainder\nand is "
        "favoured for instant products"
    )
    posted = {"title": "Notes", "text": f"The manual says {quoted}. We agree."}
    browser.get(base_url + "/")  # the search page shows each result's shared passages
    box = browser.find_element(By.ID, "text")
    browser.execute_script("arguments[0].value = arguments[1];", box, posted["text"])
    top_k = browser.find_element(By.ID, "top-k")
    top_k.clear()
    top_k.send_keys("50")
    assert "coffee-02" in search(browser)
    quotes = browser.find_elements(
        By.CSS_SELECTOR, 'li.result[data-document-id="coffee-02"] .quotes mark'
    )
    assert quotes and quotes[0].text == quoted  # its line break kept
    browser.save_screenshot(str(ARTIFACTS / "search_passages.png"))
    ranked = httpx.post(base_url + "/similar", json={"document": posted, "top_k": 1}).json()
    browser.get(f"{base_url}/explain?source={ranked['query_id']}&target=coffee-02&format=html")
    wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, "mark.qt")))
    assert console_errors(browser) == []
    data = browser.execute_script(
        "return JSON.parse(document.getElementById('explain-data').textContent);"
    )
    assert data["passages"] and data["passages"][0]["words"] == 18
    items = browser.find_elements(By.CSS_SELECTOR, "#passages li")
    assert len(items) == len(data["passages"])
    for i, passage in enumerate(data["passages"]):  # each marked, exactly, in both texts
        for side in ("source", "target"):
            marked = browser.execute_script(
                """return Array.from(document.querySelectorAll(
                    `#${arguments[0]}-text mark.qt[data-passage="${arguments[1]}"]`))
                    .map(function (e) { return e.textContent; }).join('');""",
                side,
                i,
            )
            assert marked == data[side]["text"][passage[f"{side}_start"] : passage[f"{side}_end"]]
    # the texts read as before: marks add no characters
    for side in ("source", "target"):
        shown = browser.execute_script(
            """const box = document.getElementById(arguments[0] + '-text').cloneNode(true);
            box.querySelectorAll('.page-mark').forEach(function (e) { e.remove(); });
            return box.textContent;""",
            side,
        )
        assert shown == data[side]["text"]
    items[0].click()
    lit = browser.find_elements(By.CSS_SELECTOR, "mark.qt.on")
    assert {e.get_attribute("data-passage") for e in lit} == {"0"}
    assert visible_in_its_column(browser, "s-q-0") and visible_in_its_column(browser, "t-q-0")
    browser.save_screenshot(str(ARTIFACTS / "explain_passages.png"))
    assert console_errors(browser) == []
