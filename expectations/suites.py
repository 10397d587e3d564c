"""One Great Expectations suite per table. ``critical`` expectations stop the pipeline."""

from __future__ import annotations

from collections.abc import Callable

import great_expectations as gx
from great_expectations import expectations as E

from schemas.tables import VIEWS
from spark_jobs.lib.languages import ISO_639_1

LANGS = sorted(ISO_639_1)
EARLIEST, LATEST = "1790-01-01", "2100-12-31"
STAGES = ["ingest", "curate", "split", "build_pairs", "build_triplets"]


def _c(expectation):
    expectation.meta = {**(expectation.meta or {}), "critical": True}
    return expectation


def _w(expectation):
    expectation.meta = {**(expectation.meta or {}), "critical": False}
    return expectation


def _key(*columns: str):
    if len(columns) == 1:
        return [
            _c(E.ExpectColumnValuesToNotBeNull(column=columns[0])),
            _c(E.ExpectColumnValuesToBeUnique(column=columns[0])),
        ]
    return [_c(E.ExpectColumnValuesToNotBeNull(column=c)) for c in columns] + [
        _c(E.ExpectCompoundColumnsToBeUnique(column_list=list(columns)))
    ]


def _not_empty():
    return _c(E.ExpectTableRowCountToBeBetween(min_value=1))


def _dates(column: str, required: bool):
    out = [_c(E.ExpectColumnValuesToBeBetween(column=column, min_value=EARLIEST, max_value=LATEST))]
    if required:
        out.append(_c(E.ExpectColumnValuesToNotBeNull(column=column)))
    return out


def _filed_before_published():
    return _c(
        E.ExpectColumnPairValuesAToBeGreaterThanB(
            column_A="publication_date",
            column_B="filing_date",
            or_equal=True,
            ignore_row_if="either_value_is_missing",
        )
    )


def bronze_publications():
    return [
        _not_empty(),
        *_key("publication_number"),
        _c(E.ExpectColumnValuesToNotBeNull(column="family_id")),
        *_dates("publication_date", True),
        *_dates("filing_date", False),
        *_dates("priority_date", False),
        _filed_before_published(),
        _c(E.ExpectColumnValuesToNotBeNull(column="record_hash")),
        _w(E.ExpectColumnValuesToMatchRegex(column="country_code", regex=r"^[A-Z]{2}$")),
    ]


def bronze_citations():
    return [
        *_key("citing", "citation_index"),
        _c(E.ExpectColumnValuesToMatchRegex(column="category", regex=r"^[XYADEPLOT1]+$")),
        _c(E.ExpectColumnValuesToNotBeNull(column="resolved")),
        _c(E.ExpectColumnValuesToNotBeNull(column="is_x")),
    ]


def quarantine():
    return [
        _c(E.ExpectColumnValuesToNotBeNull(column=c)) for c in ("stage", "reason", "record")
    ] + [_c(E.ExpectColumnValuesToBeInSet(column="stage", value_set=STAGES))]


def silver_patents():
    return [
        _not_empty(),
        *_key("publication_number"),
        _c(E.ExpectColumnValuesToNotBeNull(column="family_id")),
        _c(E.ExpectColumnValuesToNotBeNull(column="languages")),
        _c(E.ExpectColumnValuesToBeInSet(column="primary_lang", value_set=LANGS)),
        *_dates("publication_date", True),
        *_dates("filing_date", False),
        _filed_before_published(),
        _w(E.ExpectColumnValuesToBeInSet(column="ipc_section", value_set=list("ABCDEFGH"))),
        _w(E.ExpectColumnValuesToNotBeNull(column="ipc_section", mostly=0.95)),
    ]


def silver_families():
    return [
        _not_empty(),
        *_key("family_id"),
        _c(E.ExpectColumnValuesToBeBetween(column="n_members", min_value=1)),
    ]


def silver_views():
    return [
        _not_empty(),
        *_key("publication_number", "lang", "view"),
        _c(E.ExpectColumnValuesToBeInSet(column="view", value_set=list(VIEWS))),
        _c(E.ExpectColumnValuesToBeInSet(column="lang", value_set=LANGS)),
        _c(E.ExpectColumnValuesToNotBeNull(column="text")),
        _c(E.ExpectColumnValuesToBeBetween(column="n_chars", min_value=1)),
    ]


def silver_claims():
    return [
        _not_empty(),
        *_key("publication_number", "lang", "claim_number"),
        _c(E.ExpectColumnValuesToBeBetween(column="claim_number", min_value=1)),
        _c(E.ExpectColumnValuesToNotBeNull(column="text")),
        _c(E.ExpectColumnValuesToNotBeNull(column="independent")),
    ]


def silver_eval_queries():
    return [
        *_key("publication_number"),
        _c(E.ExpectColumnValuesToNotBeNull(column="family_id")),
        _c(E.ExpectColumnValuesToBeInSet(column="lang", value_set=LANGS)),
        _c(E.ExpectColumnValuesToBeBetween(column="n_x_cited", min_value=1)),
        *_dates("filing_date", True),
    ]


def silver_excluded_families():
    return [*_key("family_id")]


SUITES: dict[str, Callable[[], list]] = {
    "bronze/publications": bronze_publications,
    "bronze/citations": bronze_citations,
    "quarantine": quarantine,
    "silver/patents": silver_patents,
    "silver/families": silver_families,
    "silver/views": silver_views,
    "silver/claims": silver_claims,
    "silver/eval_queries": silver_eval_queries,
    "silver/excluded_families": silver_excluded_families,
}


def suite_for(table: str) -> gx.ExpectationSuite:
    """A fresh suite for ``table`` named after it (bronze/publications -> bronze_publications)."""
    if table not in SUITES:
        raise KeyError(f"no expectation suite for table {table!r}; known: {', '.join(SUITES)}")
    return gx.ExpectationSuite(name=table.replace("/", "_"), expectations=SUITES[table]())
