"""Curate steps: bronze/publications -> silver patents, families, views and the claim graph."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_type

from schemas import parse_type
from schemas.defaults import IPC_SECTIONS
from spark_jobs.lib.texts import FIELDS, per_language

# the bronze column of each text field, in the order the UDF below takes them
TEXT_FIELDS = {field: f"{field}_localized" for field in FIELDS}
CLAIMS_TYPE = (
    "array<struct<claim_number:int,text:string,independent:boolean,depends_on:array<int>>>"
)
TEXTS_TYPE = parse_type(
    "array<struct<lang:string,"
    + "".join(f"{field}:string," for field in FIELDS)
    + f"parsed_claims:{CLAIMS_TYPE}>>"
)
_TEXTS_ARROW_TYPE = to_arrow_type(TEXTS_TYPE)


@F.arrow_udf(TEXTS_TYPE)
def _per_language(
    title: pa.Array, abstract: pa.Array, claims: pa.Array, description: pa.Array
) -> pa.Array:
    """Arrow UDF around :func:`spark_jobs.lib.texts.per_language`."""
    fields = [column.to_pylist() for column in (title, abstract, claims, description)]
    return pa.array(
        [per_language(*record) for record in zip(*fields, strict=True)], type=_TEXTS_ARROW_TYPE
    )


def best_texts(publications: DataFrame) -> DataFrame:
    """One row per (patent, language) with its title, abstract, claims, description and
    parsed claims (``parsed_claims``).

    Several entries of one field and language (e.g. a truncated and a full copy) resolve to
    the complete, longest one once cleaned; ties go to the earlier entry
    (:mod:`spark_jobs.lib.texts`). A patent is one bronze row, so this is computed within
    each row: no shuffle of the texts, and one pass of Python over them.
    """
    per_lang = _per_language(*[F.col(column) for column in TEXT_FIELDS.values()])
    return publications.select("publication_number", "family_id", F.inline(per_lang))


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


def _main_section(codes: Column) -> Column:
    """Section letter (A-H) of the main code: the one flagged first, else the first listed."""
    flagged = F.filter(codes, lambda e: F.coalesce(e["first"], F.lit(False)))
    main = F.coalesce(F.try_element_at(flagged, F.lit(1)), F.try_element_at(codes, F.lit(1)))
    letter = F.upper(F.substring(F.trim(main.code), 1, 1))
    return F.when(letter.isin(*IPC_SECTIONS), letter)


def ipc_section(ipc: Column, cpc: Column) -> Column:
    """Section letter (A-H) of the main IPC code; without one, of the main CPC code (CPC
    extends IPC: its sections A-H are IPC's; its Y section is none of them)."""
    return F.coalesce(_main_section(ipc), _main_section(cpc))


def primary_language(languages: dict[str, Column]) -> Column:
    """Language of the claims (else abstract, description, title): the original language.
    ``languages`` holds, per field, the languages in which the field has a view: an entry
    that cleaned to nothing names no language the patent has text in."""

    def first(entries: Column, langs: Column) -> Column:
        kept = F.filter(entries, lambda e: F.array_contains(langs, e.language))
        return F.try_element_at(kept, F.lit(1)).language

    fields = ("claims", "abstract", "description", "title")
    return F.coalesce(*[first(F.col(TEXT_FIELDS[f]), languages[f]) for f in fields])


def patents(publications: DataFrame, view_rows: DataFrame) -> DataFrame:
    """silver/patents: publications that have at least one view."""
    field_views = {"claims": "CLAIM", "abstract": "ABS", "description": "DESC", "title": "TITLE"}
    langs = view_rows.groupBy("publication_number").agg(
        F.array_sort(F.collect_set("lang")).alias("languages"),
        *[
            F.collect_set(F.when(F.col("view") == view, F.col("lang"))).alias(f"_{field}")
            for field, view in field_views.items()
        ],
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
        ipc_section(F.col("ipc"), F.col("cpc")).alias("ipc_section"),
        F.transform("ipc", lambda e: e.code).alias("ipc_codes"),
        F.transform("cpc", lambda e: e.code).alias("cpc_codes"),
        "languages",
        primary_language({f: F.col(f"_{f}") for f in field_views}).alias("primary_lang"),
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
