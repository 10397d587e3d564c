"""Evaluation query types: the texts a query patent is searched with (README "Query types").

The paper's four views (ABS, CLAIM, DESC, TAC) come straight from silver/views; the others
are built here from silver/views, silver/claims and silver/patents, in the query's language:

- ``TITLE``: the title; ``TA``: title + abstract;
- ``FIC``: the first independent claim; ``ICLAIMS``: every independent claim, in order;
- ``DESC1``: the first description paragraph, i.e. the first line of the description with at
  least 20 characters (8 in a line of Han, kana or Hangul) once a paragraph number
  (``[0001]``, ``【０００１】``) and a heading glued to its end are removed that is
  no heading ("CROSS-REFERENCE TO RELATED APPLICATIONS", "Field of the Invention",
  "【技術分野】": see ``_heading``) and names no related applications ("This application
  claims the benefit of ...": see ``_RELATED_APPLICATIONS``);
- ``TACD``: title + abstract + claims + description (TAC, then DESC);
- ``CODES``: the IPC and CPC codes, space-separated, IPC first, each once;
- ``SUMMARY``: a SumBasic extractive summary of abstract + description
  (``spark_jobs.lib.summary``).
"""

from __future__ import annotations

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from schemas.defaults import QUERY_TYPES
from spark_jobs.lib.summary import (
    CJK_CLASS,
    HEADING_LABEL,
    HEADING_MAX_CHARS,
    NO_LOWER_CASE,
    PARAGRAPH_NUMBER_PATTERN,
    SENTENCE_END,
    sumbasic,
)

PARAGRAPH_MIN_CHARS = 20
# a paragraph of Han, kana or Hangul says as much in fewer characters: "本发明涉及一种电池电极。"
PARAGRAPH_MIN_CHARS_CJK = 8
_SOURCE_VIEWS = ("ABS", "CLAIM", "DESC", "TAC", "FIC", "TITLE")


@F.pandas_udf(StringType())
def summary_udf(texts: pd.Series, langs: pd.Series) -> pd.Series:
    """Arrow UDF around :func:`sumbasic`."""
    return pd.Series(
        [
            sumbasic(t if isinstance(t, str) else None, lang)
            for t, lang in zip(texts, langs, strict=True)
        ]
    )


def _heading(line: Column) -> Column:
    """A heading rather than a paragraph: a line in capitals ("CROSS-REFERENCE TO RELATED
    APPLICATIONS"), a 【...】 label, or a line under HEADING_MAX_CHARS that ends no sentence
    and opens no list ("Field of the Invention", "【特許文献１】特開2010-1号公報")."""
    # two linear tests: one pattern "no lower case ... a capital ... no lower case" backtracks
    # quadratically on a long line of capitals that ends in lower case (a sequence listing)
    capitals = line.rlike(NO_LOWER_CASE) & line.rlike("[A-Z]")
    label = line.rlike(HEADING_LABEL)
    unfinished = (F.length(line) < HEADING_MAX_CHARS) & ~line.rlike(SENTENCE_END)
    return capitals | label | unfinished


# The next section's heading glued to a paragraph's end, as a description exported without
# line breaks reads once its paragraph numbers start lines ("... relates to a cup. BACKGROUND",
# "…に関する。【背景技術】").
_TRAILING_HEADING = "(?<=[.。．｡!?！？])[\\s\\u3000]*(?:【[^】]*】|[A-Z][A-Z0-9 ,/&()\\-]{3,})$"


# A paragraph that names related applications rather than the invention: priority claims,
# continuations, national stages and incorporations by reference, as the first paragraph of
# most US, CN, JP and KR descriptions reads ("This application claims the benefit of ...",
# "本申请要求...的优先权", "本出願は、...に基づく優先権を主張し", "본 출원은 ... 우선권을 주장").
_RELATED_APPLICATIONS = (
    "(?i)^(?:"
    "(?:this|the\\s+present|the\\s+instant|the\\s+subject)\\s+(?:[a-z-]+\\s+){0,3}"
    "(?:application|patent|disclosure)\\b.{0,400}\\b(?:claims?\\s+(?:the\\s+)?(?:benefit|priority)|"
    "(?:continuation|divisional)(?:-in-part)?\\s+(?:application\\s+)?of|"
    "national\\s+(?:stage|phase)|provisional\\s+(?:patent\\s+)?application|371\\s+of|"
    "based\\s+(?:up)?on\\s+.{0,120}application|"
    "incorporated\\s+(?:herein\\s+)?(?:in\\s+(?:its|their)\\s+entirety\\s+)?by\\s+reference)"
    "|(?:the\\s+)?(?:entire\\s+)?(?:contents?|disclosures?)\\s+of\\s+.{0,400}"
    "incorporated\\s+(?:herein\\s+)?(?:in\\s+(?:its|their)\\s+entirety\\s+)?by\\s+reference"
    "|priority\\s+is\\s+claimed"
    "|this\\s+is\\s+a\\s+(?:continuation|divisional)(?:-in-part)?\\b"
    "|本申请(?:要求|是|为|基于|系).{0,300}(?:优先权|申请号|分案|继续|国家阶段)"
    "|本申請案?(?:主張|要求|是|為|係|基於).{0,300}(?:優先權|申請號|分案|連續)"
    "|本(?:出願|願|特許出願)は.{0,300}(?:優先権|基づ|分割|継続|援用)"
    "|본\\s*(?:출원|특허\\s*출원)은.{0,300}(?:우선권|기초|분할|계속|참조로)"
    ")"
)


# A line break, or an inline paragraph number of four digits or more ("... [0002] ...", a
# description exported without line breaks); "[1]" may be a reference, not a paragraph.
_PARAGRAPH_BREAK = r"\n|(?=\[[0-9０-９]{4,}\])|(?=【[0-9０-９]{4,}】)"


def first_paragraph(description: Column) -> Column:
    """The first line (or numbered paragraph) of at least PARAGRAPH_MIN_CHARS characters that
    is no heading and names no related applications (``_RELATED_APPLICATIONS``), paragraph
    number removed; else the first line of that length, else the first line."""
    lines = F.transform(
        F.split(description, _PARAGRAPH_BREAK),
        lambda line: F.trim(
            F.regexp_replace(
                F.regexp_replace(line, PARAGRAPH_NUMBER_PATTERN, ""), _TRAILING_HEADING, ""
            )
        ),
    )
    long_lines = F.filter(
        lines,
        lambda line: (
            (F.length(line) >= PARAGRAPH_MIN_CHARS)
            | ((F.length(line) >= PARAGRAPH_MIN_CHARS_CJK) & line.rlike(f"[{CJK_CLASS}]"))
        ),
    )
    paragraphs = F.filter(
        long_lines, lambda line: ~_heading(line) & ~line.rlike(_RELATED_APPLICATIONS)
    )
    return F.coalesce(
        F.try_element_at(paragraphs, F.lit(1)),
        F.try_element_at(long_lines, F.lit(1)),
        F.try_element_at(lines, F.lit(1)),
    )


def _joined(*columns: str) -> Column:
    """Present parts joined by newlines; null when every part is missing."""
    present = F.coalesce(*[F.col(c) for c in columns]).isNotNull()
    return F.when(present, F.concat_ws("\n", *columns))


def query_texts(
    queries: DataFrame, views: DataFrame, claims: DataFrame, patents: DataFrame
) -> DataFrame:
    """(publication_number, lang, view, text): every query type of every query patent (rows
    of ``queries``: publication_number, lang), in its language; types without text are left
    out (a patent without claims has no ICLAIMS)."""
    keys = queries.select("publication_number", "lang").distinct()
    wide = (
        views.where(F.col("view").isin(*_SOURCE_VIEWS))
        .join(keys, ["publication_number", "lang"], "left_semi")
        .groupBy("publication_number", "lang")
        .pivot("view", list(_SOURCE_VIEWS))
        .agg(F.first("text"))
    )
    independent = (
        claims.where("independent")
        .join(keys, ["publication_number", "lang"], "left_semi")
        .groupBy("publication_number", "lang")
        .agg(F.array_sort(F.collect_list(F.struct("claim_number", "text"))).alias("_ic"))
        .select(
            "publication_number",
            "lang",
            F.concat_ws("\n", F.transform("_ic", lambda c: c.text)).alias("ICLAIMS"),
        )
    )
    codes = patents.select(
        "publication_number",
        F.array_join(
            F.array_distinct(
                F.concat(
                    F.coalesce("ipc_codes", F.array().cast("array<string>")),
                    F.coalesce("cpc_codes", F.array().cast("array<string>")),
                )
            ),
            " ",
        ).alias("CODES"),
    )
    texts = (
        keys.join(wide, ["publication_number", "lang"], "left")
        .join(independent, ["publication_number", "lang"], "left")
        .join(codes, "publication_number", "left")
        .select(
            "publication_number",
            "lang",
            *[F.col(v) for v in _SOURCE_VIEWS],
            "ICLAIMS",
            "CODES",
            _joined("TITLE", "ABS").alias("TA"),
            first_paragraph(F.col("DESC")).alias("DESC1"),
            _joined("TAC", "DESC").alias("TACD"),
            summary_udf(_joined("ABS", "DESC"), F.col("lang")).alias("SUMMARY"),
        )
    )
    stacked = texts.select(
        "publication_number",
        "lang",
        F.explode(
            F.array(
                *[F.struct(F.lit(t).alias("view"), F.col(t).alias("text")) for t in QUERY_TYPES]
            )
        ).alias("q"),
    )
    return stacked.select(
        "publication_number", "lang", F.col("q.view").alias("view"), F.col("q.text").alias("text")
    ).where(F.col("text").isNotNull() & (F.length(F.trim("text")) > 0))
