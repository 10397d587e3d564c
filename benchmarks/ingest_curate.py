"""Benchmark: ingest + curate throughput against a plain Spark JSON -> Parquet copy.

Generates a corpus (default 100,000 patents), then in one Spark session times
  baseline: spark.read.json(export).write.parquet(...)   (the I/O-bound floor; run before
            and again after the jobs, the ratio is to the mean of the two)
  ingest:   spark_jobs/ingest.py logic (parse, validate, dedupe, citations, Delta writes)
  curate:   spark_jobs/curate.py logic (texts, claim parsing, views, patents, families)
(each job's seconds by the line of each Spark action, benchmarks/_actions.py)
and writes benchmarks/results/ingest_curate.json with the ratio to the baseline and the bytes
each job wrote per table (the jobs write the texts several times: bronze, views, claims).

    python benchmarks/ingest_curate.py --patents 100000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _actions import ActionTimer
from _common import empty_folder, machine, size_bytes, timed, write_result

# the tables ingest and curate write (their bytes on disk are recorded beside the times)
WRITTEN = (
    "bronze/publications",
    "bronze/citations",
    "quarantine",
    "silver/views",
    "silver/claims",
    "silver/patents",
    "silver/families",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--patents", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--work", default=str(Path(__file__).resolve().parent / "work" / "ingest_curate")
    )
    parser.add_argument("--out", default=None, help="result JSON (default benchmarks/results/)")
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args(argv)

    from lake import build_session
    from spark_jobs import curate, ingest
    from spark_jobs.lib.sample.generate import generate

    work = empty_folder(args.work)
    spark = build_session("xembed-bench-ingest-curate", args.master)
    sample, lake = work / "sample", work / "lake"
    seconds: dict[str, float] = {}
    with timed("generate", seconds):
        manifest = generate(spark, str(sample), args.patents, args.seed, 0.02)
    with timed("baseline_json_to_parquet", seconds):
        spark.read.json(str(sample)).write.mode("overwrite").parquet(str(work / "baseline"))
    with timed("ingest", seconds), ActionTimer() as ingest_actions:
        ingest_metrics = ingest.run(spark, str(lake), str(sample), "google_patents")
    ingest_actions.print("ingest", seconds["ingest"])
    with timed("curate", seconds), ActionTimer() as curate_actions:
        curate_metrics = curate.run(spark, str(lake))
    curate_actions.print("curate", seconds["curate"])
    seconds["ingest_plus_curate"] = round(seconds["ingest"] + seconds["curate"], 2)
    with timed("baseline_again", seconds):  # the copy's time moves by ~30% between runs
        spark.read.json(str(sample)).write.mode("overwrite").parquet(str(work / "baseline"))
    baseline = round((seconds["baseline_json_to_parquet"] + seconds["baseline_again"]) / 2, 2)
    seconds["baseline_mean"] = baseline
    written = {name: size_bytes(lake / name) for name in WRITTEN}
    copy_bytes = size_bytes(work / "baseline")
    written_over_copy = round(sum(written.values()) / copy_bytes, 2)

    per_s = {
        k: round(args.patents / seconds[k], 1)
        for k in ("baseline_mean", "ingest", "curate", "ingest_plus_curate")
    }
    ratio = round(seconds["ingest_plus_curate"] / baseline, 2)
    write_result(
        "ingest_curate",
        {
            "machine": machine(args.master),
            "patents": args.patents,
            "input_lines": manifest["lines"],
            "input_bytes_gzip": size_bytes(sample),
            "baseline_parquet_bytes": copy_bytes,
            "written_bytes": written,
            "written_bytes_over_baseline": written_over_copy,
            "seconds": seconds,
            "patents_per_second": per_s,
            "ratio_ingest_plus_curate_to_baseline": ratio,
            "where_time_goes": {
                job: {"seconds_in_actions": timer.total(), "top": timer.top()}
                for job, timer in (("ingest", ingest_actions), ("curate", curate_actions))
            },
            "rows": {
                "bronze_publications": ingest_metrics["records_kept"],
                "citations": ingest_metrics["citations_total"],
                "silver_patents": curate_metrics["patents_out"],
                "silver_claims": curate_metrics["claims"],
            },
        },
        args.out,
    )
    print(
        f"ingest+curate / baseline = {ratio}x ({per_s['ingest_plus_curate']} vs "
        f"{per_s['baseline_mean']} patents/s); the jobs wrote "
        f"{written_over_copy:.1f}x the copy's bytes"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
