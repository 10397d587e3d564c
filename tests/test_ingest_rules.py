"""Every parsing, normalization and quarantine rule of ingest, on tiny in-memory rows."""

import json

import pytest
from pyspark.sql import functions as F

from spark_jobs.lib import ingest as ingestion
from spark_jobs.lib.languages import normalize_language, normalize_language_py
from tests.conftest import gp_record, lines_frame

pytestmark = pytest.mark.spark


def reasons(spark, records):
    parsed = ingestion.with_validation(ingestion.parse_google_patents(lines_frame(spark, records)))
    return [r["reason"] for r in parsed.orderBy("raw").select("raw", "reason").collect()]


def one_reason(spark, record):
    (reason,) = reasons(spark, [record])
    return reason


def test_valid_record_has_no_reason(spark):
    assert one_reason(spark, gp_record()) is None


@pytest.mark.parametrize(
    "line", ['{"publication_number": "US-1-A1", "abstract_lo', "not json", "[1, 2]"]
)
def test_unparseable_json(spark, line):
    assert one_reason(spark, line) == "unparseable_json"


def test_a_line_holding_more_than_one_value_is_unparseable(spark):
    """The parser reads a line's first JSON value and ignored the rest: two records on one
    line (two files joined without a final line break) passed as one record, and the
    second was neither kept nor quarantined."""
    first, second = (json.dumps(gp_record(number=n)) for n in ("US-1-A1", "US-2-A1"))
    expected = {
        first + second: "unparseable_json",
        f"{first} {second}": "unparseable_json",
        f"{first}\t {second}": "unparseable_json",
        f"{first} trailing text": "unparseable_json",
        f"{first},": "unparseable_json",
        first + " " * 40: None,  # blanks after the object, beyond the 16 characters read
        json.dumps(gp_record(number="US-3-A1", abstract="A lid }{ and } {a} cup.")) + " \r": None,
    }
    assert reasons(spark, list(expected)) == [expected[line] for line in sorted(expected)]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("ipc", "G06F 16/00"),  # a string where an array of codes belongs
        ("claims_localized", {"text": "1. A cup.", "language": "en"}),  # an object, not a list
        ("citation", {"publication_number": "CN-1-A"}),
        # a list or object where a string belongs: Spark's parser made its JSON the value
        ("family_id", {"id": "100"}),
        ("kind_code", ["A1", "B1"]),
    ],
)
def test_a_wrongly_typed_field_is_named_not_called_unparseable(spark, field, value):
    assert one_reason(spark, gp_record(**{field: value})) == f"invalid_field:{field}"


def test_a_record_over_the_size_limit_is_quarantined_before_parsing(spark):
    record = json.dumps(gp_record(), ensure_ascii=False)
    lines = lines_frame(spark, [record, gp_record(number="US-2-A1", abstract="A.")])
    limit = len(record.encode("utf-8")) - 1
    parsed = ingestion.with_validation(ingestion.parse_google_patents(lines, limit))
    rows = {r["raw"][:40]: r for r in parsed.collect()}
    big = next(r for r in rows.values() if r["too_large"])
    assert big["reason"] == "record_too_large" and big["publication_number"] is None
    assert big["raw"] == record and big["record_bytes"] == limit + 1
    assert sorted(r["reason"] or "ok" for r in rows.values()) == ["ok", "record_too_large"]


def test_a_text_longer_than_jacksons_default_string_limit_is_kept(spark):
    """Jackson refuses strings over 20,000,000 characters by default: a patent with a 21 MB
    description (sequence listings make such) was quarantined as unparseable_json although
    the line was valid and under --max-record-bytes."""
    long = gp_record(number="US-1-A1")
    long["description_localized"] = [{"text": "ACGT" * 5_250_000, "language": "en"}]
    parsed = ingestion.with_validation(ingestion.parse_google_patents(lines_frame(spark, [long])))
    row = parsed.select("reason", F.length(F.col("description_localized")[0].text).alias("n"))
    assert row.first().asDict() == {"reason": None, "n": 21_000_000}
    # the one-value check parsed such a line again at the default limit: with "}{" in it
    # (USPTO's "{dot over (x)}{umlaut over (y)}") or blanks after it, it was unparseable_json
    braces = gp_record(number="US-2-A1")
    braces["description_localized"] = [
        {"text": "ACGT" * 5_250_000 + " {dot over (x)}{umlaut over (y)}", "language": "en"}
    ]
    lines = [json.dumps(braces), json.dumps(long) + " " * 20]
    assert reasons(spark, lines) == [None, None]


