"""Benchmark: ingest + curate throughput against a plain Spark JSON -> Parquet copy.

Generates a corpus (default 100,000 patents), then in one Spark session times
  baseline: spark.read.json(export).write.parquet(...)   (the I/O-bound floor)
  ingest:   spark_jobs/ingest.py logic (parse, validate, dedupe, citations, Delta writes)
  curate:   spark_jobs/curate.py logic (texts, claim parsing, views, patents, families)
and writes benchmarks/results/ingest_curate.json with the ratio to the baseline.

    python benchmarks/ingest_curate.py --patents 100000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent


def _size(path: Path) -> int:
    return sum(
        p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patents", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--work", default=str(ROOT / "work"), help="scratch folder (deleted first)")
    parser.add_argument("--out", default=str(ROOT / "results" / "ingest_curate.json"))
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args(argv)

    from spark_jobs import curate, ingest
    from spark_jobs.lib.sample.generate import generate
    from spark_jobs.lib.session import build_session

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    spark = build_session("xembed-bench-ingest-curate", args.master)
    sample, lake = work / "sample", work / "lake"

    t = time.perf_counter()
    manifest = generate(spark, str(sample), args.patents, args.seed, 0.02)
    generate_s = time.perf_counter() - t
    print(f"generated {args.patents:,} patents in {generate_s:.1f}s", file=sys.stderr)

    t = time.perf_counter()
    spark.read.json(str(sample)).write.mode("overwrite").parquet(str(work / "baseline"))
    baseline_s = time.perf_counter() - t
    print(f"baseline JSON -> Parquet copy: {baseline_s:.1f}s", file=sys.stderr)

    t = time.perf_counter()
    ingest_metrics = ingest.run(spark, str(lake), str(sample), "google_patents")
    ingest_s = time.perf_counter() - t
    t = time.perf_counter()
    curate_metrics = curate.run(spark, str(lake))
    curate_s = time.perf_counter() - t

    total_s = ingest_s + curate_s
    result = {
        "benchmark": "ingest_curate",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "spark_master": args.master,
        },
        "patents": args.patents,
        "input_lines": manifest["lines"],
        "input_bytes_gzip": _size(sample),
        "baseline_parquet_bytes": _size(work / "baseline"),
        "seconds": {
            "generate": round(generate_s, 2),
            "baseline_json_to_parquet": round(baseline_s, 2),
            "ingest": round(ingest_s, 2),
            "curate": round(curate_s, 2),
            "ingest_plus_curate": round(total_s, 2),
        },
        "patents_per_second": {
            "baseline": round(args.patents / baseline_s, 1),
            "ingest": round(args.patents / ingest_s, 1),
            "curate": round(args.patents / curate_s, 1),
            "ingest_plus_curate": round(args.patents / total_s, 1),
        },
        "ratio_ingest_plus_curate_to_baseline": round(total_s / baseline_s, 2),
        "rows": {
            "bronze_publications": ingest_metrics["records_kept"],
            "citations": ingest_metrics["citations_total"],
            "silver_patents": curate_metrics["patents_out"],
            "silver_claims": curate_metrics["claims"],
        },
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(
        f"ingest+curate / baseline = {result['ratio_ingest_plus_curate_to_baseline']}x "
        f"({result['patents_per_second']['ingest_plus_curate']} vs "
        f"{result['patents_per_second']['baseline']} patents/s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
