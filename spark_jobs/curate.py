"""Curate bronze into silver: patents, families, views (ABS, CLAIM, DESC, TAC, FIC), claims.

spark-submit spark_jobs/curate.py --lake data/lake
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from pyspark import StorageLevel
from pyspark.sql import SparkSession

from lake import JobRun, build_session, job_arguments
from lake.cli import run_job
from spark_jobs.lib import curate as curation


def run(
    spark: SparkSession, lake: str, run_id: str | None = None, args: dict | None = None
) -> dict[str, int]:
    now = datetime.now(UTC)
    with JobRun(spark, lake, "curate", args, run_id) as job:
        publications = job.read("bronze/publications")
        texts = curation.best_texts(publications).persist(StorageLevel.MEMORY_AND_DISK)

        job.write(curation.views(texts), "silver/views")
        view_rows = job.read("silver/views")
        job.write(curation.claims(texts), "silver/claims")
        job.write(curation.patents(publications, view_rows), "silver/patents")
        patent_rows = job.read("silver/patents")
        job.write(curation.families(patent_rows), "silver/families")
        job.write_quarantine(curation.without_views(publications, view_rows, now))
        texts.unpersist()

        job.count("publications_in", publications.count())
        job.count("patents_out", job.written("silver/patents"))
        job.count("quarantined_no_text_after_cleaning", job.written("quarantine"))
        for row in view_rows.groupBy("view", "lang").count().collect():
            job.count(f"views_{row['view']}_{row['lang']}", row["count"])
        job.count("claims", job.written("silver/claims"))
        if job.metrics["publications_in"] != (
            job.metrics["patents_out"] + job.metrics["quarantined_no_text_after_cleaning"]
        ):
            raise RuntimeError(f"curate lost publications: {job.metrics}")
        return job.metrics


def main(argv: list[str] | None = None) -> int:
    args = job_arguments(__doc__.splitlines()[0]).parse_args(argv)
    spark = build_session("xembed-curate", args.master)
    run(spark, args.lake, args.run_id, vars(args))
    return 0


if __name__ == "__main__":
    sys.exit(run_job("curate", main))
