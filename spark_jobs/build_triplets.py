"""Build Stage II examples (query view, X positive, 8 negatives) and the validation split.

    spark-submit spark_jobs/build_triplets.py --lake ./lake [--seed 13] [--validation-size 2000]

Reads gold/stage2_candidates (from mine_candidates) and writes gold/stage2_examples,
gold/stage2_validation and gold/stage2_dropped; the leakage audit runs on both outputs.
"""

from __future__ import annotations

import sys

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs.lib import retrieval as R
from spark_jobs.lib import triplets as T
from spark_jobs.lib.lake import JobRun
from spark_jobs.lib.leakage import write_audited
from spark_jobs.lib.session import build_session, job_arguments, positive_int

_AUDIT = {
    "id_columns": ("query_id", "positive_id"),
    "id_array_columns": ("negative_ids",),
    "family_columns": ("query_family_id", "positive_family_id"),
}


def _dropped(frame: DataFrame, reason: str, count: F.Column | None = None) -> DataFrame:
    return frame.select(
        "query_id",
        "query_view",
        F.lit(reason).alias("reason"),
        (count if count is not None else F.lit(1)).cast("bigint").alias("count"),
    )


def run(
    spark: SparkSession,
    lake: str,
    seed: int = 13,
    validation_size: int = 2000,
    run_id: str | None = None,
    args: dict | None = None,
) -> dict[str, int]:
    args = args or {"seed": seed, "validation_size": validation_size}
    with JobRun(spark, lake, "build_triplets", args, run_id) as job:
        patents = job.read("silver/patents")
        excluded = job.read("silver/excluded_families")
        citations = job.read("bronze/citations")
        candidates = job.read("gold/stage2_candidates")
        pool_ids = R.candidates(patents, R.pool_tac(job.read("silver/views"), excluded))
        positives = R.positives(patents, citations, pool_ids).join(
            pool_ids.select(F.col("id").alias("positive_id"), F.col("lang").alias("positive_lang")),
            "positive_id",
        )
        queries = T.query_info(patents)
        cands = T.candidate_info(patents, pool_ids)
        pos = T.positive_sets(positives)

        filtered = T.filter_candidates(candidates, queries, cands, pos)
        sampled = T.sample_strata(T.stratify(filtered), seed).persist(StorageLevel.MEMORY_AND_DISK)
        corners = T.corner_counts(sampled)
        kept_views = corners.where(F.col("corners") >= T.MIN_CORNER).select(*T._QV)
        a_rows = T.allowed(T.a_citation_rows(citations), queries, cands, pos).select(
            "query_id", "cand_id", "cand_lang", "cand_family_id"
        )
        pool_rows = T.pool(sampled.join(kept_views, list(T._QV), "left_semi"), a_rows, kept_views)
        query_langs = (
            candidates.select(*T._QV, "query_lang")
            .distinct()
            .join(queries.select("query_id", "query_family_id"), "query_id")
        )
        full = T.examples(pool_rows, positives, query_langs, seed).persist(
            StorageLevel.MEMORY_AND_DISK
        )
        complete = full.where(F.size("negative_ids") == T.NEGATIVES)
        training, validation, overlapping = T.split_validation(complete, validation_size, seed)

        write_audited(job, training, "gold/stage2_examples", **_AUDIT)
        write_audited(job, validation, "gold/stage2_validation", **_AUDIT)

        all_views = candidates.select(*T._QV).distinct()
        drops = [
            _dropped(
                all_views.join(filtered.select(*T._QV).distinct(), list(T._QV), "left_anti"),
                "no_candidate_after_filters",
            ),
            _dropped(corners.where(F.col("corners") < T.MIN_CORNER), "corner_strata_below_6"),
            _dropped(
                full.where(F.size("negative_ids") < T.NEGATIVES).groupBy(*T._QV).count(),
                "fewer_than_8_negatives",
                F.col("count"),
            ),
            _dropped(
                overlapping.groupBy(*T._QV).count(), "labelled_family_in_validation", F.col("count")
            ),
        ]
        dropped = drops[0]
        for d in drops[1:]:
            dropped = dropped.unionByName(d)
        job.write(dropped, "gold/stage2_dropped")
        _summary(job)
        sampled.unpersist()
        full.unpersist()
        return job.metrics


def _summary(job: JobRun) -> None:
    examples = job.read("gold/stage2_examples")
    validation = job.read("gold/stage2_validation")
    job.count("examples", examples.count())
    job.count("validation_examples", validation.count())
    for r in (
        job.read("gold/stage2_dropped").groupBy("reason").agg(F.sum("count").alias("n")).collect()
    ):
        job.count(f"dropped_{r['reason']}", r["n"])
    origins = (
        examples.select(F.explode("negative_origin").alias("o")).groupBy("o").count().collect()
    )
    for r in origins:
        job.count(f"negatives_from_{r['o']}", r["count"])
    same = (
        examples.select("query_lang", F.explode("negative_langs").alias("l"))
        .groupBy((F.col("l") == F.col("query_lang")).alias("same"))
        .count()
        .collect()
    )
    for r in same:
        job.count(
            "negatives_in_query_language" if r["same"] else "negatives_in_other_language",
            r["count"],
        )
    for r in examples.groupBy("query_lang").count().collect():
        job.count(f"examples_{r['query_lang']}", r["count"])


def main(argv: list[str] | None = None) -> int:
    parser = job_arguments(__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--validation-size", type=positive_int, default=2000)
    args = parser.parse_args(argv)
    spark = build_session("xembed-build-triplets", args.master)
    run(spark, args.lake, args.seed, args.validation_size, args.run_id, vars(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
