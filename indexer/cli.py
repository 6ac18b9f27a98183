"""The `docsim` command line: `index`, `info`, `reindex`, `worker`, `train-splitter`."""

from __future__ import annotations

import json
import logging
import random
import signal
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from indexer.config import Settings, get_settings, load_configured_encoder
from indexer.corpus import SAMPLE_CORPUS, CorpusError, CorpusFormat, Skipped, read_corpus
from indexer.db import DatabaseError, make_engine, upgrade
from indexer.engines import EngineError, EngineName, make_encode_engine
from indexer.jobs import (
    SUCCEEDED,
    JobNotFoundError,
    JobStateError,
    claim_job,
    create_job,
    get_job,
    retry_job,
    running_job,
)
from indexer.logs import configure_logging
from indexer.pipeline import IndexBuildError, build_index, prepare_data_dir
from indexer.reader import IndexMismatchError
from indexer.retention import collect_garbage
from indexer.sentences import DEFAULT_PARAMS, load_splitter, params_to_json, train_params
from indexer.store import NoActiveIndexError, active_version, count_units
from indexer.worker import CURRENT, ReindexParameters, Worker, execute, worker_name
from models.loading import EncoderNotFoundError
from models.precision import resolve_device

logger = logging.getLogger("docsim")
cli = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)

# Errors that are the user's to fix: one line on stderr, exit code 2, no traceback.
USER_ERRORS = (
    CorpusError,
    EngineError,
    IndexBuildError,
    EncoderNotFoundError,
    DatabaseError,
    NoActiveIndexError,
    JobNotFoundError,
    JobStateError,
    IndexMismatchError,
)

EncoderOption = Annotated[
    str | None, typer.Option(help="Built-in encoder name (minilm) or a model directory.")
]
FormatOption = Annotated[CorpusFormat, typer.Option("--format", help="Corpus format.")]
ProgressOption = Annotated[bool, typer.Option(help="Show progress bars.")]

DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Where indexes and the SQLite file live (DOCSIM_DATA_DIR)."),
]


EngineOption = Annotated[
    EngineName,
    typer.Option(
        "--engine",
        help="Where the encode stage runs: `local` (this process) or `ray` (Ray Data; a local "
        "Ray unless DOCSIM_RAY__ADDRESS names a cluster).",
    ),
]


def _fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"docsim: error: {message}", err=True)
    raise typer.Exit(code)


def _settings(data_dir: Path | None) -> Settings:
    settings = get_settings()
    return settings.model_copy(update={"data_dir": data_dir}) if data_dir else settings


def _existing_data_dir(settings: Settings) -> Settings:
    """`settings`, for a command that only reads: it must not create the data directory."""
    if not settings.data_dir.is_dir():
        problem = "is not a directory" if settings.data_dir.exists() else "does not exist"
        _fail(
            f"data directory {str(settings.data_dir)!r} {problem}: "
            "run `docsim index` first, or pass --data-dir"
        )
    return settings


def _setup_logging(verbose: bool) -> None:
    configure_logging(get_settings().log, verbose)


