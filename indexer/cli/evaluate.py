"""`docsim evaluate`: rankings of the active index against relevance judgments. The
evaluation and search modules are imported when the command runs, not at CLI startup."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from indexer.cli.common import USER_ERRORS, DataDir, cli, cli_settings, existing_data_dir, fail
from indexer.store.db import make_engine, upgrade

logger = logging.getLogger("docsim")


@cli.command()
def evaluate(
    queries: Annotated[Path, typer.Option(help="AILA `QID||text` lines or JSONL queries.")],
    qrels: Annotated[Path, typer.Option(help="TREC qrels (graded relevance allowed).")],
    pools: Annotated[
        Path | None, typer.Option(help="JSON {qid: [candidate ids]}: re-rank each pool.")
    ] = None,
    method: Annotated[
        list[str] | None,
        typer.Option(
            help="A /similar method (sdr, sdr-window, document, maxsim, best-sentence, ot, bm25, "
            "bm25-reduced, bm25-rm3, hybrid, fused) or sdr-raw (no z-score); repeat to compare. "
            "Default: the service's default method (DOCSIM_SEARCH__DEFAULT_METHOD)."
        ),
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

    from indexer.evaluation.metrics import mean_metrics, paired_tests, score_runs, write_trec_run
    from indexer.evaluation.runs import (
        MethodSpec,
        read_pools,
        read_qrels,
        read_queries,
        run_queries,
        warn_unmatched_judgments,
    )
    from indexer.serving import open_searcher

    settings = existing_data_dir(cli_settings(data_dir))
    try:
        for name in method or []:
            MethodSpec.parse(name)  # a typo fails before the index loads
        query_list = read_queries(queries, query_field)
        judgments = read_qrels(qrels)
        pool_map = read_pools(pools) if pools else None
        if settings.db.auto_migrate:  # a database from an older docsim gets its new tables
            upgrade(settings.database_url)
        searcher = open_searcher(settings, make_engine(settings.database_url))
        specs = [MethodSpec.parse(m) for m in (method or [searcher.settings.default_method.value])]
    except (*USER_ERRORS, ValueError, OSError) as error:
        fail(str(error))
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
            path.parent.mkdir(parents=True, exist_ok=True)
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
    for baseline in ("bm25", "hybrid"):
        if baseline in per_method and len(per_method) > 1:
            report[f"paired_tests_vs_{baseline}_on_MAP"] = paired_tests(per_method, baseline)
    report["search_settings"] = settings.search.model_dump()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    names = sorted({m for r in report["methods"].values() for m in r["mean"]})
    typer.echo("method      " + " ".join(f"{n:>9}" for n in names))
    for name, result in report["methods"].items():
        typer.echo(
            f"{name:<11} " + " ".join(f"{result['mean'].get(n, float('nan')):9.4f}" for n in names)
        )
    for baseline in ("bm25", "hybrid"):
        for name, test in report.get(f"paired_tests_vs_{baseline}_on_MAP", {}).items():
            typer.echo(
                f"{name} vs {baseline} (MAP): diff {test['mean_difference']:+.4f}, "
                f"t-test p={test['t_test_p']:.3f}, Wilcoxon p={test['wilcoxon_p']:.3f}"
            )
    logger.info("Saved %s", out)
