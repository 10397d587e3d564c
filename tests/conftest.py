"""Shared fixtures: one local Spark session with Delta for the whole run."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")


@pytest.fixture(scope="session")
def spark():
    from spark_jobs.lib.session import build_session

    session = build_session(
        "xembed-tests",
        "local[2]",
        conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )
    yield session
    session.stop()


@pytest.fixture
def lake(tmp_path):
    return str(tmp_path / "lake")


def lines_frame(spark, records, source_file="test.jsonl"):
    """A read_lines()-shaped DataFrame from JSON strings or dicts."""
    import json

    rows = [
        (r if isinstance(r, str) else json.dumps(r, ensure_ascii=False), source_file)
        for r in records
    ]
    return spark.createDataFrame(rows, "value string, source_file string")


def gp_record(
    number="US-1-A1",
    family="100",
    lang="en",
    abstract="An abstract.",
    claims="1. A thing.",
    filed=20200101,
    published=20210101,
    **extra,
):
    """A minimal valid Google Patents export record."""
    record = {
        "publication_number": number,
        "family_id": family,
        "country_code": number[:2],
        "kind_code": number.rsplit("-", 1)[-1],
        "application_number": f"{number[:2]}-APP-A",
        "publication_date": published,
        "filing_date": filed,
        "priority_date": filed,
        "title_localized": [{"text": "A title", "language": lang, "truncated": False}],
        "abstract_localized": [{"text": abstract, "language": lang, "truncated": False}],
        "claims_localized": [{"text": claims, "language": lang, "truncated": False}],
        "description_localized": [{"text": "A description.", "language": lang, "truncated": False}],
        "ipc": [{"code": "H01M10/05", "inventive": True, "first": True}],
        "cpc": [],
        "citation": [],
    }
    record.update(extra)
    return record
