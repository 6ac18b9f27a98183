"""`docsim train adapt` on a lent GPU machine that has torch and transformers but not docsim's
SQL and web packages, and a 64 MiB limit on what travels each way (issue 30's GPU lever).

    # here (CPU): the corpus split as `docsim train` splits it, and the base as float16
    python benchmarks/device_train.py prep --corpus CORPUS --out W/a.json.xz [--base-out W/b16]
    # there: restore the base, train, pack the result as int8 differences from the base
    python benchmarks/device_train.py restore --base16 W/b16 --out BASE_DIR
    python benchmarks/device_train.py train --docs W/a.json.xz --base BASE_DIR \\
        --out ADAPTED_DIR --pairs opening [--steps 2000] [--eval-every 250] [--seed 0] \\
        [--seconds 330]
    python benchmarks/device_train.py pack --trained ADAPTED_DIR --base BASE_DIR \\
        --out $OUT --name aila
    # here: the exact float32 base plus the differences, an encoder for `docsim index`
    python benchmarks/device_train.py unpack --packed DIR --name aila --out ADAPTED

`train` runs `indexer.train.run_training` with what `docsim train adapt` would use for
`--max-tokens 256 --patience 4` (learning rate 1e-5, 10% warmup, held-out early stopping).
`--seconds` bounds the training's wall time (as `docsim train --max-minutes` does): past it,
training stops, and the best evaluated model is kept. The trained weights travel back as
int8 row-scaled differences from the float16-rounded base (half the bytes of float16
weights), which `unpack` adds to the exact float32 base; `pack` prints the largest rounding
error of the differences.
"""

from __future__ import annotations

import argparse
import json
import logging
import lzma
import shutil
import tarfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

logger = logging.getLogger("benchmarks.device_train")
WEIGHTS = "model.safetensors"
HALF_WEIGHTS = "model16.safetensors"


def prep(corpus: Path, out: Path, base_out: Path | None) -> None:
    from docsim.indexer.choices import CorpusFormat
    from docsim.indexer.settings import get_settings
    from docsim.indexer.text.sentences import load_splitter
    from docsim.indexer.train import training_documents
    from docsim.models.encoders.backbone import base_directory

    splitter = load_splitter(get_settings().punkt_params)
    docs = training_documents(corpus, CorpusFormat.auto, splitter, None)
    with lzma.open(out, "wt", preset=9) as f:
        json.dump([{"doc_id": d.doc_id, "sections": d.sections} for d in docs], f)
    logger.info("%d documents, %.1f MB", len(docs), out.stat().st_size / 1e6)
    if base_out is not None:
        base = base_directory("minilm")
        shutil.copytree(base, base_out, ignore=shutil.ignore_patterns(WEIGHTS), dirs_exist_ok=True)
        weights = load_file(base / WEIGHTS)
        save_file(
            {k: v.half() if v.is_floating_point() else v for k, v in weights.items()},
            base_out / HALF_WEIGHTS,
        )


def restore(base16: Path, out: Path) -> None:
    shutil.copytree(base16, out, ignore=shutil.ignore_patterns(HALF_WEIGHTS), dirs_exist_ok=True)
    weights = load_file(base16 / HALF_WEIGHTS)
    save_file(
        {k: v.float() if v.is_floating_point() else v for k, v in weights.items()}, out / WEIGHTS
    )


def train(args: argparse.Namespace) -> None:
    from docsim.indexer.train import run_training
    from docsim.models.inference.precision import resolve_device
    from docsim.models.training.data import TrainingDocument
    from docsim.models.training.loop import TrainConfig

    with lzma.open(args.docs, "rt") as f:
        docs = [TrainingDocument(d["doc_id"], d["sections"]) for d in json.load(f)]
    config = TrainConfig(
        kind="adapt",
        base=str(args.base),
        steps=args.steps,
        batch_size=args.batch_size,
        learning_rate=1e-5,
        warmup_steps=round(0.1 * args.steps),
        seed=args.seed,
        eval_every=args.eval_every,
        patience=4,
        checkpoint_every=10**9,  # no checkpoints: the lease ends with the machine
        max_tokens=256,
        options={"pairs": args.pairs, "temperature": 0.05},
    )
    result = run_training(
        "adapt",
        docs,
        args.out,
        config,
        device=resolve_device("auto"),
        resume=False,
        force=True,
        show_progress=False,
        max_seconds=args.seconds,
    )
    print(
        json.dumps(
            {
                "pairs": args.pairs,
                "seed": args.seed,
                "steps": result.steps,
                "best_step": result.best_step,
                "seconds": round(result.seconds, 1),
                "evaluations": result.evaluations,
            }
        )
    )


