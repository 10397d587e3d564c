"""Curate steps: bronze/publications -> silver patents, families, views and the claim graph."""

from __future__ import annotations

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from schemas import parse_type
from schemas.defaults import IPC_SECTIONS
from spark_jobs.lib.claims import split_claims

TEXT_FIELDS = {
    "title": "title_localized",
    "abstract": "abstract_localized",
    "claims": "claims_localized",
    "description": "description_localized",
}
CLAIMS_TYPE = (
    "array<struct<claim_number:int,text:string,independent:boolean,depends_on:array<int>>>"
)


def clean_text(c: Column) -> Column:
    """Drop markup tags, collapse blanks within lines and blank lines, trim."""
    no_tags = F.regexp_replace(c, r"<[^>]{1,200}>", " ")
    spaces = F.regexp_replace(no_tags, r"[ \t\r\f\u00a0\u3000]+", " ")
    return F.trim(F.regexp_replace(spaces, r"\s*\n\s*", "\n"))


def _preference(truncated: Column) -> Column:
    """Complete before truncated; an entry that does not say comes first (nulls first)."""
    return F.when(truncated.isNull(), F.lit(-1)).when(truncated, F.lit(1)).otherwise(F.lit(0))


def _ranked_entries(column: str) -> Column:
    """The cleaned, non-empty entries of one localized field, best first: complete before
    truncated, then the longest, then the earlier."""
    cleaned = F.transform(
        F.coalesce(F.col(column), F.array()),
        lambda e, i: F.struct(
            _preference(e.truncated).alias("preference"),
            e.language.alias("lang"),
            clean_text(e.text).alias("text"),
            i.alias("pos"),
        ),
    )
    keyed = F.transform(  # structs sort field by field: preference, -length, position
        cleaned,
        lambda e: F.struct(
            e.preference.alias("preference"),
            (-F.length(e.text)).alias("neg_length"),
            e.pos.alias("pos"),
            e.lang.alias("lang"),
            e.text.alias("text"),
        ),
    )
    return F.array_sort(F.filter(keyed, lambda e: e.neg_length < 0))


def best_texts(publications: DataFrame) -> DataFrame:
    """One row per (patent, language) with its title, abstract, claims and description.

    Several entries of one field and language (e.g. a truncated and a full copy) resolve to
    the complete, longest one; ties go to the earlier entry. A patent is one bronze row, so
    this is computed within each row: no shuffle of the texts.
    """
    ranked = publications.select(
        "publication_number",
        "family_id",
        *[_ranked_entries(column).alias(field) for field, column in TEXT_FIELDS.items()],
    )
    langs = F.array_distinct(
        F.concat(*[F.transform(F.col(field), lambda e: e.lang) for field in TEXT_FIELDS])
    )

    def best(field: str, lang: Column) -> Column:
        same = F.filter(F.col(field), lambda e: e.lang.eqNullSafe(lang))
        return F.try_element_at(same, F.lit(1)).text.alias(field)

    per_lang = F.transform(
        langs,
        lambda lang: F.struct(lang.alias("lang"), *[best(f, lang) for f in TEXT_FIELDS]),
    )
    return ranked.select("publication_number", "family_id", F.inline(per_lang))


@F.pandas_udf(parse_type(CLAIMS_TYPE))
def parse_claims(texts: pd.Series, langs: pd.Series) -> pd.Series:
    """Arrow UDF around :func:`split_claims`."""
    out = []
    for text, lang in zip(texts, langs, strict=True):
        claims = split_claims(text, lang) if isinstance(text, str) else []
        out.append(
            [
                {
                    "claim_number": c.number,
                    "text": c.text,
                    "independent": c.independent,
                    "depends_on": list(c.depends_on),
                }
                for c in claims
            ]
        )
    return pd.Series(out)


def with_parsed_claims(texts: DataFrame) -> DataFrame:
    return texts.withColumn("parsed_claims", parse_claims(F.col("claims"), F.col("lang")))


