"""Validate lake tables with their Great Expectations suites.

    python -m expectations.run --lake data/lake --tables bronze/publications,silver/views

Writes Data Docs HTML under <lake>/reports/<run_id>/ and one row per expectation result
into the Delta table dq/results; exits 1 when a critical expectation fails.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from expectations.suites import SUITES, suite_for, tables_queried
from lake import (
    add_lake_arguments,
    build_session,
    label,
    table_exists,
    table_path,
    visible_versions,
    write_table,
)
from lake.cli import finish, run_job
from lake.tables import sql_string
from schemas import TABLES
from schemas import table as table_spec

SITE_NAME = "xembed_site"  # the ephemeral context already owns "local_site"


def _docs_dir(lake: str, run_id: str, docs_dir: str | None) -> Path:
    if docs_dir:
        return Path(docs_dir)
    if "://" in lake and not lake.startswith("file://"):
        raise ValueError(f"lake {lake} is not a local path: pass --docs-dir for the Data Docs")
    return Path(lake.removeprefix("file://")) / "reports" / run_id


def _context(docs: Path):
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    context.add_data_docs_site(
        site_name=SITE_NAME,
        site_config={
            "class_name": "SiteBuilder",
            "store_backend": {
                "class_name": "TupleFilesystemStoreBackend",
                "base_directory": str(docs.resolve()),
            },
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        },
    )
    return context


def _error(info: dict | None) -> str | None:
    """The message of an expectation that raised: GX 1.x keys ``exception_info`` by the
    metric that failed, a flat dict in older results."""
    if not info:
        return None
    if "exception_message" in info:
        return info["exception_message"]
    messages = [v.get("exception_message") for v in info.values() if isinstance(v, dict)]
    return next((m for m in messages if m), None)


def _rows(result, run_id: str, table: str, version: int, validated_at) -> list[dict]:
    rows = []
    for r in result.results:
        config = r.expectation_config
        kwargs = {k: v for k, v in config.kwargs.items() if k != "batch_id"}
        observed = r.result.get("observed_value")
        error = _error(r.exception_info)
        if observed is None and error:
            observed = f"error: {error}"
        elif observed is None and r.result.get("partial_unexpected_list"):
            observed = f"e.g. {r.result['partial_unexpected_list'][:5]}"
        rows.append(
            {
                "run_id": run_id,
                "table_name": table,
                "table_version": version,
                "suite": table.replace("/", "_"),
                "expectation_type": config.type,
                # cross-table SQL checks have no column: their description says what they test
                "column": kwargs.get("column")
                or ",".join(kwargs.get("column_list", []) or [])
                or ",".join(kwargs[c] for c in ("column_A", "column_B") if kwargs.get(c))
                or config.description
                or None,
                "kwargs_json": json.dumps(kwargs, sort_keys=True, default=str),
                "success": bool(r.success),
                "critical": bool((config.meta or {}).get("critical", False)),
                "unexpected_count": r.result.get("unexpected_count")
                if r.result.get("unexpected_count") is not None
                else (observed if isinstance(observed, int) else None),
                "observed": None if observed is None else str(observed)[:1000],
                "validated_at": validated_at,
            }
        )
    return rows


def validate(
    spark, lake: str, tables: list[str], run_id: str, docs_dir: str | None = None
) -> list[dict]:
    """Validate ``tables``; write dq/results and Data Docs; return the result rows."""
    import great_expectations as gx

    docs = _docs_dir(lake, run_id, docs_dir)
    # the versions readers see: what successful runs published (lake.snapshots), of the
    # tables validated and of those their cross-table expectations query (as dq_<path> views)
    queried = set(tables).union(*(tables_queried(name) for name in tables))
    present = [n for n in TABLES if n in queried and table_exists(spark, table_path(lake, n))]
    versions = visible_versions(spark, lake, dict.fromkeys([*tables, *present]))
    # views of an earlier validation in this session (another lake) must not answer for this
    # one's: each dq_<path> is this lake's or absent, so a check on it fails rather than
    # reading another lake
    for name in TABLES:
        spark.catalog.dropTempView("dq_" + name.replace("/", "_"))
    for name in present:
        spark.read.format("delta").option("versionAsOf", versions[name]).load(
            table_path(lake, name)
        ).createOrReplaceTempView("dq_" + name.replace("/", "_"))
    context = _context(docs)
    # persist=False: GX would cache each validated table and never release it; on a Spark
    # Connect server that cache lives in the driver every job shares (same results, 66 of 66
    # on the end-to-end test lake's nine bronze and silver tables; that run ~1 s quicker)
    source = context.data_sources.add_spark("lake", persist=False)
    validated_at = datetime.now(UTC)
    rows: list[dict] = []
    for name in tables:
        path = table_path(lake, name)
        version = versions[name]
        frame = spark.read.format("delta").option("versionAsOf", version).load(path)
        suite = context.suites.add(suite_for(name))
        batch = source.add_dataframe_asset(
            name.replace("/", "_")
        ).add_batch_definition_whole_dataframe("all")
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(name=f"{suite.name}-{run_id}", data=batch, suite=suite)
        )
        # BASIC: counts and up to 20 unexpected values per expectation, as SUMMARY (GX's
        # default) gives, but not SUMMARY's counts of those values, a grouped query of its
        # own per column expectation (same dq/results rows, 66 of 66 on the end-to-end test
        # lake's bronze and silver tables; 7-13% less validation time there)
        checkpoint = context.checkpoints.add(
            gx.Checkpoint(
                name=f"{suite.name}-checkpoint",
                validation_definitions=[definition],
                result_format="BASIC",
            )
        )
        outcome = checkpoint.run(batch_parameters={"dataframe": frame})
        for result in outcome.run_results.values():
            rows.extend(_rows(result, run_id, name, version, validated_at))
    # one build renders every suite and result the run stored, and the index once (an
    # UpdateDataDocsAction per checkpoint rebuilt the index after each table)
    context.build_data_docs(site_names=[SITE_NAME])
    if rows:
        frame = spark.createDataFrame(rows, table_spec("dq/results").spark_schema())
        names = ", ".join(map(sql_string, tables))
        write_table(
            spark,
            frame,
            lake,
            "dq/results",
            replace_where=f"run_id = {sql_string(run_id)} AND table_name IN ({names})",
        )
    return rows


def summarize(rows: list[dict]) -> tuple[int, int]:
    """Print one line per failed expectation; return (critical failures, warnings)."""
    critical = warnings = 0
    for r in rows:
        if r["success"]:
            continue
        level = "CRITICAL" if r["critical"] else "warning"
        critical += r["critical"]
        warnings += not r["critical"]
        print(
            f"{level:8s} {r['table_name']}: {r['expectation_type']}({r['column'] or ''}) "
            f"unexpected={r['unexpected_count']} observed={r['observed']}",
            file=sys.stderr,
        )
    print(
        f"dq: {len(rows)} expectations, {critical} critical failures, {warnings} warnings",
        file=sys.stderr,
    )
    return critical, warnings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    add_lake_arguments(parser)
    parser.add_argument(
        "--tables",
        required=True,
        help=f"comma-separated tables, or 'all': those of {', '.join(SUITES)} the lake holds",
    )
    parser.add_argument(
        "--run-id", type=label, default=None, help="names the Data Docs folder <lake>/reports/ID"
    )
    parser.add_argument(
        "--docs-dir", default=None, help="Data Docs folder (default <lake>/reports/<run_id>)"
    )
    args = parser.parse_args(argv)
    tables = (
        list(SUITES)
        if args.tables == "all"
        else [t.strip() for t in args.tables.split(",") if t.strip()]
    )
    if not tables:  # a gate over nothing would pass
        parser.error(f"--tables names no table: {args.tables!r}")
    unknown = [t for t in tables if t not in SUITES]
    if unknown:
        parser.error(f"no suite for {', '.join(unknown)}; known: {', '.join(SUITES)}")
    run_id = args.run_id or f"dq-{datetime.now(UTC):%Y%m%dT%H%M%S}"
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    logging.getLogger("great_expectations").setLevel(logging.WARNING)

    spark = build_session("xembed-dq", args.master)
    if args.tables == "all":  # the tables the lake holds so far (a lake after split has no gold)
        absent = [t for t in tables if not table_exists(spark, table_path(args.lake, t))]
        tables = [t for t in tables if t not in absent]
        if not tables:
            parser.error(f"--tables all: no table with a suite under {args.lake}")
        if absent:
            print(f"dq: not written yet, not validated: {', '.join(absent)}", file=sys.stderr)
    rows = validate(spark, args.lake, tables, run_id, args.docs_dir)
    critical, _ = summarize(rows)
    print(
        f"dq: Data Docs at {_docs_dir(args.lake, run_id, args.docs_dir)}/index.html",
        file=sys.stderr,
    )
    return 1 if critical else 0


if __name__ == "__main__":
    finish(run_job("dq", main))