def pack(trained: Path, base: Path, out: Path, name: str) -> None:
    """The trained weights as differences from `base`: int8 codes with a float32 scale per
    row for matrices, float32 for vectors; in two files of about equal size."""
    weights, start = load_file(trained / WEIGHTS), load_file(base / WEIGHTS)
    parts: list[dict[str, torch.Tensor]] = [{}, {}]
    sizes, worst = [0, 0], 0.0
    for key, value in sorted(weights.items()):
        packed: dict[str, torch.Tensor]
        if key not in start or not value.is_floating_point():
            packed = {f"{key}.raw": value}
        elif value.dim() == 2:
            difference = value.float() - start[key].float()  # (rows, columns)
            scale = difference.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / 127  # (rows, 1)
            codes = torch.round(difference / scale).clamp(-127, 127).to(torch.int8)
            worst = max(worst, float((codes.float() * scale - difference).abs().max()))
            packed = {f"{key}.codes": codes, f"{key}.scale": scale}
        else:
            packed = {f"{key}.difference": value.float() - start[key].float()}
        smaller = sizes.index(min(sizes))
        parts[smaller].update(packed)
        sizes[smaller] += sum(t.numel() * t.element_size() for t in packed.values())
    for i, part in enumerate(parts):
        save_file(part, out / f"{name}_part{i}.safetensors")
    with tarfile.open(out / f"{name}_files.tgz", "w:gz") as tar:
        for path in trained.iterdir():
            if path.is_file() and path.name != WEIGHTS:
                tar.add(path, arcname=path.name)
    print(json.dumps({"packed": name, "bytes": sizes, "largest_error": worst}))


def unpack(packed: Path, name: str, base: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(packed / f"{name}_files.tgz") as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later
            tar.extractall(out, filter="data")
        else:
            tar.extractall(out)  # noqa: S202 (our own archive)
    start = load_file(base / WEIGHTS)
    parts: dict[str, torch.Tensor] = {}
    for i in (0, 1):
        parts.update(load_file(packed / f"{name}_part{i}.safetensors"))
    weights = {}
    for stored, value in parts.items():
        key, kind = stored.rsplit(".", 1)
        if kind == "raw":
            weights[key] = value
        elif kind == "codes":
            weights[key] = start[key].float() + value.float() * parts[f"{key}.scale"]
        elif kind == "difference":
            weights[key] = start[key].float() + value
    save_file(weights, out / WEIGHTS, metadata={"format": "pt"})


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    steps = parser.add_subparsers(dest="step", required=True)
    p = steps.add_parser("prep")
    p.add_argument("--corpus", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--base-out", type=Path)
    p = steps.add_parser("restore")
    p.add_argument("--base16", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p = steps.add_parser("train")
    p.add_argument("--docs", type=Path, required=True)
    p.add_argument("--base", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--pairs", required=True)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--seconds", type=float, default=None)
    p = steps.add_parser("pack")
    p.add_argument("--trained", type=Path, required=True)
    p.add_argument("--base", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--name", required=True)
    p = steps.add_parser("unpack")
    p.add_argument("--packed", type=Path, required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--base", default="minilm", help="minilm or a model directory")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.step == "prep":
        prep(args.corpus, args.out, args.base_out)
    elif args.step == "restore":
        restore(args.base16, args.out)
    elif args.step == "train":
        train(args)
    elif args.step == "pack":
        pack(args.trained, args.base, args.out, args.name)
    else:
        from docsim.models.encoders.backbone import base_directory

        unpack(args.packed, args.name, base_directory(args.base), args.out)


if __name__ == "__main__":
    main()
