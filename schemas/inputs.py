"""Input formats xembed ingests: the Google Patents export and the canonical format."""

from __future__ import annotations

# Google Patents Public Data `publications` (BigQuery -> JSONL or Parquet). Dates are INT64 YYYYMMDD
# (0 = unknown); they are read as strings so quoted and unquoted numbers both parse.
_LOCALIZED = "array<struct<text:string,language:string,truncated:boolean>>"
_CLASSIFICATION = "array<struct<code:string,inventive:boolean,first:boolean>>"
GOOGLE_PATENTS_FIELDS = (
    ("publication_number", "string"),
    ("application_number", "string"),
    ("country_code", "string"),
    ("kind_code", "string"),
    ("family_id", "string"),
    ("publication_date", "string"),
    ("filing_date", "string"),
    ("priority_date", "string"),
    ("title_localized", _LOCALIZED),
    ("abstract_localized", _LOCALIZED),
    ("claims_localized", _LOCALIZED),
    ("description_localized", _LOCALIZED),
    ("ipc", _CLASSIFICATION),
    ("cpc", _CLASSIFICATION),
    (
        "citation",
        "array<struct<publication_number:string,application_number:string,npl_text:string,"
        "type:string,category:string,filing_date:string>>",
    ),
)
CORRUPT_RECORD = "_corrupt_record"


# Canonical format: a folder with `patents` and `citations` (JSON lines, optionally .gz, or
# Parquet). One patent per row in one language; one citation per row. Dates are
# 'YYYY-MM-DD' or YYYYMMDD (in Parquet also a date, timestamp or integer column);
# ipc/cpc are arrays of codes, the first being the main one.
CANONICAL_PATENT_FIELDS = (
    ("publication_number", "string", "required, e.g. 'EP-3456789-A1'"),
    ("family_id", "string", "required: DOCDB simple family id"),
    ("application_number", "string", ""),
    ("country_code", "string", ""),
    ("kind_code", "string", ""),
    ("lang", "string", "ISO 639-1 code of the texts (region suffixes allowed: zh-CN)"),
    ("title", "string", ""),
    ("abstract", "string", ""),
    ("claims", "string", "numbered claims, one after the other"),
    ("description", "string", ""),
    ("publication_date", "string", "required"),
    ("filing_date", "string", ""),
    ("priority_date", "string", ""),
    ("ipc", "array<string>", ""),
    ("cpc", "array<string>", ""),
)
CANONICAL_CITATION_FIELDS = (
    ("citing", "string", "publication_number of the citing patent"),
    ("cited", "string", "cited publication_number (empty for non-patent literature)"),
    ("category", "string", "relevance letters, e.g. 'X', 'XY', 'Y,A'"),
    ("source", "string", "search-report source: ISR, SEA, EXA, APP, ..."),
    ("npl_text", "string", "non-patent literature reference"),
)


def fields_ddl(fields) -> str:
    """An input's fields (``(name, ddl, ...)``) as one DDL schema string."""
    return ", ".join(f"`{name}` {kind}" for name, kind, *_ in fields)
