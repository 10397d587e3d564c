"""Spark-parallel generation of the sample corpus (Google Patents JSONL.gz export)."""

from __future__ import annotations

import json
from collections import Counter

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
    plan = sample_plan.build_plan(seed, n_patents, difficulty)
    sc = spark.sparkContext
    shared = sc.broadcast(plan)
    n_parts = partitions or max(2, min(256, n_patents // 20_000 + 1))
    families = sc.parallelize(range(plan.n_families), n_parts)

    def lines(partition):
        p = shared.value
        for family in partition:
            for line in sample_records.family_lines(p, family, bad_share):
                yield (line,)

    def kinds(partition):
        p = shared.value
        for family in partition:
            yield from sample_records.family_corruptions(p, family, bad_share)

    frame = spark.createDataFrame(families.mapPartitions(lines), "value string")
    frame.write.mode("overwrite").option("compression", "gzip").text(out)
    parts = [n for n in fs.list_names(spark, out) if n.startswith("part-")]
    for i, name in enumerate(parts):
        fs.rename(
            spark, f"{out}/{name}", f"{out}/publications-{i:05d}-of-{len(parts):05d}.jsonl.gz"
        )

    corruption_counts = Counter(families.mapPartitions(kinds).countByValue())
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
    shared.unpersist()
    return manifest
