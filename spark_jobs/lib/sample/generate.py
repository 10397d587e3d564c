"""Spark-parallel generation of the sample corpus (Google Patents JSONL.gz export)."""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd
from pyspark.sql import SparkSession

from lake import fs
from spark_jobs.lib.sample import plan as sample_plan
from spark_jobs.lib.sample import records as sample_records


def expected_quarantine(kinds: Counter) -> dict[str, int]:
    """Quarantine rows (by reason prefix) that ingest must produce for these corruptions."""
    out: Counter = Counter()
    for kind, (reason, lines) in sample_records.CORRUPTIONS.items():
        out[reason] += kinds.get(kind, 0) * lines
    return dict(out)


def _each_family(rows_of, plan, bad_share: float, name: str):
    """A mapInPandas function: ``rows_of(plan, family, bad_share)`` for each family id, as one
    string column ``name``."""

    def emit(batches):
        for batch in batches:
            values = [
                value
                for family in batch["id"].tolist()
                for value in rows_of(plan, family, bad_share)
            ]
            yield pd.DataFrame({name: pd.Series(values, dtype=object)})

    return emit


def _sample_file(name: str) -> bool:
    """Whether ``name`` is something a generator run writes into its folder (or its checksum,
    or a killed run's part file before the rename)."""
    name = name.removeprefix(".").removesuffix(".crc")
    return (
        name in ("_SUCCESS", "_manifest.json")
        or (name.startswith("publications-") and name.endswith(".jsonl.gz"))
        or name.startswith("part-")
    )


def refuse_foreign_folder(spark: SparkSession, out: str) -> None:
    """The write replaces ``out`` whole (Spark's overwrite deletes the folder first): refuse a
    folder that holds anything but an earlier generated sample, e.g. a real export."""
    foreign = [n for n in fs.list_names(spark, out) if not _sample_file(n)]
    if foreign:
        raise ValueError(
            f"--out {out} holds {len(foreign)} entries that are not a generated sample (e.g. "
            f"{', '.join(foreign[:3])}), and generating replaces the folder whole: give a new "
            "or empty folder"
        )


def generate(
    spark: SparkSession,
    out: str,
    n_patents: int,
    seed: int,
    bad_share: float,
    partitions: int | None = None,
    difficulty: sample_plan.Difficulty | None = None,
) -> dict:
    """Write the corpus under ``out`` and return its manifest (also written to _manifest.json).

    ``difficulty`` (default: ``sample_plan.Difficulty()``, the original corpus) sets the knobs that make
    X retrieval harder; the manifest records it.
    """
    refuse_foreign_folder(spark, out)
    plan = sample_plan.build_plan(seed, n_patents, difficulty)
    n_parts = partitions or max(2, min(256, n_patents // 20_000 + 1))
    # DataFrame code only (no SparkContext), so the job also runs as a Spark Connect client;
    # the plan travels in the functions' closures. spark.range slices families into the same
    # contiguous runs per partition as sc.parallelize did: the files are byte for byte the same.
    families = spark.range(0, plan.n_families, 1, n_parts)

    frame = families.mapInPandas(
        _each_family(sample_records.family_lines, plan, bad_share, "value"), "value string"
    )
    frame.write.mode("overwrite").option("compression", "gzip").text(out)
    parts = [n for n in fs.list_names(spark, out) if n.startswith("part-")]
    for i, name in enumerate(parts):
        fs.rename(
            spark, f"{out}/{name}", f"{out}/publications-{i:05d}-of-{len(parts):05d}.jsonl.gz"
        )

    counted = (
        families.mapInPandas(
            _each_family(sample_records.family_corruptions, plan, bad_share, "kind"), "kind string"
        )
        .groupBy("kind")
        .count()
        .collect()
    )
    corruption_counts = Counter({row["kind"]: row["count"] for row in counted})
    clean = corruption_counts.pop("clean", 0)
    manifest = {
        "format": "google_patents",
        "seed": seed,
        "patents": n_patents,
        "families": plan.n_families,
        "clusters": plan.n_clusters,
        "difficulty": plan.difficulty.as_dict(),
        "distractor_families": len(plan.distractors),
        "bad_share": bad_share,
        "clean_records": clean,
        "corruptions": dict(sorted(corruption_counts.items())),
        "expected_quarantine": expected_quarantine(corruption_counts),
        "lines": n_patents
        + corruption_counts.get("duplicate_conflict", 0)
        + corruption_counts.get(sample_records.EXACT_DUPLICATE, 0),
        "files": len(parts),
    }
    fs.write_text(spark, f"{out}/_manifest.json", json.dumps(manifest, indent=2, sort_keys=True))
    return manifest
