"""Texts for retrieval: the candidate pool (TAC), BM25 collections, training and evaluation
queries, used by prepare_retrieval (Stage II mining) and prepare_evaluation.

The candidate pool is every training patent (no excluded family) with a TAC view; each
candidate is represented by the TAC of its primary language for dense retrieval, and by its
TAC in every language it has for the per-language BM25 indexes. Training queries are the
ABS, CLAIM, DESC and TAC views (primary language) of training patents with at least one
resolved X citation into the pool.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from lake import fs
from schemas.defaults import QUERY_VIEWS
from spark_jobs.lib.citations import resolved_x
from spark_jobs.lib.leakage import training_views
from spark_jobs.lib.query_types import query_texts


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


def write_bm25_collections(
    spark: SparkSession, tac: DataFrame, out: str, files_per_language: int = 2
) -> dict[str, int]:
    """One Pyserini JsonCollection folder per language under ``out``: {lang: documents}.

    Shared by Stage II mining (prepare_retrieval) and evaluation (prepare_evaluation), so both
    index exactly the same kind of document.
    """
    fs.delete(spark, out)  # a language of an earlier run must not stay to be indexed
    docs = bm25_documents(tac).persist()
    counts = {r["lang"]: r["count"] for r in docs.groupBy("lang").count().collect()}
    for lang in sorted(counts):
        (
            docs.where(F.col("lang") == lang)
            .drop("lang")
            .repartition(files_per_language)
            .write.mode("overwrite")
            .json(f"{out}/{lang}")
        )
    docs.unpersist()
    return dict(sorted(counts.items()))


def positives(patents: DataFrame, citations: DataFrame, pool_ids: DataFrame) -> DataFrame:
    """(query_id, positive_id, positive_family_id): resolved X citations into the pool."""
    x = resolved_x(citations).select(
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


def evaluation_collection(views: DataFrame) -> DataFrame:
    """Every TAC of the lake (publication_number, family_id, lang, text): the evaluation's
    candidates are all patents, test families included (queries exclude their own family)."""
    return views.where(F.col("view") == "TAC").select(
        "publication_number", "family_id", "lang", "text"
    )


def family_members(patents: DataFrame) -> DataFrame:
    """(family_id, members): every publication of each family, sorted."""
    return patents.groupBy("family_id").agg(
        F.array_sort(F.collect_list("publication_number")).alias("members")
    )


def evaluation_queries(
    queries: DataFrame, views: DataFrame, claims: DataFrame, patents: DataFrame
) -> DataFrame:
    """silver/eval_queries in every query type of their language (``view`` holds the type,
    see spark_jobs.lib.query_types), with the X citations and what evaluation stratifies by:
    filing year, IPC section and codes, country (jurisdiction) and language."""
    meta = queries.select(
        "publication_number",
        "lang",
        "ipc_section",
        "x_cited",
        F.year("filing_date").alias("filing_year"),
    ).join(
        patents.select("publication_number", "family_id", "country_code", "ipc_codes"),
        "publication_number",
    )
    texts = query_texts(queries, views, claims, patents)
    return meta.join(texts, ["publication_number", "lang"]).select(
        "publication_number",
        "family_id",
        "lang",
        "view",
        "ipc_section",
        "x_cited",
        "text",
        "filing_year",
        "country_code",
        "ipc_codes",
    )


def with_ipc_codes(collection: DataFrame, patents: DataFrame) -> DataFrame:
    """The collection (id, ...) with each document's IPC codes (InScope reads them)."""
    codes = patents.select(F.col("publication_number").alias("id"), "ipc_codes")
    return collection.join(codes, "id", "left")


def probe_sample(
    patents: DataFrame, collection: DataFrame, excluded: DataFrame, size: int, seed: int
) -> DataFrame:
    """Classification and clustering inputs: up to ``size`` training-pool patents (no excluded
    family), one per family among the members with a collection TAC, chosen by a seeded hash,
    with their TAC and labels: ``section`` (main IPC section, else CPC's, as silver/patents
    has it) and ``subclass`` (the first IPC code in that section, else the first CPC code: CPC
    subclasses are IPC's; 4 characters). Patents without a section, or with no code of it,
    are left out."""

    def first_in_section(codes: str) -> Column:
        in_section = F.filter(
            codes, lambda c: F.upper(F.substring(F.trim(c), 1, 1)) == F.col("ipc_section")
        )
        return F.try_element_at(in_section, F.lit(1))

    main_code = F.coalesce(first_in_section("ipc_codes"), first_in_section("cpc_codes"))
    labelled = (
        patents.where(F.col("ipc_section").isNotNull())
        .join(F.broadcast(excluded.select("family_id").distinct()), "family_id", "left_anti")
        .select(
            F.col("publication_number").alias("id"),
            "family_id",
            F.col("ipc_section").alias("section"),
            F.upper(F.substring(F.trim(main_code), 1, 4)).alias("subclass"),
        )
        .where(F.length("subclass") == 4)
        # a member without a TAC in the collection cannot stand for its family: pick among
        # the others, so which families are in does not depend on the seed
        .join(collection.select("id", "lang", "text"), "id")
        .withColumn("_h", F.xxhash64(F.lit(seed), "id"))
    )
    one_per_family = Window.partitionBy("family_id").orderBy("_h", "id")
    return (
        labelled.withColumn("_r", F.row_number().over(one_per_family))
        .where("_r = 1")
        .orderBy("_h", "id")
        .limit(size)
        .drop("_h", "_r")
    )
