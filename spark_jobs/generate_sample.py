"""Generate a realistic trilingual sample corpus in the Google Patents export format.

spark-submit spark_jobs/generate_sample.py --out data/sample --patents 2000 --seed 7
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output folder (any Spark URI)")
    parser.add_argument("--patents", type=int, default=2000, help="publications to write")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--bad-share",
        type=float,
        default=0.02,
        help="share of records corrupted like real exports go wrong",
    )
    parser.add_argument("--partitions", type=int, default=None, help="output files")
    parser.add_argument("--master", default=None)
    args = parser.parse_args(argv)
    if not 0 <= args.bad_share < 1:
        parser.error(f"--bad-share must be in [0, 1), got {args.bad_share}")

    from spark_jobs.lib.sample.generate import generate
    from spark_jobs.lib.session import build_session

    spark = build_session("xembed-generate-sample", args.master)
    manifest = generate(spark, args.out, args.patents, args.seed, args.bad_share, args.partitions)
    print(json.dumps(manifest, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
