"""Build Stage I weakly supervised pairs (gold/stage1_pairs) and their counts (gold/stage1_stats).

spark-submit spark_jobs/build_pairs.py --lake data/lake [--recipe xembed|r3|r4|qaecter]
    [--max-pairs N | --match-volume-of RECIPE] [--family-cap K] [--taxonomy-cap K] [--seed S]

Each recipe's pairs replace only that recipe's partition; ``--match-volume-of r3`` samples
exactly r3's pair count, proportionally across the recipe's signals, and stores it as
``<recipe>-matched-r3`` (README "Training recipes").
"""

from __future__ import annotations

import sys

from pyspark import StorageLevel
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lake import (
    JobRun,
    add_landscape_argument,
    build_session,
    iso_date,
    job_arguments,
    positive_int,
)
from lake.cli import run_job
from schemas import defaults
from spark_jobs.lib import pairs as pair_rules
from spark_jobs.lib.landscape import restrict as in_landscape
from spark_jobs.lib.leakage import LeakageError, late_citations, training_views, write_audited


def run(
    spark: SparkSession,
    lake: str,
    recipe: str = defaults.DEFAULT_RECIPE,
    max_pairs: int | None = None,
    family_cap: int | None = None,
    seed: int = 13,
    run_id: str | None = None,
    args: dict | None = None,
    landscape: tuple[str, ...] = (),
    match_volume_of: str | None = None,
    taxonomy_cap: int = defaults.TAXONOMY_CAP,
    eval_cutoff: str | None = None,
) -> dict[str, int]:
    """Replace ``recipe``'s pairs (or its matched-volume control's) in gold/stage1_pairs."""
    if max_pairs is not None and match_volume_of:
        raise ValueError("--max-pairs and --match-volume-of exclude each other")
    name = defaults.pair_set_name({"recipe": recipe, "match_volume_of": match_volume_of})
    args = args or {
        "recipe": recipe,
        "max_pairs": max_pairs,
        "family_cap": family_cap,
        "seed": seed,
        "landscape": landscape,
        "match_volume_of": match_volume_of,
        "taxonomy_cap": taxonomy_cap,
        "eval_cutoff": eval_cutoff,
    }
    with JobRun(spark, lake, "build_pairs", args, run_id) as job:
        target = _matched_volume(job, match_volume_of) if match_volume_of else max_pairs
        views = training_views(job.read("silver/views"), job.read("silver/excluded_families"))
        patents = job.read("silver/patents")
        if landscape:
            views = in_landscape(views, patents, landscape)
        graph = {}
        if pair_rules.needs_graph(recipe):
            cutoff = eval_cutoff or _split_cutoff(job)
            graph = {
                "citations": job.read("bronze/citations"),
                "cutoff": cutoff,
                "taxonomy_cap": taxonomy_cap,
                "seed": seed,
            }
            job.info(f"citation pairs only between patents published before {cutoff}")
        candidates = pair_rules.candidate_pairs(
            pair_rules.view_keys(views), recipe, patents, **graph
        )
        # one shuffle groups the candidates by text pair: the drops and all their counters
        # come from it, and only the grouped rows are kept in memory
        grouped = pair_rules.group_by_texts(candidates).persist(StorageLevel.MEMORY_AND_DISK)
        tally = (
            grouped.groupBy("pair_type", "signal", pair_rules.identical_texts().alias("same"))
            .agg(F.count("*").alias("n"), F.sum("copies").alias("copies"))
            .collect()
        )
        job.count("pairs_candidates", sum(r["copies"] for r in tally))
        job.count("dropped_identical_text", sum(r["copies"] for r in tally if r["same"]))
        distinct = [r for r in tally if not r["same"]]
        n_deduped = sum(r["n"] for r in distinct)
        job.count("dropped_duplicate_text_pair", sum(r["copies"] - r["n"] for r in distinct))
        pairs = pair_rules.different_texts(grouped)
        if family_cap:
            pairs = pair_rules.cap_per_family(pairs, family_cap, seed)
            distinct = pairs.groupBy("pair_type", "signal").agg(F.count("*").alias("n")).collect()
        counts = {r["pair_type"]: r["n"] for r in distinct}
        signal_of = {r["pair_type"]: r["signal"] for r in distinct}
        available = sum(counts.values())
        if match_volume_of and target > available:
            raise ValueError(
                f"--match-volume-of {match_volume_of}: {recipe} has {available:,} pairs, fewer "
                f"than the {target:,} of {match_volume_of}; a smaller recipe cannot be the "
                "control of a larger one"
            )
        if max_pairs is not None and max_pairs > available:
            # exactly N is impossible: say so, and record the shortfall in the counters
            job.count("max_pairs_requested", max_pairs)
            job.count("max_pairs_shortfall", max_pairs - available)
            job.info(
                f"WARNING: --max-pairs {max_pairs:,} asked for more pairs than the "
                f"{available:,} available; writing all {available:,}"
            )
        if target is not None:
            quota = pair_rules.signal_quotas(counts, signal_of, target)
            pairs = pair_rules.sample_pairs(pairs, quota, counts, seed)
        pairs = pairs.withColumn("recipe", F.lit(name)).select(*pair_rules.PAIR_COLUMNS)
        if graph:
            late = late_citations(pairs, patents, graph["cutoff"])
            if late:
                raise LeakageError(
                    f"{late} citation pair(s) name a patent published on or after "
                    f"{graph['cutoff']}; nothing was written"
                )

        only_this = f"recipe = '{name}'"
        write_audited(
            job,
            pairs,
            "gold/stage1_pairs",
            replace_where=only_this,
            id_columns=("anchor_id", "positive_id"),
            family_columns=("family_id", "positive_family_id"),
        )
        written = job.read("gold/stage1_pairs").where(F.col("recipe") == name)
        job.write(pair_rules.stats(written), "gold/stage1_stats", replace_where=only_this)

        job.count("dropped_family_cap", n_deduped - available)
        if match_volume_of:
            job.count("matched_volume", target)
        grouped.unpersist()
        job.count("pairs_written", _print_stats(job, name))
        job.count("dropped_max_pairs", available - job.metrics["pairs_written"])
        return job.metrics


