"""The search layer's commands, which the app adds to the indexer's command line (`app.cli`):
`docsim evaluate`, rankings of the active index against relevance judgments. The evaluation
and search modules (`search.evaluation.report` holds the stages) are imported when the
command runs, not at CLI startup."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from docsim.indexer.cli.common import (
    DataDir,
    existing_data_dir,
    fail,
    fail_with,
    in_collection,
    user_errors,
    with_command_options,
)

if TYPE_CHECKING:
    from docsim.search.evaluation.report import Judged
    from docsim.search.evaluation.runs import MethodSpec
    from docsim.search.searcher import Searcher
    from docsim.search.settings import QuerySettings

logger = logging.getLogger("docsim")
commands = typer.Typer()  # registers the commands; `app.cli` adds them to the `docsim` command
MicroAt = Annotated[
    list[int] | None,
    typer.Option(
        help="Also report micro-averaged precision, recall and F1 at this cutoff (over every "
        "query's top k, as IL-PCR's results are published); repeat for several. Default: 10."
    ),
]
ExcludeOwn = Annotated[
    str | None,
    typer.Option(
        help="A regular expression over query ids whose first group is a document id that "
        "query's rankings leave out (its own judgment in the collection): 'Q(.+)' maps the "
        'query Q12 to the document 12. A JSONL query\'s "exclude_id" does the same.'
    ),
]


@commands.command()
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
            "bm25-reduced, bm25-rm3, bm25-paragraph, bm25-shingles, rprs, hybrid, fused) or "
            "sdr-raw (no z-score); repeat to compare. "
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
    filter: Annotated[
        str | None,
        typer.Option(
            "--filter",
            help='A metadata filter (JSON, as /similar takes it, e.g. \'{"field": "date", '
            '"gte": "2000-01-01"}\'): rank only what it keeps, judged on those documents.',
        ),
    ] = None,
    micro_at: MicroAt = None,
    exclude_own: ExcludeOwn = None,
    data_dir: DataDir = None,
) -> None:
    """Evaluate rankings of the active index against relevance judgments."""
    from docsim.search.evaluation.report import build_report, report_table, score_methods
    from docsim.search.settings import get_query_settings

    settings = existing_data_dir(with_command_options(get_query_settings(), data_dir))
    files = (queries, qrels, pools, exclude_own)
    searcher, judged, specs = _open_judged(settings, files, query_field, method, filter)
    cutoffs = sorted(set(micro_at or [10]))
    per_method = score_methods(
        searcher,
        specs,
        judged,
        depth=depth,
        min_rel=min_rel,
        sdr_metrics=sdr_metrics,
        run_out=run_out,
        cutoffs=cutoffs,
    )
    report = build_report(
        queries=queries,
        qrels=qrels,
        pools=pools,
        index_version=searcher.index.version_id,
        per_method=per_method,
        search_settings=settings.search.model_dump(),
        filter=json.loads(filter) if filter is not None else None,  # valid: read above
        micro=(judged.relevant_counts(min_rel), cutoffs),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    for line in report_table(report):
        typer.echo(line)
    logger.info("Saved %s", out)


def _open_judged(
    settings: QuerySettings,
    files: tuple[Path, Path, Path | None, str | None],
    query_field: str,
    methods: list[str] | None,
    filter: str | None,
) -> tuple[Searcher, Judged, list[MethodSpec]]:
    """The collection's searcher, the judged queries (`files`: the queries, qrels and pools,
    and the `--exclude-own` pattern; within what the JSON `filter` keeps) and the methods to
    score, or the command's failure with the reason."""
    queries, qrels, pools, exclude_own = files
    from docsim.indexer.store.db import make_engine, upgrade
    from docsim.protocol.requests import FilterIn
    from docsim.search.evaluation.report import read_judged
    from docsim.search.evaluation.runs import MethodSpec, warn_unmatched_judgments
    from docsim.search.serving import open_searcher

    try:
        for name in methods or []:
            MethodSpec.parse(name)  # a typo fails before the index loads
        wanted = FilterIn.model_validate(json.loads(filter)) if filter is not None else None
        if wanted is not None:
            wanted.tree()  # its grammar, checked before the index loads
        judged = read_judged(queries, qrels, pools, query_field, wanted, exclude_own)
        if settings.db.auto_migrate:  # a database from an older docsim gets its new tables
            upgrade(settings.database_url)
        engine = make_engine(settings.database_url)
        searcher = open_searcher(in_collection(settings, engine), engine)
        default = searcher.settings.default_method.value
        specs = [MethodSpec.parse(m) for m in (methods or [default])]
    except user_errors() + (ValueError, OSError) as error:
        fail_with(error)
    try:
        judged = judged.within(searcher)
    except ValueError as error:  # a filter field the collection does not have
        fail(str(error))
    warn_unmatched_judgments(judged.judgments, judged.queries, searcher.index.external_ids)
    return searcher, judged, specs