def test_a_whole_number_written_as_a_float_is_its_digits(spark):
    """pandas writes an integer column with a missing value as floats: "family_id":
    12345678.0 was kept as the family "1.2345678E7" (of no other member, silently), and a
    date 20200101.0 was quarantined as invalid."""
    record = gp_record(family=12345678.0, filed=20200101.0, published=2.0210101e7)
    parsed = ingestion.with_validation(ingestion.parse_google_patents(lines_frame(spark, [record])))
    row = parsed.select("reason", "family_id", "filing_date", "publication_date").first()
    assert row.asDict() == {
        "reason": None,
        "family_id": "12345678",
        "filing_date": "20200101",  # a valid YYYYMMDD date now (reason None)
        "publication_date": "20210101",
    }
    not_whole = gp_record(number="US-2-A1", family=1234.5)
    parsed = ingestion.parse_google_patents(lines_frame(spark, [not_whole]))
    assert parsed.first()["family_id"] == "1234.5"  # a text of its own, not rounded


@pytest.mark.parametrize("number", [None, "", "   "])
def test_missing_publication_number(spark, number):
    assert (
        one_reason(spark, gp_record(number="US-1-A1", publication_number=number))
        == "missing_publication_number"
    )


def test_missing_family_id(spark):
    assert one_reason(spark, gp_record(family_id="")) == "missing_family_id"
    assert one_reason(spark, gp_record(family_id="-1")) == "missing_family_id"


@pytest.mark.parametrize(
    "field,value",
    [
        ("filing_date", 20251341),
        ("filing_date", 20230230),
        ("filing_date", 20190000),
        ("publication_date", 99999999),
        ("publication_date", 0),
        ("priority_date", "2019-13-01"),
    ],
)
def test_impossible_dates(spark, field, value):
    assert one_reason(spark, gp_record(**{field: value})) == f"invalid_date:{field}"


def test_unknown_filing_date_zero_is_allowed(spark):
    assert one_reason(spark, gp_record(filing_date=0, priority_date=0)) is None


def test_published_before_filing(spark):
    assert (
        one_reason(spark, gp_record(filed=20220101, published=20210101))
        == "impossible_dates:published_before_filing"
    )


@pytest.mark.parametrize(
    ("code", "shown"),
    [("xx", "xx"), ("klingon", "klingon"), ("qq-XX", "qq-XX"), (None, "<null>"), (" ", "<blank>")],
)
def test_unknown_language(spark, code, shown):
    # a blank code gave the reason "unknown_language:", which named nothing
    record = gp_record()
    record["abstract_localized"][0]["language"] = code
    assert one_reason(spark, record) == f"unknown_language:{shown}"


def test_unknown_language_on_an_empty_text_is_ignored(spark):
    record = gp_record()
    record["title_localized"].append({"text": " ", "language": "xx", "truncated": False})
    assert one_reason(spark, record) is None


def test_no_text_in_any_view(spark):
    record = gp_record(abstract="", claims="")
    record["description_localized"] = []
    assert one_reason(spark, record) == "no_text"


def test_title_alone_is_no_text(spark):
    record = gp_record(abstract=" ", claims="")
    record["description_localized"][0]["text"] = ""
    assert one_reason(spark, record) == "no_text"


def test_duplicate_ids_with_different_content_conflict_and_exact_copies_collapse(spark):
    a = gp_record("US-1-A1")
    b = gp_record("US-1-A1", abstract="A different abstract.")
    c = gp_record("US-2-A1")
    frame = ingestion.with_validation(
        ingestion.parse_google_patents(lines_frame(spark, [a, b, c, c]))
    )
    marked = ingestion.split_duplicates(frame).select("publication_number", "duplicate").collect()
    got = sorted((r["publication_number"], r["duplicate"] or "") for r in marked)
    assert got == [
        ("US-1-A1", "conflict"),
        ("US-1-A1", "conflict"),
        ("US-2-A1", ""),
        ("US-2-A1", "exact"),
    ]


