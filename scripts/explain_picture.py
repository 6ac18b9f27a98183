"""A picture of the explanation page for the docs: a query posted to a data directory's
service, one result's explanation opened in headless chromium, its longest shared passage
selected (marked and scrolled to in both texts), and the page saved as a PNG.

    python scripts/explain_picture.py --data-dir DATA_DIR --queries QUERIES.jsonl --qid QID \\
        --target DOCUMENT_ID --out docs/assets/explain-shared-passage.png
        [--exclude ID --corpus CORPUS_DIR]

The query is the `text` of the JSONL line whose `qid` is QID, ranked with the service's
defaults and `shared_passages: 3`; the target must be among the first 100 results (the
query's own judgment, `--exclude`, is left out by asking for the corpus folder's other
files as candidates). The
script prints the target's rank and shared passages.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import threading
import time
from pathlib import Path

import httpx
import uvicorn
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from docsim.app.core.settings import ServiceSettings
from docsim.app.main import create_app


def serve(settings: ServiceSettings) -> tuple[uvicorn.Server, str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 600
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the service did not start")
        time.sleep(0.1)
    return server, f"http://127.0.0.1:{port}"


def browser() -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--window-size=1500,950"):  # fmt: skip
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--queries", type=Path, required=True)
    parser.add_argument("--qid", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--exclude", default=None)
    parser.add_argument("--corpus", type=Path, help="The corpus folder (with --exclude).")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    lines = args.queries.read_text(encoding="utf-8").splitlines()
    text = next(json.loads(x)["text"] for x in lines if json.loads(x)["qid"] == args.qid)
    server, url = serve(ServiceSettings(data_dir=args.data_dir))
    try:
        request: dict = {"document": {"title": args.qid, "text": text}, "top_k": 100,
                         "shared_passages": 3}  # fmt: skip
        if args.exclude:  # every other document of the corpus folder, as candidates
            ids = sorted(p.stem for p in args.corpus.iterdir())
            request["candidates"] = [d for d in ids if d != args.exclude]
        ranked = httpx.post(f"{url}/similar", json=request, timeout=600).json()
        hit = next(r for r in ranked["results"] if r["document_id"] == args.target)
        print(
            json.dumps({"rank": hit["rank"], "shared_passages": hit["shared_passages"]}, indent=1)
        )
        session = browser()
        try:
            session.get(
                f"{url}/explain?source={ranked['query_id']}&target={args.target}&format=html"
            )
            WebDriverWait(session, 120).until(
                EC.presence_of_element_located((By.CSS_SELECTOR, "#passages li"))
            )
            session.execute_script("window.docsimExplain.showPassage(0);")
            time.sleep(0.5)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            session.save_screenshot(str(args.out))
        finally:
            session.quit()
    finally:
        server.should_exit = True


if __name__ == "__main__":
    main()
