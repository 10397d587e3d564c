"""Stage I shards straight from the sample generator, without Spark (tests and benchmarks).

Same layout as ``spark_jobs/export_training.py --format parquet``: shard-NNNNN.parquet plus a
_manifest.json; rows pair each generated patent's abstract with its claims.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from spark_jobs.lib.sample import plan as sample_plan
from spark_jobs.lib.sample.claims_plan import claim_plan
from spark_jobs.lib.sample.render import render_patent


def write_sample_stage1_shards(
    folder: str | Path, n_patents: int = 500, seed: int = 21, n_shards: int = 2
) -> dict:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    plan = sample_plan.build_plan(seed, n_patents)
    rows = []
    for family in range(plan.n_families):
        inv = sample_plan.invention(plan, family)
        claims = claim_plan(inv, random.Random(family))
        for member in sample_plan.members(plan, family):
            text = render_patent(inv, claims, member.lang, random.Random(member.index))
            rows.append(
                {
                    "pair_type": "ABS-CLAIM",
                    "family_id": sample_plan.family_id(family),
                    "anchor_id": member.publication_number,
                    "anchor_lang": member.lang,
                    "anchor_view": "ABS",
                    "anchor_text": text["abstract"],
                    "positive_id": member.publication_number,
                    "positive_lang": member.lang,
                    "positive_view": "CLAIM",
                    "positive_text": text["claims"],
                }
            )
    random.Random(seed).shuffle(rows)
    shards = []
    for i in range(n_shards):
        part = rows[i::n_shards]
        name = f"shard-{i:05d}.parquet"
        pq.write_table(pa.Table.from_pylist(part), folder / name)
        shards.append({"file": name, "rows": len(part)})
    manifest = {
        "dataset": "stage1",
        "format": "parquet",
        "rows": len(rows),
        "shards": shards,
        "content_hash": f"sample-{seed}-{n_patents}",
        "delta_versions": {"gold/stage1_pairs": 0},
        # no evaluation split exists in this generated set, so no family can leak
        "leakage_audit": {"status": "passed", "rows_checked": len(rows), "excluded_families": 0},
    }
    (folder / "_manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def write_sample_stage2_shards(
    folder: str | Path, n_patents: int = 200, seed: int = 21, negatives: int = 3
) -> dict:
    """Stage II-shaped shards from the Stage I sample: abstract query, claims positive and the
    claims of ``negatives`` other families as hard negatives (a seeded choice)."""
    folder = Path(folder)
    stage1 = folder.with_name(folder.name + "-stage1")
    write_sample_stage1_shards(stage1, n_patents=n_patents, seed=seed, n_shards=1)
    pairs = pq.read_table(stage1 / "shard-00000.parquet").to_pylist()
    rng = random.Random(seed)
    rows = []
    for pair in pairs:
        others = [p for p in pairs if p["family_id"] != pair["family_id"]]
        chosen = rng.sample(others, negatives)
        rows.append(
            {
                "query_text": pair["anchor_text"],
                "query_lang": pair["anchor_lang"],
                "positive_text": pair["positive_text"],
                "negative_texts": [p["positive_text"] for p in chosen],
                "family_id": pair["family_id"],
                "positive_family_id": pair["family_id"],  # the query's own claims
                "families": sorted({pair["family_id"], *(p["family_id"] for p in chosen)}),
            }
        )
    return write_stage2_shard(folder, rows, f"sample2-{seed}-{n_patents}-{negatives}")


def write_stage2_shard(
    folder: str | Path, rows: list[dict], content_hash: str, compression: str = "snappy"
) -> dict:
    """``rows`` (Stage II-shaped dicts) as one shard with its manifest, audited: no evaluation
    split exists here, so no family can leak. Pages carry checksums, as Spark writes them."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.Table.from_pylist(rows),
        folder / "shard-00000.parquet",
        compression=compression,
        write_page_checksum=True,
    )
    manifest = {
        "dataset": "stage2",
        "format": "parquet",
        "rows": len(rows),
        "shards": [{"file": "shard-00000.parquet", "rows": len(rows)}],
        "content_hash": content_hash,
        "delta_versions": {"gold/stage2_examples": 0},
        "leakage_audit": {"status": "passed", "rows_checked": len(rows), "excluded_families": 0},
    }
    (folder / "_manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest
