"""Texts for Stage II retrieval: the candidate pool (TAC), BM25 collections, training queries.

The candidate pool is every training patent (no excluded family) with a TAC view; each
candidate is represented by the TAC of its primary language for dense retrieval, and by its
TAC in every language it has for the per-language BM25 indexes. Training queries are the
ABS, CLAIM, DESC and TAC views (primary language) of training patents with at least one
resolved X citation into the pool.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from spark_jobs.lib.pairs import training_views

QUERY_VIEWS = ("ABS", "CLAIM", "DESC", "TAC")


def pool_tac(views: DataFrame, excluded: DataFrame) -> DataFrame:
    """TAC rows (publication_number, family_id, lang, text) of training patents."""
    return (
        training_views(views, excluded)
        .where(F.col("view") == "TAC")
        .select("publication_number", "family_id", "lang", "text")
    )


def candidates(patents: DataFrame, tac: DataFrame) -> DataFrame:
    """One TAC per candidate patent: its primary language's, else the longest one."""
    joined = tac.join(patents.select("publication_number", "primary_lang"), "publication_number")
    order = Window.partitionBy("publication_number").orderBy(
        (F.col("lang") != F.col("primary_lang")).asc(), F.length("text").desc(), "lang"
    )
    return (
        joined.withColumn("_r", F.row_number().over(order))
        .where("_r = 1")
        .select(F.col("publication_number").alias("id"), "lang", "text")
    )


def bm25_documents(tac: DataFrame) -> DataFrame:
    """Pyserini JsonCollection rows (id, contents) with the language to partition by."""
    return tac.select(
        "lang", F.col("publication_number").alias("id"), F.col("text").alias("contents")
    )


def positives(patents: DataFrame, citations: DataFrame, pool_ids: DataFrame) -> DataFrame:
    """(query_id, positive_id, positive_family_id): resolved X citations into the pool."""
    x = citations.where(F.col("is_x") & F.col("resolved")).select(
        F.col("citing").alias("query_id"),
        F.col("cited").alias("positive_id"),
        F.col("cited_family_id").alias("positive_family_id"),
    )
    fam = patents.select(
        F.col("publication_number").alias("query_id"), F.col("family_id").alias("query_family_id")
    )
    inpool = x.join(pool_ids.select(F.col("id").alias("positive_id")), "positive_id", "left_semi")
    return (
        inpool.join(fam, "query_id")
        .where(F.col("positive_family_id") != F.col("query_family_id"))
        .select("query_id", "positive_id", "positive_family_id")
        .distinct()
    )


def training_queries(
    views: DataFrame, excluded: DataFrame, patents: DataFrame, positive_rows: DataFrame
) -> DataFrame:
    """Query views (key, query_id, view, lang, text) of training patents with an X positive."""
    with_positive = positive_rows.select(F.col("query_id").alias("publication_number")).distinct()
    primary = patents.select("publication_number", F.col("primary_lang").alias("lang"))
    rows = (
        training_views(views, excluded)
        .where(F.col("view").isin(*QUERY_VIEWS))
        .join(with_positive, "publication_number", "left_semi")
        .join(primary, ["publication_number", "lang"])
    )
    return rows.select(
        F.concat_ws("|", "publication_number", "view").alias("key"),
        F.col("publication_number").alias("query_id"),
        "view",
        "lang",
        "text",
    )
