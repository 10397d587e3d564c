"""Build Stage II examples (query view, X positive, 8 negatives) and the validation split.

    spark-submit spark_jobs/build_triplets.py --lake data/lake [--seed 13] [--validation-size 2000]

Reads gold/stage2_candidates (from mine_candidates) and writes gold/stage2_examples,
gold/stage2_validation and gold/stage2_dropped; the leakage audit runs on both outputs.
"""

from __future__ import annotations

import sys

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lake import (
    EmptyTableError,
    JobRun,
    add_landscape_argument,
    build_session,
    job_arguments,
    positive_int,
)
from lake.cli import run_job
from schemas import defaults
from spark_jobs.lib import retrieval as retrieval_inputs
from spark_jobs.lib import triplets as triplet_rules
from spark_jobs.lib.landscape import restrict as in_landscape
from spark_jobs.lib.leakage import write_audited

_AUDIT = {
    "id_columns": ("query_id", "positive_id"),
    "id_array_columns": ("negative_ids",),
    "family_columns": ("query_family_id", "positive_family_id"),
}


def _dropped(frame: DataFrame, reason: str | F.Column, count: F.Column | None = None) -> DataFrame:
    """gold/stage2_dropped rows of ``frame``'s query views: a reason (a literal, or a column
    such as ``triplets.unfiltered_views``' own) and a count (1 per view unless given)."""
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
    validation_size: int = defaults.VALIDATION_SIZE,
    run_id: str | None = None,
    args: dict | None = None,
    landscape: tuple[str, ...] = (),
) -> dict[str, int]:
    args = args or {"seed": seed, "validation_size": validation_size, "landscape": landscape}
    with JobRun(spark, lake, "build_triplets", args, run_id) as job:
        patents = job.read("silver/patents")
        excluded = job.read("silver/excluded_families")
        citations = job.read("bronze/citations")
        compact = job.read("gold/stage2_candidates")
        candidates = triplet_rules.candidate_rows(compact)
        views = in_landscape(job.read("silver/views"), patents, landscape)
        pool_ids = retrieval_inputs.candidates(patents, retrieval_inputs.pool_tac(views, excluded))
        positives = retrieval_inputs.positives(patents, citations, pool_ids).join(
            pool_ids.select(F.col("id").alias("positive_id"), F.col("lang").alias("positive_lang")),
            "positive_id",
        )
        queries = triplet_rules.query_info(patents)
        cands = triplet_rules.candidate_info(patents, pool_ids)
        pos = triplet_rules.barred_sets(citations, patents)

        filtered = triplet_rules.filter_candidates(candidates, queries, cands, pos)
        sampled = triplet_rules.sample_strata(triplet_rules.stratify(filtered), seed).persist(
            StorageLevel.MEMORY_AND_DISK
        )
        corners = triplet_rules.corner_counts(sampled)
        kept_views = corners.where(F.col("corners") >= triplet_rules.MIN_CORNER).select(
            *triplet_rules._QV
        )
        a_rows = triplet_rules.allowed(
            triplet_rules.a_citation_rows(citations), queries, cands, pos
        ).select("query_id", "cand_id", "cand_lang", "cand_family_id")
        pool_rows = triplet_rules.pool(
            sampled.join(kept_views, list(triplet_rules._QV), "left_semi"), a_rows, kept_views
        )
        query_langs = compact.select(*triplet_rules._QV, "query_lang").join(
            queries.select("query_id", "query_family_id"), "query_id"
        )
        full = triplet_rules.examples(pool_rows, positives, query_langs, seed).persist(
            StorageLevel.MEMORY_AND_DISK
        )
        complete = full.where(F.size("negative_ids") == triplet_rules.NEGATIVES)
        training, validation, overlapping = triplet_rules.split_validation(
            complete, validation_size, seed
        )

        try:
            write_audited(job, training, "gold/stage2_examples", **_AUDIT)
        except EmptyTableError:
            if validation.isEmpty():
                raise
            taken, total = validation.count(), complete.count()
            raise ValueError(
                f"--validation-size {validation_size} leaves nothing to train on: the "
                "validation split (whole query families) took "
                + (
                    f"all {total:,} complete examples"
                    if taken == total
                    else f"{taken:,} of the {total:,} complete examples and the other "
                    f"{total - taken:,} share a family with them"
                )
                + "; pass a smaller --validation-size (the paper's 2,000 is for corpora of "
                "hundreds of thousands of examples)"
            ) from None
        write_audited(job, validation, "gold/stage2_validation", **_AUDIT)

        drops = [
            _dropped(triplet_rules.unfiltered_views(compact, filtered, queries), F.col("reason")),
            _dropped(
                corners.where(F.col("corners") < triplet_rules.MIN_CORNER), "corner_strata_below_6"
            ),
            _dropped(
                full.where(F.size("negative_ids") < triplet_rules.NEGATIVES)
                .groupBy(*triplet_rules._QV)
                .count(),
                "fewer_than_8_negatives",
                F.col("count"),
            ),
            _dropped(
                overlapping.groupBy(*triplet_rules._QV).count(),
                "labelled_family_in_validation",
                F.col("count"),
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
    job.count("examples", job.written("gold/stage2_examples"))
    job.count("validation_examples", job.written("gold/stage2_validation"))
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
    parser.add_argument("--validation-size", type=positive_int, default=defaults.VALIDATION_SIZE)
    add_landscape_argument(parser, "queries, positives and negatives only from these sections")
    args = parser.parse_args(argv)
    spark = build_session("xembed-build-triplets", args.master)
    run(spark, args.lake, args.seed, args.validation_size, args.run_id, vars(args), args.landscape)
    return 0


if __name__ == "__main__":
    sys.exit(run_job("build_triplets", main))