def test_one_record_written_two_ways_by_two_exports_is_one_record(spark):
    """Copies of one record that differ only in how an export writes it (an unknown date as 0
    or null, a date as 20210101 or "2021-01-01", an empty list or none, truncated false or
    unsaid) were "different content": both quarantined as duplicate_id_conflict and the
    publication lost from bronze."""
    a = gp_record("US-1-A1", priority_date=0, cpc=[], citation=[])
    a["abstract_localized"][0]["truncated"] = False
    b = gp_record("US-1-A1", published="2021-01-01", priority_date=None)
    b.pop("cpc", None)
    b.pop("citation", None)
    b["abstract_localized"][0].pop("truncated", None)
    changed = gp_record("US-1-A1", published="2021-01-02")
    frame = ingestion.with_validation(ingestion.parse_google_patents(lines_frame(spark, [a, b])))
    marked = sorted(r["duplicate"] or "" for r in ingestion.split_duplicates(frame).collect())
    assert marked == ["", "exact"]
    frame = ingestion.with_validation(
        ingestion.parse_google_patents(lines_frame(spark, [a, changed]))
    )
    marked = sorted(r["duplicate"] or "" for r in ingestion.split_duplicates(frame).collect())
    assert marked == ["conflict", "conflict"]  # another date is other content


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("zh", "zh"),
        ("zh-CN", "zh"),
        ("ZH", "zh"),
        ("zh_TW", "zh"),
        ("ja-JP", "ja"),
        ("jp", "ja"),
        ("EN", "en"),
        ("de", "de"),
        ("ko", "ko"),
        ("xx", None),
        ("", None),
        ("english", None),
        (" zh-Hant-TW ", "zh"),
        ("en-", None),  # the Python twin used to accept what Spark refuses
        ("en-US!", None),
        ("\ten", None),
        # Java's $ matched before a final \r or \u2028, Python's only before \n: the twins
        # disagreed; a code ends the string in both now
        ("en\n", None),
        ("en\r", None),
        ("ja\u2028", None),
        # three-letter codes beyond the five first accepted quarantined a Russian record
        ("rus", "ru"),
        ("spa", "es"),
        ("dut", "nl"),
        ("cmn-Hans", "zh"),
        ("iw", "he"),
        ("und", None),
    ],
)
def test_language_normalization_in_spark_and_python(spark, raw, expected):
    got = (
        spark.createDataFrame([(raw,)], "c string")
        .select(normalize_language(F.col("c")))
        .first()[0]
    )
    assert got == expected == normalize_language_py(raw)


def test_dates_parse_from_int_string_and_iso(spark):
    frame = spark.createDataFrame([("20190710",), ("2019-07-10",), ("0",), (None,)], "d string")
    got = [r[0] for r in frame.select(ingestion.parse_date(F.col("d"))).collect()]
    assert [str(d) if d else None for d in got] == ["2019-07-10", "2019-07-10", None, None]


def citation_rows(spark, citations):
    record = gp_record(citation=citations)
    parsed = ingestion.parse_google_patents(lines_frame(spark, [record]))
    return [
        r.asDict() for r in ingestion.explode_citations(parsed).orderBy("citation_index").collect()
    ]


