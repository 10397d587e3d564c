"""Ingest a raw export into bronze/publications, bronze/citations and quarantine.

spark-submit spark_jobs/ingest.py --lake data/lake --input data/sample --format google_patents
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lake import EmptyTableError, JobRun, build_session, job_arguments, path_or_uri, positive_int
from lake.cli import run_job
from schemas.inputs import GOOGLE_PATENTS_FIELDS
from spark_jobs.lib import ingest as ingestion

FORMATS = ("google_patents", "canonical")


def run(
    spark: SparkSession,
    lake: str,
    input_path: str,
    fmt: str,
    run_id: str | None = None,
    args: dict | None = None,
    max_record_bytes: int = ingestion.MAX_RECORD_BYTES,
) -> dict[str, int]:
    """Ingest ``input_path``; returns the run's counters."""
    if fmt not in FORMATS:
        raise ValueError(f"--format must be one of {FORMATS}, got {fmt!r}")
    ingested_at = datetime.now(UTC)
    with JobRun(spark, lake, "ingest", args or {"input": input_path, "format": fmt}, run_id) as job:
        problem = ingestion.layout_error(spark, input_path, fmt)
        if problem:
            raise ValueError(problem)
        canonical_cites = None
        if fmt == "google_patents":
            left_out = []
            records = ingestion.read_input(
                spark, input_path, GOOGLE_PATENTS_FIELDS, left_out, max_record_bytes, job.info
            )
        else:
            records, canonical_cites, left_out = ingestion.read_canonical(
                spark, input_path, max_record_bytes, job.info
            )
        for probe in left_out:
            job.info(
                f"left out {probe.path}: {ingestion.file_reason(probe)} "
                f"({probe.error or probe.encoding}; {probe.lines_read} lines before it)"
            )
        if left_out and not job.allow_empty and records.isEmpty():
            raise EmptyTableError(
                f"ingest: no readable file under {input_path}: "
                + ", ".join(f"{p.path} ({ingestion.file_reason(p)})" for p in left_out)
                + "; nothing was written"
            )

        validated = ingestion.with_validation(records).persist(StorageLevel.MEMORY_AND_DISK)
        checked = ingestion.split_duplicates(validated.where(F.col("reason").isNull()))
        keep = checked.where(F.col("duplicate").isNull())
        conflicts = (
            checked.where(F.col("duplicate") == "conflict")
            .withColumn("reason", F.lit("duplicate_id_conflict"))
            .drop("duplicate")
        )
        rejected = validated.where(F.col("reason").isNotNull()).unionByName(conflicts)

        try:
            job.write(
                ingestion.to_bronze_publications(keep, fmt, ingested_at), "bronze/publications"
            )
        except EmptyTableError as error:
            files = ingestion.input_files(spark, ingestion.patents_path(input_path, fmt))
            why = ingestion.why_nothing_kept(validated, files)
            raise EmptyTableError(f"{error}; {why}") from None
        publications = job.read("bronze/publications")

        quarantine = ingestion.to_quarantine(rejected, ingested_at).unionByName(
            ingestion.file_quarantine(spark, left_out, ingested_at)
        )
        if canonical_cites is not None:
            cites, orphans = _canonical_citations(canonical_cites, publications, ingested_at)
            quarantine = quarantine.unionByName(orphans)
        else:
            cites = ingestion.explode_citations(keep)
        job.write_quarantine(quarantine)
        job.write(ingestion.resolve_citations(cites, publications), "bronze/citations")

        job.count("files_left_out", len(left_out))
        _count(job, validated, checked, canonical_cites)
        validated.unpersist()
        return job.metrics


