"""Export a training dataset from the lake into streamable shards with a manifest.

The rows are audited for test-family leakage before any shard is written (the job fails
and writes nothing on a leak); the manifest records the passed audit, and the trainer
refuses shards whose manifest lacks it.

    spark-submit spark_jobs/export_training.py --lake data/lake --dataset stage1|stage2|stage2_validation|phage \
        --format parquet|swift_jsonl --out DIR [--recipe NAME (stage1)] [--rows-per-shard N] [--max-chars N]

``phage`` (Parquet only): one row per training-pool patent and claim language with its claims,
its ``silver/claim_graph`` edges and its IPC subclasses (``trainer.train --stage phage``);
``--landscape`` restricts it to some IPC sections, as build_pairs does for the pairs.
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lake import (
    JobRun,
    add_landscape_argument,
    build_session,
    job_arguments,
    path_or_uri,
    positive_int,
)
from lake.cli import run_job
from schemas import defaults
from spark_jobs.lib import export as export_rules
from spark_jobs.lib.landscape import restrict
from spark_jobs.lib.leakage import audit_no_leakage, training_views

_STAGE2_KEYS = ("query_id", "query_view", "positive_id")
DATASETS = {
    # dataset -> (table, key columns that order and shard the rows)
    "stage1": (
        "gold/stage1_pairs",
        ("recipe", "pair_type", "anchor_id", "anchor_lang", "positive_id", "positive_lang"),
    ),
    "stage2": ("gold/stage2_examples", _STAGE2_KEYS),
    "stage2_validation": ("gold/stage2_validation", _STAGE2_KEYS),
    "phage": ("silver/claims", ("publication_number", "lang")),
}
_STAGE2_AUDIT = {
    "id_columns": ("query_id", "positive_id"),
    "id_array_columns": ("negative_ids",),
    "family_columns": ("family_id", "positive_family_id"),
}
AUDITED_COLUMNS = {  # dataset -> the columns of its rows that name patents and families
    "stage1": {
        "id_columns": ("anchor_id", "positive_id"),
        "family_columns": ("family_id", "positive_family_id"),
    },
    "stage2": _STAGE2_AUDIT,
    "stage2_validation": _STAGE2_AUDIT,
    "phage": {"id_columns": ("publication_number",), "family_columns": ("family_id",)},
}


def run(
    spark: SparkSession,
    lake: str,
    dataset: str,
    fmt: str,
    out: str,
    rows_per_shard: int = 100_000,
    max_chars: int | None = None,
    seed: int = 13,
    run_id: str | None = None,
    args: dict | None = None,
    recipe: str | None = None,
    landscape: tuple[str, ...] = (),
) -> dict:
    """Write the shards and _manifest.json under ``out``; returns the manifest."""
    if dataset not in DATASETS:
        raise ValueError(f"--dataset must be one of {sorted(DATASETS)}, got {dataset!r}")
    table, keys = DATASETS[dataset]
    if dataset == "phage" and fmt != "parquet":
        raise ValueError("--dataset phage is written as Parquet only (--format parquet)")
    if landscape and dataset != "phage":
        raise ValueError(
            f"--landscape applies to --dataset phage only, not {dataset!r}: the pairs and "
            "triplets are restricted when they are built (build_pairs.py --landscape)"
        )
    if recipe is not None and dataset != "stage1":
        raise ValueError(
            f"--recipe applies to --dataset stage1 only, not {dataset!r}: the Stage II "
            "triplets and the PHAGE rows have one pair set each"
        )
    if dataset == "stage1" and recipe is None:
        recipe = defaults.DEFAULT_RECIPE
    given = args or {
        "dataset": dataset,
        "format": fmt,
        "out": out,
        "rows_per_shard": rows_per_shard,
        "max_chars": max_chars,
        "seed": seed,
        "landscape": landscape,
    }
    args = {**given, "recipe": recipe}  # the run log names the pair set exported, even by default
    with JobRun(spark, lake, "export_training", args, run_id) as job:
        if dataset == "stage1":
            pairs = source = job.read(table).where(F.col("recipe") == recipe)
            if pairs.isEmpty():
                raise ValueError(
                    f"gold/stage1_pairs holds no pairs of recipe {recipe!r}; run "
                    f"build_pairs.py --recipe {defaults.base_recipe(recipe)} first"
                )
            rows = export_rules.stage1_rows(pairs, job.read("silver/views"), max_chars)
            base, _, other = recipe.partition(defaults.MATCHED)
            if other:
                _check_matched_volume(job.read(table), recipe, other)
            job.check_partition(
                table,
                "build_pairs",
                lambda a: defaults.pair_set_name(a) == recipe,
                f"the {recipe!r} pairs of {table}",
                f"build_pairs.py --recipe {base}"
                + (f" --match-volume-of {other}" if other else ""),
            )
        elif dataset == "phage":
            pool = training_views(job.read(table), job.read("silver/excluded_families"))
            pool = restrict(pool, job.read("silver/patents"), landscape)
            source = pool.select(*keys).distinct()
            rows = export_rules.phage_rows(
                pool, job.read("silver/claim_graph"), job.read("silver/patents"), max_chars
            )
            if rows.isEmpty():
                raise ValueError(
                    "no training-pool patent has claims in silver/claims"
                    + (f" inside the landscape {','.join(landscape)}" if landscape else "")
                    + "; nothing to export for PHAGE"
                )
        else:
            source = job.read(table)
            rows = export_rules.stage2_rows(
                source, job.read("silver/views"), job.read("silver/patents"), max_chars
            )
        # the consumer audits what it is about to write: a leaked row never reaches a shard
        patents, excluded = job.read("silver/patents"), job.read("silver/excluded_families")
        audit = audit_no_leakage(rows, table, patents, excluded, **AUDITED_COLUMNS[dataset])
        job.count("audit_rows", audit.rows_checked)
        shards = export_rules.write_shards(spark, rows, out, fmt, rows_per_shard, seed, keys)
        counts, content_hash = export_rules.shard_counts_and_hash(spark, out, fmt)
        written = sum(n for n, _ in counts.values())  # every shard file there, read back
        per_shard = {s["file"]: counts.get(s["file"], (0, None)) for s in shards}
        export_rules.check_nothing_lost(source, rows, written, list(keys), table)
        manifest = {
            "dataset": dataset,
            # the pair set (a recipe or its matched control) the trainer's config section follows
            "recipe": {"stage1": recipe, "phage": "phage"}.get(dataset, defaults.DEFAULT_RECIPE),
            "format": fmt,
            "rows": written,
            # rows and bytes of each shard: the trainer refuses shards changed after the audit
            "shards": [{"file": f, "rows": n, "bytes": b} for f, (n, b) in per_shard.items()],
            "columns": rows.columns
            if fmt == "parquet"
            else ["messages", "positive_messages"]
            + (["negative_messages"] if dataset != "stage1" else []),
            "delta_versions": dict(job.inputs),
            # the runs that wrote them, and where: another lake (or this one rebuilt) has the
            # same version numbers, not the same runs (the held-out check compares them)
            "delta_runs": {n: s.run_id for n, s in job.snapshots.items()},
            "lake": path_or_uri(lake),
            "content_hash": content_hash,
            "max_chars": max_chars,
            "seed": seed,
            "run_id": job.run_id,
            "leakage_audit": {
                "status": "passed",
                "rows_checked": audit.rows_checked,
                "excluded_families_version": job.inputs["silver/excluded_families"],
            },
        }
        export_rules.write_manifest(spark, out, manifest)
        job.count("rows", manifest["rows"])
        job.count("shards", len(shards))
        job.info(
            f"{manifest['rows']:,} rows in {len(shards)} shards under {out} "
            f"(content hash {content_hash})"
        )
        return manifest


def main(argv: list[str] | None = None) -> int:
    parser = job_arguments(__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=sorted(DATASETS), required=True)
    parser.add_argument("--format", choices=export_rules.FORMATS, default="parquet")
    parser.add_argument(
        "--out", type=path_or_uri, required=True, help="output folder (any Spark URI)"
    )
    parser.add_argument("--rows-per-shard", type=positive_int, default=100_000)
    parser.add_argument(
        "--max-chars", type=positive_int, default=None, help="cap every text at N characters"
    )
    parser.add_argument(
        "--recipe",
        default=None,
        help="--dataset stage1 only: the pair set to export (a recipe, or "
        f"<recipe>-matched-<recipe>; default {defaults.DEFAULT_RECIPE})",
    )
    parser.add_argument("--seed", type=int, default=13)
    add_landscape_argument(parser, "--dataset phage only: patents of these sections")
    args = parser.parse_args(argv)
    spark = build_session("xembed-export-training", args.master)
    run(
        spark,
        args.lake,
        args.dataset,
        args.format,
        args.out,
        args.rows_per_shard,
        args.max_chars,
        args.seed,
        args.run_id,
        vars(args),
        args.recipe,
        args.landscape,
    )
    return 0


def _check_matched_volume(pairs, control: str, other: str) -> None:
    """A matched-volume control holds exactly as many pairs as ``other`` did when it was
    built; ``other`` rebuilt since (another landscape, seed, cap) leaves a control that no
    longer matches anything, which would train and compare as if it did."""
    counts = {
        r["recipe"]: r["n"]
        for r in pairs.where(F.col("recipe").isin(control, other))
        .groupBy("recipe")
        .agg(F.count("*").alias("n"))
        .collect()
    }
    if counts.get(control, 0) != counts.get(other, 0):
        base = control.partition(defaults.MATCHED)[0]
        raise ValueError(
            f"recipe {control!r} holds {counts.get(control, 0):,} pairs but {other!r} now holds "
            f"{counts.get(other, 0):,}: {other} was rebuilt after its control; rebuild the "
            f"control (build_pairs.py --recipe {base} --match-volume-of {other})"
        )


if __name__ == "__main__":
    sys.exit(run_job("export_training", main))
