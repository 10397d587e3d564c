"""Benchmark: Stage I pair building against a plain Spark read-and-write of the same bytes.

Prepares a lake from a generated corpus (default 100,000 patents: generate -> ingest ->
curate -> split, not timed), then in one Spark session on local[2] times
  baseline:    read silver/views (its columns before text_sha256 joined them: the same bytes
               as the first measurement) and write them as Parquet
  build_pairs: spark_jobs/build_pairs.py logic (keys, joins, dedupe, audit, stats), with the
               seconds of each action by the line that called it (benchmarks/_actions.py)
and writes benchmarks/results/build_pairs.json with pairs/s, per-core figures and the ratio.

    python benchmarks/build_pairs.py --patents 100000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _actions import ActionTimer
from _common import empty_folder, machine, prepare_lake, size_bytes, timed, write_result

BASELINE_COLUMNS = ("publication_number", "family_id", "lang", "view", "text", "n_chars")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--patents", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--work", default=str(Path(__file__).resolve().parent / "work" / "build_pairs")
    )
    parser.add_argument("--out", default=None)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)

    from lake import build_session
    from spark_jobs import build_pairs

    work = empty_folder(args.work)
    spark = build_session("xembed-bench-build-pairs", args.master)
    lake = work / "lake"
    prep: dict[str, float] = {}
    with timed("prepare_lake", prep):
        prepare_lake(spark, work, args.patents, args.seed)

    seconds: dict[str, float] = {}
    views_path = lake / "silver" / "views"
    with timed("baseline_read_write_views", seconds):
        spark.read.format("delta").load(str(views_path)).select(*BASELINE_COLUMNS).write.mode(
            "overwrite"
        ).parquet(str(work / "baseline"))
    with timed("build_pairs", seconds), ActionTimer() as actions:
        metrics = build_pairs.run(spark, str(lake))
    actions.print("build_pairs", seconds["build_pairs"])

    pairs = metrics["pairs_written"]
    cores = int(spark.sparkContext.defaultParallelism)
    pairs_per_s = pairs / seconds["build_pairs"]
    ratio = round(seconds["build_pairs"] / seconds["baseline_read_write_views"], 2)
    n_views = spark.read.format("delta").load(str(views_path)).count()
    write_result(
        "build_pairs",
        {
            "machine": machine(args.master),
            "cores": cores,
            "patents": args.patents,
            "views_rows": n_views,
            "views_bytes_delta": size_bytes(views_path),
            "pairs_written": pairs,
            "pair_counts": {
                k.removeprefix("pairs_"): v
                for k, v in metrics.items()
                if k.startswith("pairs_") and k not in ("pairs_written", "pairs_candidates")
            },
            "candidates": metrics["pairs_candidates"],
            "seconds": {**prep, **seconds},
            "pairs_per_second": round(pairs_per_s, 1),
            "pairs_per_second_per_core": round(pairs_per_s / cores, 1),
            "views_bytes_per_second_per_core_baseline": round(
                size_bytes(views_path) / seconds["baseline_read_write_views"] / cores
            ),
            "ratio_build_pairs_to_baseline": ratio,
            "where_time_goes": {"seconds_in_actions": actions.total(), "top": actions.top()},
        },
        args.out,
    )
    print(f"build_pairs / baseline = {ratio}x ({pairs_per_s:,.0f} pairs/s on {cores} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