def test_citation_letters_from_either_field_and_in_real_variety(spark):
    cites = [
        {"publication_number": "CN-1-A", "type": "SEA", "category": "X"},
        {"publication_number": "CN-2-A", "type": "XY", "category": "ISR"},  # swapped fields
        {"publication_number": "CN-3-A", "type": "EXA", "category": "Y,A"},
        {"publication_number": "CN-4-A", "type": "SEA", "category": "x"},
        {"publication_number": "CN-5-A", "type": "APP", "category": ""},
        {"publication_number": "CN-6-A", "type": "OPP", "category": "P, X"},
        {
            "publication_number": "",
            "npl_text": "Smith, Journal, 2001",
            "type": "SEA",
            "category": "A",
        },
    ]
    rows = citation_rows(spark, cites)
    assert [(r["category"], r["source"], r["is_x"]) for r in rows] == [
        ("X", "SEA", True),
        ("XY", "ISR", True),
        ("AY", "EXA", False),
        ("X", "SEA", True),
        (None, "APP", False),
        ("PX", "OPP", True),
        ("A", "SEA", False),
    ]
    assert rows[-1]["cited"] is None and rows[-1]["npl_text"] == "Smith, Journal, 2001"
    assert rows[2]["is_y"] and rows[2]["is_a"]


def test_null_citation_entries_are_dropped_and_counted_not_turned_into_rows(spark):
    cites = [None, {"publication_number": "CN-1-A", "type": "SEA", "category": "X"}, None]
    rows = citation_rows(spark, cites)
    assert [(r["cited"], r["citation_index"]) for r in rows] == [("CN-1-A", 1)]
    record = gp_record(citation=cites)
    other = gp_record("US-2-A1", citation=[None])
    lines = lines_frame(spark, [record, record, other])  # the record and its exact copy
    checked = ingestion.split_duplicates(
        ingestion.with_validation(ingestion.parse_google_patents(lines))
    )
    # the copy is counted as a duplicate, its null entries are not counted again
    assert ingestion.duplicate_counts(checked) == (1, 3)


def test_source_code_with_letter_characters_is_not_read_as_letters(spark):
    # EXA consists of relevance-letter characters (E, X, A) but is a source code.
    (row,) = citation_rows(spark, [{"publication_number": "CN-1-A", "type": "EXA", "category": ""}])
    assert row["category"] is None and row["source"] == "EXA" and not row["is_x"]


def test_citations_resolve_only_to_corpus_publications(spark):
    citations = spark.createDataFrame(
        [("US-1-A1", 0, "US-2-A1"), ("US-1-A1", 1, "DE-9-A1"), ("US-1-A1", 2, None)],
        "citing string, citation_index int, cited string",
    )
    corpus = spark.createDataFrame(
        [("US-2-A1", "200")], "publication_number string, family_id string"
    )
    got = sorted(
        (r["citation_index"], r["resolved"], r["cited_family_id"])
        for r in ingestion.resolve_citations(citations, corpus).collect()
    )
    assert got == [(0, True, "200"), (1, False, None), (2, False, None)]


def test_bronze_rows_are_typed_and_normalized(spark):
    record = gp_record(lang="zh-CN")
    record["abstract_localized"].append({"text": "", "language": "en", "truncated": None})
    parsed = ingestion.with_validation(ingestion.parse_google_patents(lines_frame(spark, [record])))
    row = ingestion.to_bronze_publications(parsed, "google_patents", "2026-01-01 00:00:00").first()
    assert str(row["publication_date"]) == "2021-01-01"
    assert [(e["language"], e["truncated"]) for e in row["abstract_localized"]] == [("zh", False)]
    assert json.loads(json.dumps(row["ipc"][0].asDict()))["code"] == "H01M10/05"


def test_a_text_is_blank_only_when_it_holds_nothing_but_spaces(spark):
    """Spark's trim strips spaces only: a tab or an ideographic space is text, as before the
    blank test stopped trimming every text."""
    record = gp_record()
    kept = ["\t", "  x  ", "\u3000", " y"]
    record["abstract_localized"] = [
        {"text": text, "language": "en", "truncated": None} for text in ["", "   ", *kept, None]
    ]
    parsed = ingestion.with_validation(ingestion.parse_google_patents(lines_frame(spark, [record])))
    row = ingestion.to_bronze_publications(parsed, "google_patents", "2026-01-01 00:00:00").first()
    entries = [e.asDict() for e in row["abstract_localized"]]
    assert [e["text"] for e in entries] == kept
    assert all(list(e) == ["text", "language", "truncated"] for e in entries)
    blank = gp_record(abstract="   ", claims=" ")
    blank["description_localized"][0]["text"] = "      "
    assert one_reason(spark, blank) == "no_text"
