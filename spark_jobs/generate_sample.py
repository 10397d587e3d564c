"""Generate a realistic trilingual sample corpus in the Google Patents export format.

spark-submit spark_jobs/generate_sample.py --out data/sample --patents 2000 --seed 7
spark-submit spark_jobs/generate_sample.py --out data/hard --difficulty hard --distractor-share 0.3
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from lake import build_session, path_or_uri, positive_int
from lake.cli import run_job
from spark_jobs.lib.sample.generate import generate
from spark_jobs.lib.sample.plan import DIFFICULTY_PRESETS, Difficulty

# flag -> (Difficulty field, type, help); unset flags take the --difficulty preset's value
_KNOBS = {
    "--core-features": ("core_features", int, "features in a cluster's core combination"),
    "--shared-core": ("shared_core", int, "core features shared with the partner cluster (Y)"),
    "--field-pool": ("field_pool", int, "components a field's clusters draw from"),
    "--fields": ("fields", int, "IPC fields the clusters are spread over (0: all)"),
    "--paraphrase-noise": (
        "paraphrase_noise",
        float,
        "probability that a family's text drops or replaces one core feature",
    ),
    "--abstract-omission": (
        "abstract_omission",
        float,
        "probability that a member's abstract leaves some core features out",
    ),
    "--distractor-share": (
        "distractor_share",
        float,
        "share of families in no cluster (hard negatives, no X citations)",
    ),
}


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, Difficulty]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument(
        "--out", type=path_or_uri, required=True, help="output folder (any Spark URI)"
    )
    parser.add_argument("--patents", type=positive_int, default=2000, help="publications to write")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--bad-share",
        type=float,
        default=0.02,
        help="share of records corrupted like real exports go wrong",
    )
    parser.add_argument(
        "--partitions", type=positive_int, default=None, help="output files (default: by size)"
    )
    parser.add_argument("--master", default=None)
    parser.add_argument(
        "--difficulty",
        choices=sorted(DIFFICULTY_PRESETS),
        default="easy",
        help="preset of the knobs below (easy: the original corpus); a knob flag overrides it",
    )
    for flag, (name, kind, text) in _KNOBS.items():
        default = getattr(Difficulty(), name)
        parser.add_argument(
            flag, dest=name, type=kind, default=None, help=f"{text} (easy: {default})"
        )
    args = parser.parse_args(argv)
    if not 0 <= args.bad_share < 1:
        parser.error(f"--bad-share must be in [0, 1), got {args.bad_share}")
    overrides = {
        name: getattr(args, name)
        for name, _, _ in _KNOBS.values()
        if getattr(args, name) is not None
    }
    try:
        difficulty = dataclasses.replace(DIFFICULTY_PRESETS[args.difficulty], **overrides)
        difficulty.check_glossary()
    except ValueError as e:
        parser.error(str(e))
    return args, difficulty


def main(argv: list[str] | None = None) -> int:
    args, difficulty = parse_args(argv)

    spark = build_session("xembed-generate-sample", args.master)
    manifest = generate(
        spark,
        args.out,
        args.patents,
        args.seed,
        args.bad_share,
        args.partitions,
        difficulty=difficulty,
    )
    print(json.dumps(manifest, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(run_job("generate_sample", main))
