"""Build Stage I weakly supervised pairs (gold/stage1_pairs) and their counts (gold/stage1_stats).

spark-submit spark_jobs/build_pairs.py --lake data/lake [--recipe xembed|r3] [--max-pairs N] [--seed S]
"""

from __future__ import annotations

import sys

from pyspark import StorageLevel
from pyspark.sql import SparkSession

from lake import JobRun, add_landscape_argument, build_session, job_arguments, positive_int
from lake.cli import run_job
from spark_jobs.lib import pairs as pair_rules
from spark_jobs.lib.landscape import restrict as in_landscape
from spark_jobs.lib.leakage import training_views, write_audited


def run(
    spark: SparkSession,
    lake: str,
    recipe: str = "xembed",
    max_pairs: int | None = None,
    family_cap: int | None = None,
    seed: int = 13,
    run_id: str | None = None,
    args: dict | None = None,
    landscape: tuple[str, ...] = (),
) -> dict[str, int]:
    args = args or {
        "recipe": recipe,
        "max_pairs": max_pairs,
        "family_cap": family_cap,
        "seed": seed,
        "landscape": landscape,
    }
    with JobRun(spark, lake, "build_pairs", args, run_id) as job:
        views = training_views(job.read("silver/views"), job.read("silver/excluded_families"))
        if landscape:
            views = in_landscape(views, job.read("silver/patents"), landscape)
        candidates = pair_rules.candidate_pairs(pair_rules.view_keys(views), recipe).persist(
            StorageLevel.MEMORY_AND_DISK
        )
        distinct = pair_rules.drop_identical(candidates)
        deduped = pair_rules.drop_duplicate_texts(distinct).persist(StorageLevel.MEMORY_AND_DISK)
        pairs = deduped
        if family_cap:
            pairs = pair_rules.cap_per_family(pairs, family_cap, seed)
        counts = {r["pair_type"]: r["count"] for r in pairs.groupBy("pair_type").count().collect()}
        available = sum(counts.values())
        if max_pairs is not None and max_pairs > available:
            # exactly N is impossible: say so, and record the shortfall in the counters
            job.count("max_pairs_requested", max_pairs)
            job.count("max_pairs_shortfall", max_pairs - available)
            job.info(
                f"WARNING: --max-pairs {max_pairs:,} asked for more pairs than the "
                f"{available:,} available; writing all {available:,}"
            )
        if max_pairs is not None:
            pairs = pair_rules.sample_pairs(
                pairs, pair_rules.quotas(counts, max_pairs), counts, seed
            )

        write_audited(
            job,
            pairs.select(*pair_rules.PAIR_COLUMNS),
            "gold/stage1_pairs",
            id_columns=("anchor_id", "positive_id"),
            family_columns=("family_id",),
        )
        written = job.read("gold/stage1_pairs")
        job.write(pair_rules.stats(written), "gold/stage1_stats")

        job.count("pairs_candidates", candidates.count())
        job.count("dropped_identical_text", job.metrics["pairs_candidates"] - distinct.count())
        job.count("dropped_duplicate_text_pair", distinct.count() - deduped.count())
        job.count("dropped_family_cap", deduped.count() - sum(counts.values()))
        job.count("pairs_written", written.count())
        job.count("dropped_max_pairs", sum(counts.values()) - job.metrics["pairs_written"])
        candidates.unpersist()
        deduped.unpersist()
        _print_stats(job)
        return job.metrics


def _print_stats(job: JobRun) -> None:
    rows = (
        job.read("gold/stage1_stats").orderBy("pair_type", "anchor_lang", "positive_lang").collect()
    )
    job.info(f"{'pair type':<12} {'anchor':>6} {'positive':>8} {'pairs':>12}")
    for r in rows:
        job.info(
            f"{r['pair_type']:<12} {r['anchor_lang']:>6} {r['positive_lang']:>8} {r['n_pairs']:>12,d}"
        )
    for pair_type in sorted({r["pair_type"] for r in rows}):
        n = sum(r["n_pairs"] for r in rows if r["pair_type"] == pair_type)
        job.count(f"pairs_{pair_type}", n)


def main(argv: list[str] | None = None) -> int:
    parser = job_arguments(__doc__.splitlines()[0])
    parser.add_argument(
        "--recipe",
        choices=sorted(pair_rules.RECIPES),
        default="xembed",
        help="xembed: ABS-CLAIM, CLAIM-DESC, ABS-ABS, CLAIM-CLAIM; r3: ABS-FIC",
    )
    parser.add_argument(
        "--max-pairs",
        type=positive_int,
        default=None,
        help="sample exactly this many pairs, proportionally across pair types (fewer only "
        "when fewer exist: a warning and the max_pairs_shortfall counter say so)",
    )
    parser.add_argument(
        "--family-cap",
        type=positive_int,
        default=None,
        help="at most this many pairs per family and pair type",
    )
    parser.add_argument("--seed", type=int, default=13)
    add_landscape_argument(parser, "pairs only from patents of these sections")
    args = parser.parse_args(argv)
    spark = build_session("xembed-build-pairs", args.master)
    run(
        spark,
        args.lake,
        args.recipe,
        args.max_pairs,
        args.family_cap,
        args.seed,
        args.run_id,
        vars(args),
        args.landscape,
    )
    return 0


if __name__ == "__main__":
    sys.exit(run_job("build_pairs", main))
