"""Stage II examples (paper 4.3): filter candidates, stratify, sample, add A citations,
pick 8 negatives with language priority, split validation by whole query families.

Every step is a DataFrame -> DataFrame function over built-in expressions; randomness is a
seeded hash of the row keys (deterministic per seed).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark_jobs.lib.citations import resolved_a_only, resolved_x
from spark_jobs.lib.sampling import uniform

PER_STRATUM = 4
CORNERS = ("HH", "HL", "LH", "LL")
MIN_CORNER = 6
NEGATIVES = 8
_QV = ("query_id", "query_view")


def query_info(patents: DataFrame) -> DataFrame:
    return patents.select(
        F.col("publication_number").alias("query_id"),
        F.col("family_id").alias("query_family_id"),
        F.col("filing_date").alias("query_filing_date"),
    )


def candidate_info(patents: DataFrame, pool: DataFrame) -> DataFrame:
    """Candidates that may be negatives at all: in the training pool, with a TAC (and its language)."""
    return pool.select(F.col("id").alias("cand_id"), F.col("lang").alias("cand_lang")).join(
        patents.select(
            F.col("publication_number").alias("cand_id"),
            F.col("family_id").alias("cand_family_id"),
            F.col("publication_date").alias("cand_publication_date"),
        ),
        "cand_id",
    )


def positive_sets(positives: DataFrame) -> DataFrame:
    return positives.groupBy("query_id").agg(
        F.collect_set("positive_id").alias("positive_ids"),
        F.collect_set("positive_family_id").alias("positive_family_ids"),
    )


def barred_sets(citations: DataFrame, patents: DataFrame) -> DataFrame:
    """(query_id, positive_ids, positive_family_ids): every resolved X citation of the query's
    family and the cited patents' families, which no negative may be (paper 4.3). All of them,
    not only the X positives in the training pool: an X-cited patent outside the pool (without
    a TAC, or outside the landscape) still bars its family's members in the pool. And the
    family's, not only the query patent's: a sibling (the same invention in another language)
    X-cites prior art of this query too, which sampled as its negative trained against the
    sibling's positive."""
    family = patents.select("publication_number", "family_id")
    x = resolved_x(citations).join(
        family.withColumnRenamed("publication_number", "citing"), "citing"
    )
    members = family.select(F.col("publication_number").alias("query_id"), "family_id")
    return positive_sets(
        members.join(x.select("family_id", "cited", "cited_family_id"), "family_id").select(
            "query_id",
            F.col("cited").alias("positive_id"),
            F.col("cited_family_id").alias("positive_family_id"),
        )
    )


def allowed(rows: DataFrame, queries: DataFrame, cands: DataFrame, pos: DataFrame) -> DataFrame:
    """Rows (query_id, cand_id, ...) that pass the negative filters of paper 4.3.

    Kept: published on/before the query's filing date; not the query patent nor its family;
    not an X positive nor in a positive's family; in the training pool with a TAC.
    """
    joined = rows.join(queries, "query_id").join(cands, "cand_id").join(pos, "query_id")
    return joined.where(
        F.col("query_filing_date").isNotNull()
        & (F.col("cand_publication_date") <= F.col("query_filing_date"))
        & (F.col("cand_id") != F.col("query_id"))
        & (F.col("cand_family_id") != F.col("query_family_id"))
        & ~F.array_contains("positive_ids", F.col("cand_id"))
        & ~F.array_contains("positive_family_ids", F.col("cand_family_id"))
    )


def candidate_rows(compact: DataFrame) -> DataFrame:
    """gold/stage2_candidates (one row per query view, arrays) as one row per candidate."""
    zipped = F.arrays_zip(
        F.col("cand_ids").alias("cand_id"),
        F.col("dense_scores").alias("dense_score"),
        F.col("bm25_ranks").alias("bm25_rank"),
        F.col("bm25_scores").alias("bm25_score"),
    )
    return compact.select(*_QV, "query_lang", F.inline(zipped))


def filter_candidates(
    candidates: DataFrame, queries: DataFrame, cands: DataFrame, pos: DataFrame
) -> DataFrame:
    """Retrieved candidates after the filters, with valid scores, one per family per query view."""
    scored = candidates.where(F.col("dense_score").isNotNull() & ~F.isnan("dense_score"))
    kept = allowed(scored, queries, cands, pos)
    best = Window.partitionBy(*_QV, "cand_family_id").orderBy(
        F.col("dense_score").desc(), "cand_id"
    )
    return kept.withColumn("_r", F.row_number().over(best)).where("_r = 1").drop("_r")


def unfiltered_views(views: DataFrame, filtered: DataFrame, queries: DataFrame) -> DataFrame:
    """The query views of ``views`` with no candidate left in ``filtered``, each with its
    reason: ``no_filing_date`` when the query has no filing date (no candidate can be shown
    to predate it), else ``no_candidate_after_filters``."""
    lost = views.select(*_QV).join(filtered.select(*_QV).distinct(), list(_QV), "left_anti")
    filed = lost.join(queries.select("query_id", "query_filing_date"), "query_id", "left")
    return filed.select(
        *_QV,
        F.when(F.col("query_filing_date").isNull(), F.lit("no_filing_date"))
        .otherwise(F.lit("no_candidate_after_filters"))
        .alias("reason"),
    )


def _level(percent: Column) -> Column:
    return F.when(percent < 1 / 3, "H").when(percent < 2 / 3, "M").otherwise("L")


