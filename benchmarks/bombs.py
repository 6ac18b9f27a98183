"""Hostile files posted to a real `docsim serve` beside ordinary clients: what each answer is,
how fast, what the server's memory does, and how much the ordinary clients slow down.

    python benchmarks/bombs.py --data-dir DIR [--clients 8] [--seconds 40] [--senders 4]
        [--port 8791] [--out benchmarks/results/bombs.json]

Starts `docsim serve` on DIR (default limits, no job worker) and posts each file once alone.
Then it runs phases of `--seconds` each: `--clients` ordinary clients alone
(`abuse.ordinary`: a short posted text and an indexed document by id, in turn), then, for
each kind of file in turn, the same clients beside `--senders` senders of that file, each
posting it to /similar as an upload, over and over. The kinds, at issue 68's sizes: a PDF
whose one FlateDecode stream inflates to 1 GiB (about 1 MB sent), a Word file of 255 MB of
document.xml padded with 2.5 MB stored to an ordinary ratio, a Word file holding a zip whose
member inflates to 1 GiB, and a PDF of 5,001 pages (one page's content shared by all).
Reported: each kind's answers by status with their p50/p95/max latency, the server's peak
resident memory in each phase (its processes, every 0.1 s), the ordinary clients' p95 in
each phase and its ratio to the phase without files (the goal: at most 2), and the 5xx
answers of every client (the goal: none).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psutil
from abuse import ordinary, summary
from record import save
from served import docsim_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's tests.utils
from tests.utils import bombs  # noqa: E402

logger = logging.getLogger("benchmarks.bombs")
GIB = 2**30


def hostile_files() -> dict[str, tuple[str, bytes]]:
    """kind -> (file name, content), at the sizes of issue 68's reports."""
    return {
        "pdf_flate_1gib": ("flate.pdf", bombs.pages_pdf([bombs.flate_bomb_page(GIB)])),
        "docx_padded_255mb": ("padded.docx", padded_word(255 * 2**20, 2_500_000)),
        "docx_nested_zip_1gib": (
            "nested.docx",
            bombs.word_file(
                ["A short paragraph."], {"word/embeddings/a.zip": (bombs.nested_archive(GIB), 0)}
            ),
        ),
        "pdf_5001_pages": ("pages.pdf", bombs.shared_content_pdf(5_001, "A line of text. " * 20)),
    }


def padded_word(inflated: int, padding: int) -> bytes:
    paragraph_bytes = len("<w:p><w:r><w:t></w:t></w:r></w:p>") + 3 * 38
    return bombs.padded_word_bomb(inflated // paragraph_bytes, padding)


class PeakMemory:
    """The largest resident set of process `pid` and its children together, sampled every
    0.1 s while running."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self.samples, self._stop = pid, 0, 0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        server = psutil.Process(self.pid)
        while not self._stop.is_set():
            processes = [server]
            with contextlib.suppress(psutil.Error):
                processes += server.children(recursive=True)
            resident = 0
            for process in processes:
                with contextlib.suppress(psutil.Error):
                    resident += process.memory_info().rss
            self.peak = max(self.peak, resident)
            self.samples += 1
            time.sleep(0.1)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


async def sender(
    client: httpx.AsyncClient, kind: str, file: tuple[str, bytes], stop: float, seen: dict
) -> None:
    while time.monotonic() < stop:
        started = time.perf_counter()
        answer = await client.post("/similar", files={"file": file}, timeout=600)
        seen[kind]["latencies"].append(time.perf_counter() - started)
        seen[kind]["statuses"][answer.status_code] += 1
        seen[kind]["details"].add(str(answer.json().get("detail"))[:160])


async def phase(url: str, args: argparse.Namespace, files: dict | None, texts: dict) -> dict:
    stop = time.monotonic() + args.seconds
    seen: dict[str, Any] = {"latencies": [], "statuses": Counter()}
    hostile = {k: {"latencies": [], "statuses": Counter(), "details": set()} for k in files or {}}
    limits = httpx.Limits(max_connections=args.clients + 4 * args.senders + 2)
    async with httpx.AsyncClient(base_url=url, limits=limits) as client:
        tasks = [
            ordinary(client, texts["ids"], texts["texts"], stop, seen) for _ in range(args.clients)
        ]
        for kind, file in (files or {}).items():
            tasks += [sender(client, kind, file, stop, hostile) for _ in range(args.senders)]
        await asyncio.gather(*tasks)
    return {
        "ordinary": {**summary(seen["latencies"]), "statuses": dict(seen["statuses"])},
        "hostile": {
            kind: {
                **summary(found["latencies"]),
                "statuses": dict(found["statuses"]),
                "details": sorted(found["details"]),
            }
            for kind, found in hostile.items()
        },
    }


def one_answer(url: str, file: tuple[str, bytes]) -> dict[str, Any]:
    """One file posted with nothing else running: its status, seconds and message."""
    started = time.perf_counter()
    with httpx.Client(base_url=url, timeout=600) as client:
        answer = client.post("/similar", files={"file": file})
    return {
        "status": answer.status_code,
        "seconds": round(time.perf_counter() - started, 2),
        "detail": str(answer.json().get("detail"))[:200],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--senders", type=int, default=4, help="senders of each kind of file")
    parser.add_argument("--seconds", type=float, default=40)
    parser.add_argument("--port", type=int, default=8791)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/bombs.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    files = hostile_files()
    sizes = {kind: len(content) for kind, (_name, content) in files.items()}
    logger.info("files built: %s", sizes)
    env = {**os.environ, "DOCSIM_DATA_DIR": str(args.data_dir)}
    env["DOCSIM_JOBS__EMBEDDED_WORKER"] = "false"
    url = f"http://127.0.0.1:{args.port}"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"clients": args.clients, "senders_per_kind": args.senders}
    report["file_bytes"], report["phases"] = sizes, {}
    with docsim_server(env, args.port, args.out.with_suffix(".server.log")) as server:
        with httpx.Client(base_url=url, timeout=60) as client:
            query = {"document": {"text": "The court held. The appeal."}, "top_k": 50}
            ids = [h["document_id"] for h in client.post("/similar", json=query).json()["results"]]
            texts = [client.get(f"/documents/{i}").json()["text"][:3000] for i in ids[:20]]
        corpus = {"ids": ids, "texts": texts}
        report["each_alone"] = {kind: one_answer(url, file) for kind, file in files.items()}
        phases = [("alone", None)] + [(kind, {kind: files[kind]}) for kind in files]
        for name, hostile in phases:
            with PeakMemory(server.pid) as memory:
                report["phases"][name] = asyncio.run(phase(url, args, hostile, corpus))
            report["phases"][name]["server_peak_rss_gib"] = round(memory.peak / GIB, 2)
            report["phases"][name]["memory_samples"] = memory.samples
            logger.info("%s: %s", name, report["phases"][name])
    alone = report["phases"]["alone"]["ordinary"]["p95_ms"]
    report["p95_ratio"] = {
        kind: round(report["phases"][kind]["ordinary"]["p95_ms"] / alone, 2) for kind in files
    }
    report["server_errors"] = sum(
        n
        for answers in report["phases"].values()
        for who in [answers["ordinary"], *answers["hostile"].values()]
        for status, n in who["statuses"].items()
        if int(status) >= 500
    )
    print(json.dumps(report, indent=1))
    save(args.out, report)


if __name__ == "__main__":
    main()