def _raise_interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@cli.callback()
def main_options(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """docsim: which documents in my collection are most like this one, and why?"""
    _setup_logging(verbose)
    signal.signal(signal.SIGTERM, _raise_interrupt)


@cli.command()
def index(
    path: Annotated[
        Path | None,
        typer.Argument(
            help="Corpus: a folder of .txt/.md files, a JSONL file or an AILA folder. "
            "Default: the sample corpus shipped with docsim."
        ),
    ] = None,
    encoder: EncoderOption = None,
    fmt: FormatOption = CorpusFormat.auto,
    data_dir: DataDir = None,
    progress: ProgressOption = True,
    encode_engine: EngineOption = EngineName.local,
) -> None:
    """Build a new index version of a corpus and publish it atomically."""
    settings = _settings(data_dir)
    corpus = path or SAMPLE_CORPUS
    if path is None:
        logger.info("No corpus given: indexing the shipped sample corpus %s", corpus)
    try:
        if settings.db.auto_migrate:
            upgrade(settings.database_url)
        model = load_configured_encoder(settings, encoder)
        engine = make_engine(settings.database_url)
        result = build_index(
            corpus,
            settings=settings,
            engine=engine,
            encoder=model,
            splitter=load_splitter(settings.punkt_params),
            fmt=fmt,
            show_progress=progress,
            encode_engine=make_encode_engine(
                encode_engine.value, settings, model, settings.index.block_documents
            ),
        )
    except USER_ERRORS as error:
        _fail(str(error))
    except KeyboardInterrupt:
        _fail("interrupted: nothing was published and the active version is unchanged", code=130)
    retired = collect_garbage(  # retention after every publish, as the worker does
        engine,
        prepare_data_dir(settings.data_dir),
        keep_versions=settings.jobs.keep_versions,
        grace_seconds=settings.jobs.retire_grace_seconds,
    )
    typer.echo(
        json.dumps(
            {
                "version_id": result.version_id,
                "path": str(result.path),
                "counts": result.manifest["counts"],
                "skipped": len(result.skipped),
                "retired": retired,
            },
            indent=2,
        )
    )


@cli.command()
def info(data_dir: DataDir = None) -> None:
    """Print the active version's manifest and its counts per level as JSON."""
    settings = _existing_data_dir(_settings(data_dir))
    try:
        if settings.db.auto_migrate:
            upgrade(settings.database_url)
        engine = make_engine(settings.database_url)
        version = active_version(engine)
        counts = count_units(engine, version.version_id)
    except USER_ERRORS as error:
        _fail(str(error))
    typer.echo(
        json.dumps(
            {
                "version_id": version.version_id,
                "path": version.path,
                "counts": counts,
                "manifest": version.manifest,
            },
            indent=2,
            sort_keys=True,
        )
    )


@cli.command("train-splitter")
def train_splitter(
    corpora: Annotated[list[Path], typer.Argument(help="Corpora to learn from (any format).")],
    out: Annotated[
        Path, typer.Option(help="Where to write the Punkt parameters (JSON).")
    ] = DEFAULT_PARAMS,
    max_documents: Annotated[int, typer.Option(help="Documents sampled per corpus.")] = 300,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 0,
) -> None:
    """Train Punkt sentence-splitting parameters offline on your own corpora."""
    texts: list[str] = []
    try:
        for corpus in corpora:
            docs = [d.text for d in read_corpus(corpus) if not isinstance(d, Skipped)]
            random.Random(seed).shuffle(docs)
            texts.extend(docs[:max_documents])
    except CorpusError as error:
        _fail(str(error))
    logger.info("Training Punkt on %d documents", len(texts))
    out.write_text(params_to_json(train_params(texts)), encoding="utf-8")
    logger.info("Wrote %s", out)


@cli.command()
def evaluate(
    queries: Annotated[Path, typer.Option(help="AILA `QID||text` lines or JSONL queries.")],
    qrels: Annotated[Path, typer.Option(help="TREC qrels (graded relevance allowed).")],
    pools: Annotated[
        Path | None, typer.Option(help="JSON {qid: [candidate ids]}: re-rank each pool.")
    ] = None,
    method: Annotated[
        list[str] | None,
        typer.Option(help="sdr, sdr-raw (no z-score), document, bm25, hybrid; repeat to compare."),
    ] = None,
    run_out: Annotated[Path | None, typer.Option(help="TREC run file (one per method).")] = None,
    out: Annotated[Path, typer.Option(help="Per-query and mean metrics (JSON).")] = Path(
        "evaluation.json"
    ),
    depth: Annotated[int, typer.Option(help="Documents ranked per query.")] = 1000,
    min_rel: Annotated[
        int, typer.Option(help="Lowest grade that counts as relevant for MAP/P/MRR/R.")
    ] = 1,
    query_field: Annotated[str, typer.Option(help="JSONL field holding the query text.")] = "text",
    sdr_metrics: Annotated[bool, typer.Option(help="Also report SDR's MPR and HR@10/100.")] = False,
    data_dir: DataDir = None,
) -> None:
    """Evaluate rankings of the active index against relevance judgments."""
    import ir_measures

    from indexer.evaluate import (
        MethodSpec,
        mean_metrics,
        paired_tests,
        read_pools,
        read_queries,
        run_queries,
        score_runs,
        warn_unmatched_judgments,
        write_trec_run,
    )
    from indexer.search import open_searcher

    settings = _existing_data_dir(_settings(data_dir))
    try:
        specs = [MethodSpec.parse(m) for m in (method or ["sdr"])]
        query_list = read_queries(queries, query_field)
        judgments = list(ir_measures.read_trec_qrels(str(qrels)))
        pool_map = read_pools(pools) if pools else None
        if settings.db.auto_migrate:  # a database from an older docsim gets its new tables
            upgrade(settings.database_url)
        searcher = open_searcher(settings, make_engine(settings.database_url))
    except (*USER_ERRORS, ValueError, OSError) as error:
        _fail(str(error))
    warn_unmatched_judgments(judgments, query_list, searcher.index.external_ids)
    report: dict[str, Any] = {
        "queries": str(queries),
        "qrels": str(qrels),
        "pools": str(pools) if pools else None,
        "index_version": searcher.index.version_id,
        "methods": {},
    }
    per_method = {}
    for spec in specs:
        runs = run_queries(searcher, query_list, spec, pool_map, depth)
        if run_out is not None:
            path = (
                run_out
                if len(specs) == 1
                else run_out.with_name(f"{run_out.stem}.{spec.name}{run_out.suffix}")
            )
            write_trec_run(path, runs, f"docsim-{spec.name}")
        per_query = score_runs(
            runs,
            judgments,
            min_rel=min_rel,
            pools=pool_map,
            sdr_metrics=sdr_metrics,
            n_documents=searcher.index.n_documents,
        )
        per_method[spec.name] = per_query
        report["methods"][spec.name] = {"mean": mean_metrics(per_query), "per_query": per_query}
    if "bm25" in per_method and len(per_method) > 1:
        report["paired_tests_vs_bm25_on_MAP"] = paired_tests(per_method, "bm25")
    out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    names = sorted({m for r in report["methods"].values() for m in r["mean"]})
    typer.echo("method      " + " ".join(f"{n:>9}" for n in names))
    for name, result in report["methods"].items():
        typer.echo(
            f"{name:<11} " + " ".join(f"{result['mean'].get(n, float('nan')):9.4f}" for n in names)
        )
    for name, test in report.get("paired_tests_vs_bm25_on_MAP", {}).items():
        typer.echo(
            f"{name} vs bm25 (MAP): diff {test['mean_difference']:+.4f}, "
            f"t-test p={test['t_test_p']:.3f}, Wilcoxon p={test['wilcoxon_p']:.3f}"
        )
    logger.info("Saved %s", out)


def main() -> None:
    cli()


@cli.command()
def reindex(
    source: Annotated[
        str,
        typer.Argument(
            help="A corpus path, or `current` to re-encode the stored documents of the active "
            "version."
        ),
    ] = CURRENT,
    encoder: EncoderOption = None,
    fmt: FormatOption = CorpusFormat.auto,
    chunk_tokens: Annotated[int | None, typer.Option(help="Tokens per chunk.")] = None,
    block_documents: Annotated[int | None, typer.Option(help="Documents per block.")] = None,
    encode_engine: EngineOption = EngineName.local,
    retry: Annotated[
        int | None,
        typer.Option(help="Run this failed or cancelled job again (resuming its build)."),
    ] = None,
    data_dir: DataDir = None,
    progress: ProgressOption = True,
) -> None:
    """Run a reindex job in the foreground: the same job as POST /jobs/reindex, recorded in
    the jobs table, with a progress bar. A running service swaps to the result."""
    settings = _settings(data_dir)
    try:
        if settings.db.auto_migrate:
            upgrade(settings.database_url)
        engine = make_engine(settings.database_url)
        if retry is not None:
            job = retry_job(engine, retry)
        else:
            if source != CURRENT:
                source = str(Path(source).resolve())
                if not Path(source).exists():
                    raise CorpusError(f"corpus path {source!r} does not exist")
            params = ReindexParameters(
                source=source,
                encoder=encoder,
                format=fmt.value,
                chunk_tokens=chunk_tokens,
                block_documents=block_documents,
                engine=encode_engine.value,
            )
            job = create_job(engine, "reindex", vars(params))
        name = worker_name()
        claimed = claim_job(engine, job.job_id, name)
        if claimed is None:
            running = running_job(engine)
            message = (
                f"job {running.job_id} is running; job {job.job_id} stays queued for a worker"
                if running is not None
                else f"job {job.job_id} could not be claimed"
            )
            _fail(message)
        status = execute(claimed, settings, engine, worker=name, show_progress=progress)
    except USER_ERRORS as error:
        _fail(str(error))
    except KeyboardInterrupt:
        _fail(
            f"interrupted: job {job.job_id} failed and its build was kept; "
            f"`docsim reindex --retry {job.job_id}` resumes it",
            code=130,
        )
    final = get_job(engine, job.job_id)
    typer.echo(
        json.dumps(
            {
                "job_id": final.job_id,
                "status": final.status,
                "index_version": final.published_version,
                "build_version": final.version_id,
                "error": final.error,
            }
        )
    )
    if status != SUCCEEDED:
        raise typer.Exit(1)


@cli.command()
def worker(data_dir: DataDir = None) -> None:
    """Run queued jobs until stopped (SIGTERM or Ctrl-C: a running job's build is kept and
    its job failed; retrying it resumes the build)."""
    settings = _settings(data_dir)
    if settings.db.auto_migrate:
        upgrade(settings.database_url)
    runner = Worker(settings, make_engine(settings.database_url))

    def stop(signum: int, _frame: Any) -> None:
        logger.info("Signal %d: stopping after the current block", signum)
        runner.stop.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    runner.run()


@cli.command()
def train(
    kind: Annotated[str, typer.Argument(help="sdr, colde, graph or bregman.")],
    corpus: Annotated[Path, typer.Option(help="The corpus to train on (any docsim format).")],
    out: Annotated[Path, typer.Option(help="Where the trained encoder (and checkpoints) go.")],
    base: Annotated[str, typer.Option(help="The starting encoder: minilm or a directory.")] = (
        "minilm"
    ),
    steps: Annotated[int, typer.Option(min=1, help="Optimisation steps.")] = 1000,
    batch_size: Annotated[int, typer.Option(min=2)] = 16,
    learning_rate: Annotated[float, typer.Option(min=0.0)] = 2e-5,
    max_tokens: Annotated[int, typer.Option(min=8, help="Tokens per text / chunk.")] = 128,
    seed: int = 0,
    checkpoint_every: Annotated[int, typer.Option(min=1)] = 100,
    fmt: Annotated[
        CorpusFormat, typer.Option("--format", help="Corpus format.")
    ] = CorpusFormat.auto,
    positives: Annotated[
        str, typer.Option(help="sdr: positive pairs from the same paragraph or document.")
    ] = "paragraph",
    views: Annotated[int, typer.Option(min=2, max=5, help="colde: sections per document.")] = 2,
    label_field: Annotated[
        str | None, typer.Option(help="colde: metadata field with class labels.")
    ] = None,
    edges: Annotated[str, typer.Option(help="graph: neighbours or full.")] = "neighbours",
    bregman_weight: Annotated[float, typer.Option(help="bregman: lambda.")] = 1.0,
    subnetworks: Annotated[int, typer.Option(min=1, help="bregman: k.")] = 8,
    sigma: Annotated[float, typer.Option(help="bregman: Gaussian kernel width.")] = 2.0,
    resume: Annotated[bool, typer.Option(help="Continue the checkpoint in --out.")] = False,
    force: Annotated[bool, typer.Option(help="Replace what --out holds.")] = False,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """Train one of the papers' encoders on a corpus; `docsim index --encoder OUT` uses it."""
    from indexer.train import run_training, training_documents
    from models.training import TrainConfig, TrainingError

    settings = get_settings()
    options: dict[str, Any] = {
        "sdr": {"positives": positives},
        "colde": {"views": views, "use_labels": label_field is not None},
        "graph": {"edges": edges},
        "bregman": {"weight": bregman_weight, "k": subnetworks, "sigma": sigma},
    }.get(kind, {})
    config = TrainConfig(
        kind=kind,
        base=base,
        steps=steps,
        batch_size=batch_size,
        learning_rate=learning_rate,
        seed=seed,
        checkpoint_every=checkpoint_every,
        max_tokens=max_tokens,
        precision=settings.encoder.precision,
        options=options,
    )
    try:
        if not corpus.exists():
            raise CorpusError(f"corpus path {str(corpus)!r} does not exist")
        docs = training_documents(corpus, fmt, load_splitter(settings.punkt_params), label_field)
        result = run_training(
            kind,
            docs,
            out,
            config,
            device=resolve_device(settings.encoder.device),
            resume=resume,
            force=force,
            show_progress=progress,
        )
    except (TrainingError, CorpusError, ValueError) as error:
        _fail(str(error))
    except KeyboardInterrupt:
        _fail(f"interrupted: `docsim train {kind} ... --resume` continues from the checkpoint", 130)
    first = sum(result.losses[:10]) / max(1, len(result.losses[:10]))
    last = sum(result.losses[-10:]) / max(1, len(result.losses[-10:]))
    typer.echo(
        json.dumps(
            {
                "kind": kind,
                "out": str(out),
                "steps": result.steps,
                "resumed_from": result.resumed_from,
                "seconds": round(result.seconds, 1),
                "loss_first_10": round(first, 4),
                "loss_last_10": round(last, 4),
            }
        )
    )


if __name__ == "__main__":
    main()
