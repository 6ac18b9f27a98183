"""The Python examples of the README and of docs/python.md run as written, against a live
server and a data directory holding the sample corpus."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from docsim.app.core.settings import ServiceSettings
from docsim.app.main import create_app
from tests.app.browser import live_server

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_URL = "http://127.0.0.1:8000"


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)


@pytest.fixture(scope="module")
def base_url(indexed_settings: ServiceSettings):  # noqa: ANN201 - an iterator of the URL
    with live_server(create_app(indexed_settings)) as url:
        yield url


@pytest.mark.parametrize(("page", "block"), [("README.md", 0), ("docs/python.md", 0)])
def test_the_http_examples_run(base_url: str, page: str, block: int) -> None:
    code = python_blocks(ROOT / page)[block]
    assert DEFAULT_URL in code
    namespace: dict = {}
    exec(compile(code.replace(DEFAULT_URL, base_url), page, "exec"), namespace)  # noqa: S102
    hits = namespace.get("best") or namespace["hits"].results
    assert hits and all(hit.document_id != "baking-01" for hit in hits)
    why = namespace["why"]  # an `Explanation`
    assert isinstance(why.score, float) and why.section_matrix and why.paragraph_matrix.raw


def test_the_in_process_example_runs_and_ranks_as_the_service(
    indexed_settings: ServiceSettings, base_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = "\n".join(python_blocks(ROOT / "docs/python.md")[2:4])  # search, then a filter
    line = 'settings = QuerySettings(data_dir="docsim-data")'
    assert line in code
    exec(
        compile(code.replace(line, "settings = SETTINGS"), "python.md", "exec"),  # noqa: S102
        {"SETTINGS": indexed_settings},
    )
    printed = [row.split() for row in capsys.readouterr().out.splitlines()]
    import httpx

    served = httpx.post(
        f"{base_url}/similar", json={"document_id": "baking-01", "top_k": 5, "method": "fused"}
    ).json()["results"]
    assert [(f"{h['score']:.3f}", h["document_id"]) for h in served] == [tuple(p) for p in printed]


def test_the_collections_example_runs(
    fresh_settings, tiny_encoder_dir: Path, sample_corpus: Path, tmp_path: Path
) -> None:
    """docs/python.md's collection example, on a server whose key is the example's, with the
    example's corpus path and document id made real."""
    code = python_blocks(ROOT / "docs/python.md")[1]
    settings = fresh_settings(api_key="the-servers-own-key")
    settings = settings.model_copy(
        update={"encoder": settings.encoder.model_copy(update={"name": str(tiny_encoder_dir)})}
    )
    papers = tmp_path / "papers"
    papers.mkdir()
    for path in sorted(sample_corpus.glob("*.md"))[:8]:
        (papers / path.name.replace("astronomy-01", "P17")).write_text(path.read_text())
    namespace: dict = {}
    with live_server(create_app(settings)) as url:
        real = code.replace(DEFAULT_URL, url).replace("/path/to/papers", str(papers))
        exec(compile(real, "python.md", "exec"), namespace)  # noqa: S102
    hits = namespace["hits"]
    assert hits.method == "sdr" and len(hits) == 5  # the collection's own default method
    assert all(hit.document_id != "P17" for hit in hits)