def views(texts: DataFrame) -> DataFrame:
    """silver/views rows: ABS, CLAIM, DESC, TAC (title+abstract+claims), FIC and TITLE, each
    with a non-blank character and the SHA-256 of its text (hashed once here, so pairing never
    reads the texts)."""
    fic = F.try_element_at(F.filter("parsed_claims", lambda c: c.independent), F.lit(1)).text
    tac = F.when(
        F.col("abstract").isNotNull() | F.col("claims").isNotNull(),
        F.concat_ws("\n", "title", "abstract", "claims"),
    )
    candidates = F.array(
        F.struct(F.lit("ABS").alias("view"), F.col("abstract").alias("text")),
        F.struct(F.lit("CLAIM").alias("view"), F.col("claims").alias("text")),
        F.struct(F.lit("DESC").alias("view"), F.col("description").alias("text")),
        F.struct(F.lit("TAC").alias("view"), tac.alias("text")),
        F.struct(F.lit("FIC").alias("view"), fic.alias("text")),
        # a title alone is no patent text: TITLE only beside another view of that language
        F.struct(
            F.lit("TITLE").alias("view"),
            F.when(
                F.coalesce("abstract", "claims", "description").isNotNull(), F.col("title")
            ).alias("text"),
        ),
    )
    exploded = texts.select(
        "publication_number", "family_id", "lang", F.explode(candidates).alias("v")
    )
    return exploded.select(
        "publication_number",
        "family_id",
        "lang",
        F.col("v.view").alias("view"),
        F.col("v.text").alias("text"),
        F.length("v.text").alias("n_chars"),
        F.sha2("v.text", 256).alias("text_sha256"),
    ).where(F.regexp_like("text", F.lit(r"\S")))


def claims(texts: DataFrame) -> DataFrame:
    """silver/claims rows: the claim dependency graph."""
    exploded = texts.select(
        "publication_number", "family_id", "lang", F.explode("parsed_claims").alias("c")
    )
    return exploded.select(
        "publication_number",
        "family_id",
        "lang",
        F.col("c.claim_number").alias("claim_number"),
        F.col("c.text").alias("text"),
        F.col("c.independent").alias("independent"),
        F.col("c.depends_on").alias("depends_on"),
    )


def ipc_section(ipc: Column) -> Column:
    """Section letter (A-H) of the main IPC code: the one flagged first, else the first listed."""
    flagged = F.filter(ipc, lambda e: F.coalesce(e["first"], F.lit(False)))
    main = F.coalesce(F.try_element_at(flagged, F.lit(1)), F.try_element_at(ipc, F.lit(1)))
    letter = F.upper(F.substring(F.trim(main.code), 1, 1))
    return F.when(letter.isin(*IPC_SECTIONS), letter)


def primary_language(publications: DataFrame) -> Column:
    """Language of the claims (else abstract, description, title): the original language."""
    firsts = [
        F.try_element_at(F.col(TEXT_FIELDS[f]), F.lit(1)).language
        for f in ("claims", "abstract", "description", "title")
    ]
    return F.coalesce(*firsts)


def patents(publications: DataFrame, view_rows: DataFrame) -> DataFrame:
    """silver/patents: publications that have at least one view."""
    langs = view_rows.groupBy("publication_number").agg(
        F.array_sort(F.collect_set("lang")).alias("languages")
    )
    return publications.join(langs, "publication_number", "inner").select(
        "publication_number",
        "family_id",
        "application_number",
        "country_code",
        "kind_code",
        "filing_date",
        "publication_date",
        "priority_date",
        ipc_section(F.col("ipc")).alias("ipc_section"),
        F.transform("ipc", lambda e: e.code).alias("ipc_codes"),
        F.transform("cpc", lambda e: e.code).alias("cpc_codes"),
        "languages",
        primary_language(publications).alias("primary_lang"),
    )


def families(patent_rows: DataFrame) -> DataFrame:
    """silver/families from silver/patents."""
    return patent_rows.groupBy("family_id").agg(
        F.array_sort(F.collect_list("publication_number")).alias("members"),
        F.array_sort(F.collect_set("country_code")).alias("countries"),
        F.array_sort(F.array_distinct(F.flatten(F.collect_list("languages")))).alias("languages"),
        F.count("*").cast("int").alias("n_members"),
        F.min("filing_date").alias("earliest_filing_date"),
        F.min("publication_date").alias("earliest_publication_date"),
    )


def without_views(publications: DataFrame, view_rows: DataFrame, ingested_at) -> DataFrame:
    """Quarantine rows for publications left with no view after cleaning."""
    have = view_rows.select("publication_number").distinct()
    lost = publications.join(have, "publication_number", "left_anti")
    return lost.select(
        F.lit("no_text_after_cleaning").alias("reason"),
        F.col("publication_number").alias("record_id"),
        F.to_json(F.struct(*publications.columns)).alias("record"),
        "source_file",
        F.lit(ingested_at).cast("timestamp").alias("ingested_at"),
        F.lit(None).cast("string").alias("stage"),
    )