def _canonical_citations(raw: DataFrame, publications: DataFrame, ingested_at):
    """Split canonical citation lines (``parse_lines`` rows) into those of ingested patents
    and the rest (quarantined: lines that are no citation, citations of unknown patents)."""
    ids = publications.select(F.col("publication_number").alias("_citing_id"))
    keyed = raw.join(ids, F.trim(raw.citing) == ids._citing_id, "left")
    bad = (
        F.when(F.col("too_large"), F.lit("unparseable_citation:too_large"))
        .when(~F.col("valid_utf8"), F.lit("unparseable_citation:invalid_utf8"))
        .when(F.col("corrupt"), F.lit("unparseable_citation"))
        .when(F.col("_citing_id").isNull(), F.lit("citation_of_unknown_patent"))
    )
    keyed = keyed.withColumn("reason", bad)
    orphans = keyed.where(F.col("reason").isNotNull()).select(
        "reason",
        F.trim("citing").alias("record_id"),
        F.col("raw").alias("record"),
        "source_file",
        F.lit(ingested_at).cast("timestamp").alias("ingested_at"),
        F.lit(None).cast("string").alias("stage"),
    )
    return ingestion.canonical_citations(keyed.where(F.col("reason").isNull())), orphans


def _count(
    job: JobRun, validated: DataFrame, checked: DataFrame, citation_lines: DataFrame | None
) -> None:
    """Counters, and the invariant that every input record (and every canonical citation
    line) is accounted for."""
    total = validated.count()
    exact, null_citation_entries = ingestion.duplicate_counts(checked)
    if citation_lines is None:  # the export's citations are arrays in the records
        job.count("dropped_null_citation_entries", null_citation_entries)
    kept = job.written("bronze/publications")
    quarantine = job.read("quarantine").where(F.col("stage") == "ingest")
    by_reason: dict[str, int] = {}
    for row in quarantine.groupBy(F.split("reason", ":")[0].alias("reason")).count().collect():
        by_reason[row["reason"]] = row["count"]
    # rows of no patent record: whole files, citation lines
    not_records = {*ingestion.CITATION_REASONS, *ingestion.FILE_REASONS}
    quarantined_records = sum(n for r, n in by_reason.items() if r not in not_records)
    job.count("records_total", total)
    job.count("records_kept", kept)
    job.count("dropped_exact_duplicate", exact)
    for reason, n in by_reason.items():
        job.count(f"quarantined_{reason}", n)
    citations = job.read("bronze/citations")
    stats = citations.agg(
        F.count("*").alias("n"),
        F.sum(F.col("resolved").cast("int")).alias("r"),
        F.sum(F.col("is_x").cast("int")).alias("x"),
        F.sum((F.col("is_x") & F.col("resolved")).cast("int")).alias("xr"),
    ).first()
    job.count("citations_total", stats["n"])
    job.count("citations_resolved", stats["r"] or 0)
    job.count("citations_x", stats["x"] or 0)
    job.count("citations_x_resolved", stats["xr"] or 0)
    if total != kept + exact + quarantined_records:
        raise RuntimeError(
            f"ingest lost records: {total} read, {kept} kept + {exact} exact duplicates + "
            f"{quarantined_records} quarantined = {kept + exact + quarantined_records}"
        )
    if citation_lines is not None:
        read = citation_lines.count()
        quarantined = sum(by_reason.get(r, 0) for r in ingestion.CITATION_REASONS)
        job.count("citation_lines_total", read)
        if read != stats["n"] + quarantined:
            raise RuntimeError(
                f"ingest lost citation lines: {read} read, {stats['n']} kept + "
                f"{quarantined} quarantined = {stats['n'] + quarantined}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = job_arguments(__doc__.splitlines()[0])
    parser.add_argument(
        "--input", type=path_or_uri, required=True, help="export folder or file (any Spark URI)"
    )
    parser.add_argument("--format", choices=FORMATS, default="google_patents")
    parser.add_argument(
        "--max-record-bytes",
        type=positive_int,
        default=ingestion.MAX_RECORD_BYTES,
        help="lines above this size are quarantined as record_too_large, never parsed",
    )
    args = parser.parse_args(argv)
    spark = build_session("xembed-ingest", args.master)
    run(spark, args.lake, args.input, args.format, args.run_id, vars(args), args.max_record_bytes)
    return 0


if __name__ == "__main__":
    sys.exit(run_job("ingest", main))