def stratify(filtered: DataFrame) -> DataFrame:
    """Add ``stratum``: dense level (by score) then BM25 level (by rank; missing rank = L)."""
    by_view = Window.partitionBy(*_QV)
    # ties share a rank, so equal scores share a level (with the id in the order, which of
    # several equal scores was high or medium followed their publication numbers)
    dense = F.percent_rank().over(by_view.orderBy(F.col("dense_score").desc()))
    has_rank = F.col("bm25_rank").isNotNull()
    bm25 = F.percent_rank().over(Window.partitionBy(*_QV, has_rank).orderBy("bm25_rank", "cand_id"))
    bm25_level = F.when(has_rank, _level(bm25)).otherwise(F.lit("L"))
    return filtered.withColumn("stratum", F.concat(_level(dense), bm25_level))


def sample_strata(strata: DataFrame, seed: int) -> DataFrame:
    """Up to 4 candidates per (query view, stratum), chosen by seeded hash."""
    order = Window.partitionBy(*_QV, "stratum").orderBy(uniform(seed, *_QV, "cand_id"), "cand_id")
    return (
        strata.withColumn("_r", F.row_number().over(order))
        .where(F.col("_r") <= PER_STRATUM)
        .drop("_r")
    )


def corner_counts(sampled: DataFrame) -> DataFrame:
    """(query_id, query_view, corners): sampled documents in the HH, HL, LH, LL strata."""
    return sampled.groupBy(*_QV).agg(
        F.sum(F.col("stratum").isin(*CORNERS).cast("int")).alias("corners")
    )


def a_citation_rows(citations: DataFrame) -> DataFrame:
    """Resolved A-category citations (no X or Y letter) as (query_id, cand_id)."""
    return (
        resolved_a_only(citations)
        .select(F.col("citing").alias("query_id"), F.col("cited").alias("cand_id"))
        .distinct()
    )


def pool(sampled: DataFrame, a_rows: DataFrame, kept_views: DataFrame) -> DataFrame:
    """Sampled documents plus the query's filtered A citations, one per family per query view."""
    strata = sampled.select(
        *_QV, "cand_id", "cand_lang", "cand_family_id", F.col("stratum").alias("origin")
    )
    a = a_rows.join(kept_views, "query_id").select(
        *_QV, "cand_id", "cand_lang", "cand_family_id", F.lit("A").alias("origin")
    )
    both = strata.unionByName(a)
    first = Window.partitionBy(*_QV, "cand_family_id").orderBy(
        (F.col("origin") == "A").asc(), "cand_id"
    )
    return both.withColumn("_r", F.row_number().over(first)).where("_r = 1").drop("_r")


def examples(
    pool_rows: DataFrame, positives: DataFrame, query_langs: DataFrame, seed: int
) -> DataFrame:
    """One row per (query view, X positive) with its negatives in priority order (may be < 8).

    Priority: the query's language, then the positive's language, then the rest; random
    (seeded) within each tier.
    """
    joined = pool_rows.join(query_langs, list(_QV)).join(positives, "query_id")
    tier = (
        F.when(F.col("cand_lang") == F.col("query_lang"), 0)
        .when(F.col("cand_lang") == F.col("positive_lang"), 1)
        .otherwise(2)
    )
    order = Window.partitionBy(*_QV, "positive_id").orderBy(
        tier, uniform(seed, *_QV, "positive_id", "cand_id"), "cand_id"
    )
    ranked = joined.withColumn("_r", F.row_number().over(order)).where(F.col("_r") <= NEGATIVES)
    picked = F.array_sort(F.collect_list(F.struct("_r", "cand_id", "cand_lang", "origin")))
    grouped = ranked.groupBy(
        *_QV, "query_lang", "query_family_id", "positive_id", "positive_lang", "positive_family_id"
    ).agg(picked.alias("_n"))
    return grouped.select(
        *_QV,
        "query_lang",
        "query_family_id",
        "positive_id",
        "positive_lang",
        "positive_family_id",
        F.transform("_n", lambda x: x.cand_id).alias("negative_ids"),
        F.transform("_n", lambda x: x.cand_lang).alias("negative_langs"),
        F.transform("_n", lambda x: x.origin).alias("negative_origin"),
    )


def validation_families(full: DataFrame, size: int, seed: int) -> DataFrame:
    """Whole query families in seeded-hash order until their examples reach ``size``.

    The family that crosses ``size`` is taken whole, so the split holds ``size`` examples or a
    little more (never part of a family).
    """
    per_family = full.groupBy("query_family_id").agg(F.count("*").alias("n"))
    order = Window.orderBy(uniform(seed, "query_family_id"), "query_family_id").rowsBetween(
        Window.unboundedPreceding, Window.currentRow
    )
    cumulative = per_family.withColumn("_cum", F.sum("n").over(order))
    return cumulative.where(F.col("_cum") - F.col("n") < size).select("query_family_id")


def split_validation(
    full: DataFrame, size: int, seed: int
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(training, validation, overlapping): no query or positive family in both sides."""
    fams = F.broadcast(validation_families(full, size, seed))
    validation = full.join(fams, "query_family_id", "left_semi")
    labelled = (
        validation.select(F.col("query_family_id").alias("f"))
        .union(validation.select(F.col("positive_family_id").alias("f")))
        .distinct()
    )
    rest = full.join(fams, "query_family_id", "left_anti")
    labelled = F.broadcast(labelled)
    touches = rest.join(
        labelled,
        (rest.query_family_id == labelled.f) | (rest.positive_family_id == labelled.f),
        "left_semi",
    )
    training = rest.join(touches.select(*_QV, "positive_id"), [*_QV, "positive_id"], "left_anti")
    return training, validation, touches