def _matched_volume(job: JobRun, other: str) -> int:
    """The number of pairs recipe ``other`` holds in gold/stage1_pairs (refused when they were
    built from other table versions than the lake's: the control would match a stale count)."""
    pairs = job.read("gold/stage1_pairs")
    job.check_partition(
        "gold/stage1_pairs",
        "build_pairs",
        lambda a: defaults.pair_set_name(a) == other,
        f"the {other!r} pairs of gold/stage1_pairs",
        f"build_pairs.py --recipe {other}",
    )
    n = pairs.where(F.col("recipe") == other).count()
    if not n:
        raise ValueError(
            f"--match-volume-of {other}: gold/stage1_pairs holds no pairs of recipe {other!r}; "
            f"run build_pairs.py --recipe {other} first"
        )
    job.info(f"matching the volume of {other}: {n:,} pairs")
    return n


def _split_cutoff(job: JobRun) -> str:
    """The evaluation cutoff of the split run that wrote silver/excluded_families."""
    cutoff = job.producer_args("silver/excluded_families").get("eval_cutoff")
    if not cutoff:
        cutoff = defaults.EVAL_CUTOFF
        job.info(
            f"silver/excluded_families records no split cutoff: using {cutoff} "
            "(pass --eval-cutoff to choose)"
        )
    return str(cutoff)


def _print_stats(job: JobRun, name: str) -> int:
    """Print recipe ``name``'s rows of gold/stage1_stats, count them per signal and pair
    type; returns the pairs written."""
    rows = (
        job.read("gold/stage1_stats")
        .where(F.col("recipe") == name)
        .orderBy("signal", "pair_type", "anchor_lang", "positive_lang")
        .collect()
    )
    job.info(f"pairs of {name}:")
    job.info(f"{'signal':<15} {'pair type':<12} {'anchor':>6} {'positive':>8} {'pairs':>12}")
    for r in rows:
        job.info(
            f"{r['signal']:<15} {r['pair_type']:<12} {r['anchor_lang']:>6} "
            f"{r['positive_lang']:>8} {r['n_pairs']:>12,d}"
        )
    for key in ("signal", "pair_type"):
        for value in sorted({r[key] for r in rows}):
            n = sum(r["n_pairs"] for r in rows if r[key] == value)
            job.count(f"pairs_{value}", n)
            if key == "signal":
                job.info(f"{'signal ' + value:<35} {n:>12,d}")
    total = sum(r["n_pairs"] for r in rows)
    job.info(f"{'total':<35} {total:>12,d}")
    return total


def main(argv: list[str] | None = None) -> int:
    parser = job_arguments(__doc__.splitlines()[0])
    parser.add_argument(
        "--recipe",
        choices=defaults.RECIPES,
        default=defaults.DEFAULT_RECIPE,
        help="; ".join(f"{r}: {', '.join(t)}" for r, t in pair_rules.RECIPES.items()),
    )
    volume = parser.add_mutually_exclusive_group()
    volume.add_argument(
        "--match-volume-of",
        choices=defaults.RECIPES,
        default=None,
        help="matched-volume control: exactly as many pairs as this recipe holds, "
        "proportionally across signals, stored as <recipe>-matched-<this>",
    )
    volume.add_argument(
        "--max-pairs",
        type=positive_int,
        default=None,
        help="sample exactly this many pairs, proportionally across signals and pair types (fewer only "
        "when fewer exist: a warning and the max_pairs_shortfall counter say so)",
    )
    parser.add_argument(
        "--family-cap",
        type=positive_int,
        default=None,
        help="at most this many pairs per family and pair type",
    )
    parser.add_argument(
        "--taxonomy-cap",
        type=positive_int,
        default=defaults.TAXONOMY_CAP,
        help="at most this many taxonomy pairs per IPC subclass",
    )
    parser.add_argument(
        "--eval-cutoff",
        default=None,
        type=iso_date,
        help="citation pairs only between patents published before this date "
        "(default: the cutoff of the split run that excluded the test families)",
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
        args.match_volume_of,
        args.taxonomy_cap,
        args.eval_cutoff and args.eval_cutoff.isoformat(),
    )
    return 0


if __name__ == "__main__":
    sys.exit(run_job("build_pairs", main))
