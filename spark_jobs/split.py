"""Split off evaluation queries and exclude their whole families from training.

spark-submit spark_jobs/split.py --lake data/lake --eval-cutoff 2025-01-01
"""

from __future__ import annotations

import sys
from datetime import date

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lake import EmptyTableError, JobRun, build_session, iso_date, job_arguments
from lake.cli import run_job
from schemas import defaults
from spark_jobs.lib import split as splitting
from spark_jobs.lib.leakage import LeakageError
from spark_jobs.lib.retrieval import evaluation_collection


def run(
    spark: SparkSession,
    lake: str,
    cutoff: date,
    run_id: str | None = None,
    args: dict | None = None,
) -> dict[str, int]:
    with JobRun(spark, lake, "split", args or {"eval_cutoff": str(cutoff)}, run_id) as job:
        patents = job.read("silver/patents")
        citations = job.read("bronze/citations")
        collection = evaluation_collection(job.read("silver/views"))
        found = splitting.eval_queries(patents, citations, cutoff, collection).persist()
        if not job.allow_empty and found.isEmpty():
            # every family would train and nothing would be evaluated, hours later
            since = patents.agg(
                F.max("filing_date").alias("latest"),
                F.sum((F.col("filing_date") >= F.lit(cutoff)).cast("int")).alias("n"),
            ).first()
            raise EmptyTableError(
                f"split: no patent filed on or after {cutoff} has an X citation in the "
                f"candidate collection, the TAC views ({since['n'] or 0:,} filed since; the "
                "latest filing date is "
                f"{since['latest']}), so silver/eval_queries would be empty and nothing was "
                "written. Choose an earlier --eval-cutoff, or pass --allow-empty if that is meant"
            )
        job.write(found, "silver/eval_queries")
        found.unpersist()
        queries = job.read("silver/eval_queries")
        job.write(splitting.excluded_families(queries), "silver/excluded_families")
        excluded = job.read("silver/excluded_families")

        # Self-check: every query family is excluded, with all of its members.
        uncovered = queries.join(excluded, "family_id", "left_anti").count()
        if uncovered:
            raise LeakageError(f"split: {uncovered} evaluation queries have no excluded family")
        members = patents.join(excluded.select("family_id"), "family_id").count()

        job.count("eval_queries", job.written("silver/eval_queries"))
        job.count("excluded_families", job.written("silver/excluded_families"))
        job.count("excluded_patents", members)
        for row in queries.groupBy("lang").count().collect():
            job.count(f"eval_queries_{row['lang']}", row["count"])
        for row in (
            queries.groupBy(F.coalesce("ipc_section", F.lit("none")).alias("s")).count().collect()
        ):
            job.count(f"eval_queries_ipc_{row['s']}", row["count"])
        return job.metrics


def main(argv: list[str] | None = None) -> int:
    parser = job_arguments(__doc__.splitlines()[0])
    parser.add_argument(
        "--eval-cutoff",
        default=defaults.EVAL_CUTOFF,
        type=iso_date,
        help="queries are patents filed on/after this date (YYYY-MM-DD)",
    )
    args = parser.parse_args(argv)
    spark = build_session("xembed-split", args.master)
    run(spark, args.lake, args.eval_cutoff, args.run_id, vars(args))
    return 0


if __name__ == "__main__":
    sys.exit(run_job("split", main))
