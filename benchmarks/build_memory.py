"""Peak resident memory of `docsim index` as the corpus grows: the corpus once, then several
times over under other ids, each built from scratch, alone, in a fresh data directory.

    python benchmarks/build_memory.py [--corpus ../shared/data/aila2019/casedocs]
        [--factors 1 3] [--encoder minilm] [--label NAME]
        [--out benchmarks/results/build_memory.json]

Each build runs `docsim index` in a child process with the default settings (SQLite, the
int8 export made afresh, late chunking); only `DOCSIM_DATA_DIR` and, when given,
`DOCSIM_ENCODER__NAME` are set. A sampler reads the build's resident set (RSS) every 0.2 s,
plus the unique memory (USS) of any process it starts (helpers forked from it share its pages);
the build's stderr (its log lines and progress bars) tells which stage each sample falls in:
`split`, `export` (the int8 export and its calibration), `encode`, `index` (the vector files,
after the last block) and `publish`. The copies of the corpus are hard links (copies where
links fail) named `<stem>~<k><suffix>`, so that each document is indexed `factor` times under
distinct ids.

Reported per factor: wall seconds, sentences, sentences per second of encoding, the peak RSS
in all and per stage, and the size of the data directory; then each factor's peak against
the first factor's. A build whose memory does not grow with the corpus has ratios near 1.

`--encoder` takes any encoder name or directory: the growth with the corpus comes from what a
build holds per document and per vector, not from the model, so a shallow copy of the default
model (the same width, tokenizer and pooling, fewer layers) measures it in a fraction of the
time; the result records the encoder used.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from record import save

logger = logging.getLogger("benchmarks.build_memory")

GIB = 2**30
# the first stderr marker seen in a chunk of output moves the build to that stage
STAGE_MARKERS = (
    ("split:", "split"),
    ("Exporting", "export"),
    ("encode:", "encode"),
    ("encode: 100%", "index"),
    ("Published version", "publish"),
)


def corpus_times(source: Path, factor: int, into: Path) -> Path:
    """`source`'s files `factor` times over in `into` (hard links, or copies), the k-th copy
    of `name.ext` named `name~k.ext`."""
    into.mkdir(parents=True)
    for path in sorted(source.iterdir()):
        if not path.is_file():
            continue
        for k in range(factor):
            target = into / (path.name if k == 0 else f"{path.stem}~{k}{path.suffix}")
            try:
                os.link(path, target)
            except OSError:
                shutil.copyfile(path, target)
    return into


class StageClock:
    """The build's current stage, read from its stderr as it comes."""

    def __init__(self) -> None:
        self.stage = "start"
        self.log: list[str] = []

    def follow(self, stream: object) -> None:
        tail = ""
        for raw in iter(lambda: stream.read1(4096), b""):  # type: ignore[attr-defined]
            text = raw.decode(errors="replace")
            self.log.append(text)
            window = tail + text
            for marker, stage in STAGE_MARKERS:
                if marker in window and _later(stage, self.stage):
                    self.stage = stage
            tail = window[-64:]


def _later(stage: str, current: str) -> bool:
    order = ["start"] + [s for _, s in STAGE_MARKERS]
    return order.index(stage) > order.index(current)


def tree_memory(process: psutil.Process) -> int:
    """The resident bytes of `process` (RSS), plus the unique bytes (USS) of its children: a
    helper process forked from the build shares the build's pages, which its RSS would count
    a second time."""
    total = process.memory_info().rss
    for child in process.children(recursive=True):
        try:
            total += child.memory_full_info().uss
        except psutil.Error:
            pass
    return total


def measure_build(corpus: Path, encoder: str | None, scratch: Path) -> dict[str, object]:
    data_dir = scratch / "data"
    env = {**os.environ, "DOCSIM_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1"}
    env["TOKENIZERS_PARALLELISM"] = "false"
    if encoder:
        env["DOCSIM_ENCODER__NAME"] = encoder
    docsim = Path(sys.executable).with_name("docsim")
    started = time.perf_counter()
    child = subprocess.Popen(
        [str(docsim), "index", str(corpus)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    clock = StageClock()
    reader = threading.Thread(target=clock.follow, args=(child.stderr,), daemon=True)
    reader.start()
    process = psutil.Process(child.pid)
    peaks: dict[str, int] = {}
    while child.poll() is None:
        rss = tree_memory(process)
        peaks[clock.stage] = max(peaks.get(clock.stage, 0), rss)
        time.sleep(0.2)
    wall = time.perf_counter() - started
    reader.join(timeout=10)
    if child.returncode != 0:
        log = "".join(clock.log)[-3000:]
        raise RuntimeError(f"docsim index failed ({child.returncode}):\n{log}")
    manifest = json.loads(
        subprocess.run(
            [str(docsim), "info"], env=env, capture_output=True, check=True, text=True
        ).stdout
    )
    build = manifest["manifest"].get("build", {})
    size = sum(p.stat().st_size for p in data_dir.rglob("*") if p.is_file())
    return {
        "wall_s": round(wall, 1),
        "documents": manifest["counts"]["document"],
        "sentences": manifest["counts"]["sentence"],
        "encode_s": build.get("encode_seconds"),
        "sentences_per_s": build.get("sentences_per_second"),
        "peak_rss_gib": round(max(peaks.values()) / GIB, 3),
        "peak_rss_gib_by_stage": {s: round(v / GIB, 3) for s, v in peaks.items()},
        "data_dir_gib": round(size / GIB, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = Path(__file__).resolve().parents[1]
    parser.add_argument(
        "--corpus", type=Path, default=root.parent / "shared/data/aila2019/casedocs"
    )
    parser.add_argument("--factors", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--encoder", default=None, help="encoder name or directory")
    parser.add_argument("--label", default="", help="a name for this run in the results")
    parser.add_argument("--out", type=Path, default=root / "benchmarks/results/build_memory.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    runs = []
    for factor in args.factors:
        with tempfile.TemporaryDirectory(prefix="build-memory-", dir=root.parent) as tmp:
            corpus = corpus_times(args.corpus, factor, Path(tmp) / "corpus")
            logger.info("Building %s x%d", args.corpus, factor)
            run = {"factor": factor, **measure_build(corpus, args.encoder, Path(tmp))}
            logger.info("x%d: %s", factor, json.dumps(run))
            runs.append(run)
    first = runs[0]["peak_rss_gib"]
    for run in runs:
        run["peak_vs_first"] = round(float(run["peak_rss_gib"]) / float(first), 3)  # type: ignore[arg-type]
    result = {
        "label": args.label,
        "corpus": str(args.corpus),
        "encoder": args.encoder or "default",
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "runs": runs,
    }
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, result)


if __name__ == "__main__":
    main()
