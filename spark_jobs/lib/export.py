"""Materialize training text into shards a trainer can stream, with a manifest.

Formats: ``parquet`` (one row per example, text columns) and ``swift_jsonl`` (the ms-swift
InfoNCE format: ``messages`` / ``positive_messages`` [/ ``negative_messages``]).
Shard membership and row order come from a seeded hash of the example keys, so a rerun
with the same inputs and seed writes identical shards.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from lake import fs
from spark_jobs.lib.pairs import ipc_subclasses
from spark_jobs.lib.sampling import uniform

FORMATS = ("parquet", "swift_jsonl")
SUFFIX = {"parquet": "parquet", "swift_jsonl": "jsonl"}  # of the shard files
_HASH_MOD = 2_305_843_009_213_693_951  # 2**61 - 1


def _text(views: DataFrame, prefix: str, max_chars: int | None) -> DataFrame:
    text = F.col("text") if not max_chars else F.substring("text", 1, max_chars)
    return views.select(
        F.col("publication_number").alias(f"{prefix}_id"),
        F.col("lang").alias(f"{prefix}_lang"),
        F.col("view").alias(f"{prefix}_view"),
        text.alias(f"{prefix}_text"),
    )


def stage1_rows(pairs: DataFrame, views: DataFrame, max_chars: int | None = None) -> DataFrame:
    """Pairs joined with their anchor and positive texts (optionally capped per view)."""
    keys = ["id", "lang", "view"]
    anchor = _text(views, "anchor", max_chars)
    positive = _text(views, "positive", max_chars)
    return (
        pairs.join(anchor, [f"anchor_{k}" for k in keys])
        .join(positive, [f"positive_{k}" for k in keys])
        .select(
            "recipe",
            "pair_type",
            "signal",
            "family_id",
            "positive_family_id",
            # every family the pair names: the trainer keeps them out of each other's batches
            F.array_distinct(F.array("family_id", "positive_family_id")).alias("families"),
            "anchor_id",
            "anchor_lang",
            "anchor_view",
            "anchor_text",
            "positive_id",
            "positive_lang",
            "positive_view",
            "positive_text",
        )
    )


def stage2_rows(
    examples: DataFrame, views: DataFrame, patents: DataFrame, max_chars: int | None = None
) -> DataFrame:
    """Examples with the query view text, the positive's TAC and the 8 negatives' TACs (in order).

    ``families`` lists every family the example names (query, positive, negatives) and
    ``family_id`` / ``positive_family_id`` those of the query and positive, so the trainer's
    batches can keep each query's and positive's family away from the other examples.
    """
    text = F.col("text") if not max_chars else F.substring("text", 1, max_chars)
    tac = views.where(F.col("view") == "TAC").select(
        "publication_number", "lang", text.alias("text")
    )
    family = patents.select("publication_number", "family_id")
    keys = ["query_id", "query_view", "positive_id"]
    negatives = (
        examples.select(
            *keys, F.posexplode(F.arrays_zip("negative_ids", "negative_langs")).alias("i", "n")
        )
        .select(
            *keys,
            "i",
            F.col("n.negative_ids").alias("publication_number"),
            F.col("n.negative_langs").alias("lang"),
        )
        .join(tac, ["publication_number", "lang"])
        .join(family, "publication_number")
        .groupBy(*keys)
        .agg(F.array_sort(F.collect_list(F.struct("i", "text", "family_id"))).alias("_n"))
    )
    query_text = views.select(
        F.col("publication_number").alias("query_id"),
        F.col("lang").alias("query_lang"),
        F.col("view").alias("query_view"),
        text.alias("query_text"),
    )
    positive_text = tac.select(
        F.col("publication_number").alias("positive_id"),
        F.col("lang").alias("positive_lang"),
        F.col("text").alias("positive_text"),
    )
    joined = (
        examples.join(query_text, ["query_id", "query_lang", "query_view"])
        .join(positive_text, ["positive_id", "positive_lang"])
        .join(negatives, keys)
    )
    return joined.select(
        F.col("query_family_id").alias("family_id"),
        "positive_family_id",
        "query_id",
        "query_view",
        "query_lang",
        "query_text",
        "positive_id",
        "positive_lang",
        "positive_text",
        "negative_ids",
        "negative_origin",
        F.transform("_n", lambda x: x.text).alias("negative_texts"),
        F.array_distinct(
            F.concat(
                F.array("query_family_id", "positive_family_id"),
                F.transform("_n", lambda x: x.family_id),
            )
        ).alias("families"),
    ).where(F.size("negative_texts") == F.size("negative_ids"))


def phage_rows(
    claims: DataFrame, graph: DataFrame, patents: DataFrame, max_chars: int | None = None
) -> DataFrame:
    """One row per patent and claim language for PHAGE training: the claims in claim-number
    order, the claim-graph edges between them (as claim numbers) and the patent's IPC
    subclasses (4 characters, sorted), the taxonomy contrast's labels. ``claims`` must already
    be the training pool (no excluded family); edges of other patents do not join."""
    text = F.col("text") if not max_chars else F.substring("text", 1, max_chars)
    keys = ["publication_number", "lang"]
    ordered = claims.groupBy(*keys, "family_id").agg(
        F.array_sort(F.collect_list(F.struct("claim_number", text.alias("text")))).alias("_c")
    )
    edges = graph.groupBy(*keys).agg(
        F.array_sort(
            F.collect_list(F.struct("src_claim", "dst_claim", "relation", "weight"))
        ).alias("edges")
    )
    subclasses = patents.select(
        "publication_number", ipc_subclasses(F.col("ipc_codes")).alias("ipc_subclasses")
    )
    return (
        ordered.join(edges, keys, "left")
        .join(subclasses, "publication_number")
        .select(
            "publication_number",
            "family_id",
            F.array("family_id").alias("families"),
            "lang",
            F.transform("_c", lambda c: c.claim_number).alias("claim_numbers"),
            F.transform("_c", lambda c: c.text).alias("claim_texts"),
            F.coalesce(
                "edges",
                F.array().cast(
                    "array<struct<src_claim:int,dst_claim:int,relation:string,weight:double>>"
                ),
            ).alias("edges"),
            "ipc_subclasses",
        )
    )


def check_nothing_lost(
    source: DataFrame, rows: DataFrame, written: int, keys: list[str], table: str
) -> None:
    """Raise unless the shards hold exactly one row per ``source`` row (the rows a dataset must
    export, keyed by ``keys``). A row whose texts did not join (a view
    missing from silver/views, a negative without its TAC) would otherwise vanish from the
    training data unseen; the error names some of them and the manifest is never written.
    Lost and repeated rows are looked for even when the count matches: one of each would
    cancel out in the count."""
    expected = source.count()
    lost = source.select(*keys).join(rows.select(*keys), keys, "left_anti").limit(5).collect()
    repeated = rows.groupBy(*keys).count().where("count > 1").limit(5).collect()
    if written == expected and not lost and not repeated:
        return

    def named(found: list) -> str:
        return "; ".join(", ".join(f"{k}={r[k]}" for k in keys) for r in found)

    causes = [f"rows did not join their texts (silver/views), e.g. {named(lost)}"] if lost else []
    if repeated:
        causes.append(
            "rows were repeated (a key of silver/views or silver/patents is not unique), "
            f"e.g. {named(repeated)}"
        )
    if not causes:
        causes.append("the shards read back do not hold the rows written")
    raise ValueError(
        f"the export wrote {written:,} rows for the {expected:,} of {table}: "
        + " and ".join(causes)
        + "; no manifest was written, rerun the jobs that build the inputs"
    )


def _message(text: Column) -> Column:
    return F.array(F.struct(F.lit("user").alias("role"), text.alias("content")))


def swift_lines(rows: DataFrame) -> DataFrame:
    """ms-swift InfoNCE JSON lines: messages (anchor), positive_messages (list of messages)."""
    query = "anchor_text" if "anchor_text" in rows.columns else "query_text"
    record = [
        _message(F.col(query)).alias("messages"),
        F.array(_message(F.col("positive_text"))).alias("positive_messages"),
    ]
    if "negative_texts" in rows.columns:
        record.append(F.transform("negative_texts", _message).alias("negative_messages"))
    keep = [c for c in rows.columns if c.startswith("_")]
    return rows.select(*keep, F.to_json(F.struct(*record)).alias("value"))


def write_shards(
    spark: SparkSession,
    rows: DataFrame,
    out: str,
    fmt: str,
    rows_per_shard: int,
    seed: int,
    key_columns: tuple[str, ...],
) -> list[dict]:
    """Write ``rows`` as shard-NNNNN files under ``out``; returns [{file, rows}] in order."""
    if fmt not in FORMATS:
        raise ValueError(f"--format must be one of {FORMATS}, got {fmt!r}")
    # the old manifest goes first: an export killed from here on leaves a folder the trainer
    # refuses (no manifest), never old counts beside new shards of the same names
    fs.delete(spark, f"{out}/_manifest.json")
    total = rows.count()
    n_shards = max(1, math.ceil(total / rows_per_shard))
    keyed = (
        rows.withColumn("_u", uniform(seed, *key_columns))
        .withColumn(
            "_shard", F.least(F.floor(F.col("_u") * n_shards).cast("int"), F.lit(n_shards - 1))
        )
        # the keys break ties of the seeded number (~2^31 values: two a 100,000-row shard),
        # which otherwise keep the order the input arrived in
        .withColumn("_key", F.struct(*key_columns))
    )
    if fmt == "swift_jsonl":
        keyed = swift_lines(keyed)
    ordered = keyed.repartition(n_shards, "_shard").sortWithinPartitions("_shard", "_u", "_key")
    staging = f"{out}/_staging"
    writer = ordered.drop("_u", "_key").write.mode("overwrite").partitionBy("_shard")
    if fmt == "parquet":
        writer.parquet(staging)
    else:
        writer.text(staging)
    suffix = SUFFIX[fmt]
    for name in fs.list_names(spark, out):
        if name.startswith("shard-"):
            fs.delete(spark, f"{out}/{name}")
    shards = []
    for name in fs.list_names(spark, staging):
        if not name.startswith("_shard="):
            continue
        index = int(name.split("=", 1)[1])
        parts = [p for p in fs.list_names(spark, f"{staging}/{name}") if p.startswith("part-")]
        if len(parts) != 1:
            raise RuntimeError(f"shard {index}: expected one file, found {parts}")
        target = f"shard-{index:05d}.{suffix}"
        fs.rename(spark, f"{staging}/{name}/{parts[0]}", f"{out}/{target}")
        shards.append({"file": target, "index": index})
    fs.delete(spark, staging)
    return sorted(shards, key=lambda s: s["index"])


def shard_counts_and_hash(
    spark: SparkSession, out: str, fmt: str
) -> tuple[dict[str, tuple[int, int]], str]:
    """Rows and bytes per shard file and an order-independent hash of every row, read back
    from disk."""
    # the folder with a file filter, not a glob path: Spark looks for a streaming sink's
    # metadata under the path it is given, and a glob printed a FileNotFoundException's trace
    shards = spark.read.option("pathGlobFilter", f"shard-*.{SUFFIX[fmt]}")
    if fmt == "parquet":
        frame = shards.parquet(out)
        row_hash = F.xxhash64(*[F.col(c) for c in sorted(frame.columns)])
    else:
        frame = shards.text(out)
        row_hash = F.xxhash64("value")
    per_file = frame.groupBy(F.col("_metadata.file_name").alias("file")).agg(
        F.count("*").alias("rows"),
        F.first("_metadata.file_size").alias("bytes"),
        F.sum(F.pmod(row_hash, F.lit(_HASH_MOD)).cast("decimal(38,0)")).alias("h"),
    )
    counts, total = {}, 0
    for r in per_file.collect():  # one small row per shard
        counts[r["file"]] = (r["rows"], r["bytes"])
        total = (total + int(r["h"])) % _HASH_MOD
    return counts, f"{total:016x}"


def write_manifest(spark: SparkSession, out: str, manifest: dict) -> None:
    manifest = {**manifest, "created_at": datetime.now(UTC).isoformat(timespec="seconds")}
    fs.write_text(spark, f"{out}/_manifest.json", json.dumps(manifest, indent=2, sort_keys=True))
