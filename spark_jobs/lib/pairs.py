"""Stage I weakly supervised pairs (paper 4.2) from silver/views, as key-only rows.

Texts stay in silver/views; a pair names its two views by (publication, language, view).
All steps are built-in Spark expressions (joins, hashes, aggregates): no Python UDFs.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark_jobs.lib.sampling import uniform

# pair type -> (anchor view, positive view, how the two sides relate)
RECIPES: dict[str, dict[str, tuple[str, str, str]]] = {
    "xembed": {
        "ABS-CLAIM": ("ABS", "CLAIM", "same_patent"),
        "CLAIM-DESC": ("CLAIM", "DESC", "same_patent"),
        "ABS-ABS": ("ABS", "ABS", "family_cross_language"),
        "CLAIM-CLAIM": ("CLAIM", "CLAIM", "family_cross_language"),
    },
    "r3": {"ABS-FIC": ("ABS", "FIC", "same_patent")},
}
PAIR_COLUMNS = (
    "pair_type",
    "anchor_id",
    "anchor_lang",
    "anchor_view",
    "positive_id",
    "positive_lang",
    "positive_view",
    "family_id",
)


def view_keys(views: DataFrame) -> DataFrame:
    """The columns pairing needs: keys and a SHA-256 of the text (for identity checks)."""
    return views.where(F.length(F.trim("text")) > 0).select(
        "publication_number", "family_id", "lang", "view", F.sha2("text", 256).alias("text_hash")
    )


def _side(keys: DataFrame, view: str, prefix: str) -> DataFrame:
    return keys.where(F.col("view") == view).select(
        F.col("publication_number").alias(f"{prefix}_id"),
        F.col("lang").alias(f"{prefix}_lang"),
        F.lit(view).alias(f"{prefix}_view"),
        F.col("family_id").alias(f"{prefix}_family"),
        F.col("text_hash").alias(f"{prefix}_hash"),
    )


def same_patent_pairs(
    keys: DataFrame, pair_type: str, anchor_view: str, positive_view: str
) -> DataFrame:
    """One pair per patent and language where both views exist."""
    a, p = _side(keys, anchor_view, "anchor"), _side(keys, positive_view, "positive")
    joined = a.join(p, (a.anchor_id == p.positive_id) & (a.anchor_lang == p.positive_lang))
    return joined.select(F.lit(pair_type).alias("pair_type"), *_pair_body())


def family_pairs(keys: DataFrame, pair_type: str, view: str) -> DataFrame:
    """One pair per unordered pair of family members whose languages differ."""
    a, p = _side(keys, view, "anchor"), _side(keys, view, "positive")
    joined = a.join(
        p,
        (a.anchor_family == p.positive_family)
        & (a.anchor_id < p.positive_id)
        & (a.anchor_lang != p.positive_lang),
    )
    return joined.select(F.lit(pair_type).alias("pair_type"), *_pair_body())


def _pair_body() -> list[Column]:
    sides = [F.col(c) for c in PAIR_COLUMNS[1:7]]  # anchor_* and positive_* keys
    return [*sides, F.col("anchor_family").alias("family_id"), "anchor_hash", "positive_hash"]


def candidate_pairs(keys: DataFrame, recipe: str) -> DataFrame:
    """Every pair of ``recipe`` with the two text hashes, before any dropping."""
    if recipe not in RECIPES:
        raise ValueError(f"--recipe must be one of {sorted(RECIPES)}, got {recipe!r}")
    parts = []
    for pair_type, (anchor_view, positive_view, relation) in RECIPES[recipe].items():
        if relation == "same_patent":
            parts.append(same_patent_pairs(keys, pair_type, anchor_view, positive_view))
        else:
            parts.append(family_pairs(keys, pair_type, anchor_view))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def drop_identical(pairs: DataFrame) -> DataFrame:
    """Pairs whose two texts differ (identical texts teach nothing)."""
    return pairs.where(F.col("anchor_hash") != F.col("positive_hash"))


def drop_duplicate_texts(pairs: DataFrame) -> DataFrame:
    """One pair per pair type and unordered pair of texts; the smallest keys win."""
    lo = F.least("anchor_hash", "positive_hash").alias("_lo")
    hi = F.greatest("anchor_hash", "positive_hash").alias("_hi")
    keep = F.min(F.struct(*[F.col(c) for c in PAIR_COLUMNS[1:]], "anchor_hash", "positive_hash"))
    grouped = pairs.groupBy("pair_type", lo, hi).agg(keep.alias("k"))
    return grouped.select("pair_type", "k.*")


_KEY = ("pair_type", "anchor_id", "anchor_lang", "positive_id", "positive_lang")


def cap_per_family(pairs: DataFrame, cap: int, seed: int) -> DataFrame:
    """At most ``cap`` pairs per family and pair type, chosen by a seeded hash."""
    order = Window.partitionBy("family_id", "pair_type").orderBy(uniform(seed, *_KEY), *_KEY)
    return pairs.withColumn("_r", F.row_number().over(order)).where(F.col("_r") <= cap).drop("_r")


def quotas(counts: dict[str, int], max_pairs: int) -> dict[str, int]:
    """Split ``max_pairs`` across pair types in proportion to their counts (largest remainder)."""
    total = sum(counts.values())
    if total <= max_pairs:
        return dict(counts)
    exact = {t: max_pairs * c / total for t, c in counts.items()}
    out = {t: int(v) for t, v in exact.items()}
    for t in sorted(exact, key=lambda t: (out[t] - exact[t], t))[: max_pairs - sum(out.values())]:
        out[t] += 1
    return out


def sample_pairs(
    pairs: DataFrame, quota: dict[str, int], counts: dict[str, int], seed: int
) -> DataFrame:
    """Exactly ``quota[t]`` pairs of each type, the ones with the smallest seeded hash.

    A first pass keeps a little more than the quota per type by hash threshold (no shuffle);
    the exact cut then ranks only those survivors.
    """
    u = uniform(seed, *_KEY)
    # Keep quota + 6 standard deviations + 10: falling short is a ~1e-9 event.
    margin = {
        t: min(1.0, (quota[t] + 6 * quota[t] ** 0.5 + 10) / counts[t]) if counts[t] else 0.0
        for t in counts
    }
    threshold = F.create_map(*[x for t in sorted(margin) for x in (F.lit(t), F.lit(margin[t]))])
    kept = pairs.withColumn("_u", u).where(
        F.col("_u") < F.try_element_at(threshold, F.col("pair_type"))
    )
    limit = F.create_map(*[x for t in sorted(quota) for x in (F.lit(t), F.lit(quota[t]))])
    order = Window.partitionBy("pair_type").orderBy("_u", *_KEY)
    ranked = kept.withColumn("_r", F.row_number().over(order))
    return ranked.where(F.col("_r") <= F.try_element_at(limit, F.col("pair_type"))).drop("_u", "_r")


def stats(pairs: DataFrame) -> DataFrame:
    """gold/stage1_stats: pairs per type and language pair."""
    return pairs.groupBy("pair_type", "anchor_lang", "positive_lang").agg(
        F.count("*").alias("n_pairs")
    )
