"""Evaluation split: query patents by filing-date cutoff and their excluded families."""

from __future__ import annotations

from datetime import date

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.lib.citations import resolved_x


def x_citations_in_corpus(citations: DataFrame) -> DataFrame:
    """Resolved X citations to a different family (a family citing itself is no prior art)."""
    return resolved_x(citations).select("citing", "cited", "cited_family_id")


def eval_queries(
    patents: DataFrame, citations: DataFrame, cutoff: date, collection: DataFrame
) -> DataFrame:
    """Patents filed on/after ``cutoff`` with >= 1 X citation in the candidate collection
    (``collection``: the publication numbers of the TAC views). A cited patent resolved in
    the corpus but without a TAC (a title and description only, quarantined by curate) is
    nothing evaluation can find: a query of only such citations would count in no metric,
    and its family would leave training for nothing."""
    recent = patents.where(F.col("filing_date") >= F.lit(cutoff))
    candidates = collection.select(F.col("publication_number").alias("cited")).distinct()
    x = x_citations_in_corpus(citations).join(candidates, "cited", "left_semi")
    joined = recent.join(x, recent.publication_number == x.citing).where(
        F.col("cited_family_id") != F.col("family_id")
    )
    return (
        joined.groupBy(
            "publication_number", "family_id", "primary_lang", "ipc_section", "filing_date"
        )
        .agg(F.array_sort(F.collect_set("cited")).alias("x_cited"))
        .select(
            "publication_number",
            "family_id",
            F.col("primary_lang").alias("lang"),
            "ipc_section",
            "filing_date",
            "x_cited",
            F.size("x_cited").alias("n_x_cited"),
        )
        .where(F.col("lang").isNotNull())
    )


def excluded_families(queries: DataFrame) -> DataFrame:
    """Every family with an evaluation query, with the query patents that put it there."""
    return queries.groupBy("family_id").agg(
        F.array_sort(F.collect_list("publication_number")).alias("query_publication_numbers")
    )
