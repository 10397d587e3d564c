"""The canonical input format (one patent per row, one citation per row) and Parquet inputs
of both formats through ingest."""

import json

import pytest
from deltalake import DeltaTable

from spark_jobs import ingest
from tests.conftest import gp_record

pytestmark = pytest.mark.spark


def write_jsonl(path, rows):
    """Rows as JSON lines; a str row is written verbatim (a broken line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in rows]
    path.write_text("".join(line + "\n" for line in lines))


def patent(number, family, lang="en", **extra):
    row = {
        "publication_number": number,
        "family_id": family,
        "country_code": number[:2],
        "kind_code": "A1",
        "lang": lang,
        "title": "Cup",
        "abstract": "A cup.",
        "claims": "1. A cup.",
        "description": "Cups.",
        "publication_date": "2021-03-04",
        "filing_date": "20200102",
        "ipc": ["A47G19/00"],
    }
    row.update(extra)
    return row


def test_canonical_ingest_types_resolves_and_quarantines(spark, tmp_path):
    source, lake = tmp_path / "canonical", str(tmp_path / "lake")
    write_jsonl(
        source / "patents" / "part-0.jsonl",
        [
            patent("EP-1-A1", "10"),
            patent(
                "CN-2-A",
                "10",
                lang="zh-CN",
                title="杯子",
                abstract="一种杯子。",
                claims="1. 一种杯子。",
            ),
            patent("JP-3-A", "11", lang="ja", filing_date="2020-02-30"),  # impossible date
            "{not json",
            patent("EP-4-A1", "12", ipc="A47G19/00"),  # a code where a list belongs
            patent("EP-6-A1", "14", description="Cups. " * 1000),  # over --max-record-bytes
            patent("EP-7-A1", "15", abstract=["A cup.", "A lid."]),  # a list, not a text
            patent("EP-8-A1", "16", abstract="[Problem] A cup that keeps tea hot."),
        ],
    )
    with (source / "patents" / "part-0.jsonl").open("ab") as f:  # Latin-1, not UTF-8
        latin = json.dumps(patent("EP-5-A1", "13", abstract="caf\u00e9"), ensure_ascii=False)
        f.write((latin + "\n").encode("latin-1"))
    write_jsonl(
        source / "citations" / "part-0.jsonl",
        [
            {"citing": "EP-1-A1", "cited": "CN-2-A", "category": "X", "source": "SEA"},
            {"citing": "EP-1-A1", "cited": "US-9-B2", "category": "Y,A", "source": "ISR"},
            {
                "citing": "JP-3-A",
                "cited": "EP-1-A1",
                "category": "X",
                "source": "ISR",
            },  # citing quarantined
            '{"citing": "EP-1-A1", "cited": ',  # a broken citation line: no patent record
            "[]",  # no citation at all: Spark's JSON reader used to drop it without a trace
        ],
    )

    metrics = ingest.run(spark, lake, str(source), "canonical", max_record_bytes=4096)

    pubs = DeltaTable(f"{lake}/bronze/publications").to_pandas().set_index("publication_number")
    assert sorted(pubs.index) == ["CN-2-A", "EP-1-A1", "EP-8-A1"]  # "[Problem] ..." is text
    assert pubs.loc["CN-2-A", "abstract_localized"][0]["language"] == "zh"
    assert str(pubs.loc["EP-1-A1", "filing_date"]) == "2020-01-02"
    assert pubs.loc["EP-1-A1", "ipc"][0]["first"]
    cites = DeltaTable(f"{lake}/bronze/citations").to_pandas().sort_values("cited")
    assert [(c.cited, c.category, c.is_x, c.resolved) for c in cites.itertuples()] == [
        ("CN-2-A", "X", True, True),
        ("US-9-B2", "AY", False, False),
    ]
    quarantine = DeltaTable(f"{lake}/quarantine").to_pandas()
    assert sorted(quarantine.reason) == [
        "citation_of_unknown_patent",
        "invalid_date:filing_date",
        "invalid_field:abstract",
        "invalid_field:ipc",
        "invalid_utf8",
        "record_too_large",
        "unparseable_citation",
        "unparseable_citation",
        "unparseable_json",
    ]
    # a broken citation line failed the run before ("lost records": it was counted as a
    # patent record), `ipc` as a string was called unparseable, Latin-1 bytes were read as
    # U+FFFD and kept, and canonical lines had no size limit
    assert metrics["records_total"] == 9 and metrics["records_kept"] == 3
    assert metrics["citation_lines_total"] == 5 and metrics["citations_total"] == 2


def test_damaged_and_foreign_canonical_files_are_quarantined_not_fatal(spark, tmp_path):
    import gzip

    from lake import EmptyTableError

    source, lake = tmp_path / "canonical", str(tmp_path / "lake")
    write_jsonl(source / "patents" / "part-0.jsonl", [patent("EP-1-A1", "10")])
    rows = "\n".join(
        json.dumps(patent(f"EP-T{i}-A1", f"T{i}", abstract=f"Cup {i}.")) for i in range(400)
    )
    whole = gzip.compress(rows.encode(), mtime=0)
    (source / "patents" / "part-1.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    cite = {"citing": "EP-1-A1", "cited": "EP-1-A1", "category": "X", "source": "SEA"}
    write_jsonl(source / "citations" / "part-0.jsonl", [cite])
    (source / "citations" / "part-1.jsonl").write_bytes(json.dumps(cite).encode("utf-16"))

    metrics = ingest.run(spark, lake, str(source), "canonical")

    pubs = DeltaTable(f"{lake}/bronze/publications").to_pandas()
    assert list(pubs.publication_number) == ["EP-1-A1"]
    quarantine = DeltaTable(f"{lake}/quarantine").to_pandas().sort_values("reason")
    assert [(r.reason, r.source_file.rsplit("/", 2)[-2:]) for r in quarantine.itertuples()] == [
        ("unreadable_file", ["patents", "part-1.jsonl.gz"]),
        ("unsupported_encoding:utf-16-le", ["citations", "part-1.jsonl"]),
    ]
    assert 0 < json.loads(quarantine.record.iloc[0])["lines_read"] < 400
    assert metrics["files_left_out"] == 2 and metrics["records_total"] == 1
    assert len(DeltaTable(f"{lake}/bronze/citations").to_pandas()) == 1

    (source / "patents" / "part-0.jsonl").unlink()  # only the damaged patents file is left
    with pytest.raises(EmptyTableError, match=r"no readable file.*part-1\.jsonl\.gz"):
        ingest.run(spark, str(tmp_path / "lake2"), str(source), "canonical")


def test_a_damaged_or_mistyped_parquet_file_is_quarantined_the_others_ingested(spark, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    source, lake = tmp_path / "canonical", str(tmp_path / "lake")
    (source / "patents").mkdir(parents=True)
    rows = [patent(f"EP-{i}-A1", f"F{i}") for i in range(5)]
    pq.write_table(pa.Table.from_pylist(rows), source / "patents" / "part-0.parquet")
    more = pa.Table.from_pylist([patent(f"EP-T{i}-A1", f"T{i}") for i in range(50)])
    pq.write_table(more, source / "patents" / "part-1.parquet")
    whole = (source / "patents" / "part-1.parquet").read_bytes()
    (source / "patents" / "part-1.parquet").write_bytes(whole[: len(whole) // 2])  # no footer
    mistyped = pa.Table.from_pylist([{**patent("EP-M-A1", "M"), "ipc": 7}])
    pq.write_table(mistyped, source / "patents" / "part-2.parquet")  # ipc an integer
    cite = {"citing": "EP-1-A1", "cited": "EP-2-A1", "category": "X", "source": "SEA"}
    write_jsonl(source / "citations" / "part-0.jsonl", [cite])

    metrics = ingest.run(spark, lake, str(source), "canonical")

    pubs = DeltaTable(f"{lake}/bronze/publications").to_pandas()
    assert sorted(pubs.publication_number) == [f"EP-{i}-A1" for i in range(5)]
    quarantine = DeltaTable(f"{lake}/quarantine").to_pandas().sort_values("source_file")
    assert list(quarantine.reason) == ["unreadable_file", "unreadable_file"]
    assert [f.rsplit("/", 1)[-1] for f in quarantine.source_file] == [
        "part-1.parquet",
        "part-2.parquet",
    ]
    errors = [json.loads(r)["error"] for r in quarantine.record]
    assert (
        errors[0]
        and "column ipc holds bigint values, the input schema says array<string>" in (errors[1])
    )
    assert metrics["files_left_out"] == 2 and metrics["records_kept"] == 5


def test_parquet_null_columns_and_typed_dates_are_read_not_left_out(spark, tmp_path):
    """pyarrow and pandas store a column of only nulls (or only empty lists) with Parquet's
    null type: a citations file without one NPL reference, patents without descriptions; and
    dates as dates, timestamps or integers. Spark refuses to read any of these as a string, and
    ingest left such a file out whole as ``unreadable_file``."""
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    source, lake = tmp_path / "canonical", str(tmp_path / "lake")
    for folder in ("patents", "citations"):
        (source / folder).mkdir(parents=True)
    rows = [patent(f"EP-{i}-A1", f"F{i}", description=None, ipc=[]) for i in range(3)]
    patents = pa.Table.from_pylist(rows)
    assert pa.types.is_null(patents.schema.field("description").type)
    assert pa.types.is_null(patents.schema.field("ipc").type.value_type)
    pq.write_table(patents, source / "patents" / "part-0.parquet")
    typed = pa.Table.from_pylist([patent("EP-9-A1", "F9")])  # a file of the input's own types
    pq.write_table(typed, source / "patents" / "part-1.parquet")
    dated = pa.Table.from_pylist([patent("EP-D-A1", "FD")]).drop_columns(
        ["publication_date", "filing_date"]
    )
    dated = dated.append_column("publication_date", pa.array([dt.date(2021, 3, 4)]))
    dated = dated.append_column("filing_date", pa.array([dt.datetime(2020, 1, 2, 23, 59)]))
    dated = dated.append_column("priority_date", pa.array([20191231], pa.int64()))
    pq.write_table(dated, source / "patents" / "part-2.parquet")
    # pandas stores an integer column with a missing value as float64: 12345678.0 was read as
    # the family "1.2345678E7" (no other member's) and 20191231.0 as an invalid date
    floats = pa.Table.from_pylist([patent("EP-F-A1", "x")]).drop_columns(["family_id"])
    floats = floats.append_column("family_id", pa.array([12345678.0]))
    floats = floats.append_column("priority_date", pa.array([20191231.0]))
    pq.write_table(floats, source / "patents" / "part-3.parquet")
    cites = [
        {"citing": "EP-1-A1", "cited": c, "category": "X", "source": "SEA", "npl_text": None}
        for c in ("EP-2-A1", "EP-9-A1")
    ]
    pq.write_table(pa.Table.from_pylist(cites), source / "citations" / "part-0.parquet")

    metrics = ingest.run(spark, lake, str(source), "canonical")

    assert metrics["files_left_out"] == 0 and metrics["records_kept"] == 6
    assert DeltaTable(f"{lake}/quarantine").to_pandas().empty
    pubs = DeltaTable(f"{lake}/bronze/publications").to_pandas().set_index("publication_number")
    assert list(pubs.loc["EP-0-A1", "ipc"]) == [] and list(pubs.loc["EP-9-A1", "ipc"])
    assert len(pubs.loc["EP-0-A1", "description_localized"]) == 0
    assert pubs.loc["EP-9-A1", "description_localized"][0]["text"] == "Cups."
    assert pubs.loc["EP-F-A1", "family_id"] == "12345678"
    assert str(pubs.loc["EP-F-A1", "priority_date"]) == "2019-12-31"
    dates = pubs.loc["EP-D-A1", ["publication_date", "filing_date", "priority_date"]]
    assert [str(d) for d in dates] == ["2021-03-04", "2020-01-02", "2019-12-31"]
    assert [str(d) for d in pubs.loc["EP-9-A1", ["publication_date", "filing_date"]]] == [
        "2021-03-04",
        "2020-01-02",
    ]
    citations = DeltaTable(f"{lake}/bronze/citations").to_pandas()
    assert sorted(citations.cited) == ["EP-2-A1", "EP-9-A1"] and citations.resolved.all()


def test_files_in_subfolders_of_the_input_are_read_in_both_formats(spark, tmp_path):
    """An export written as ``2023/part-*`` and ``2024/part-*``: ingest read only the files
    directly in ``--input`` and failed with "the input holds no record"; with files at both
    levels it left the subfolders' out without a word. ``_``-names stay skipped."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    export = tmp_path / "export"
    for year, number in (("2023", "1"), ("2024", "2"), ("2024/q4", "3"), (".", "4")):
        record = gp_record(number=f"US-{number}-A1", family=f"F{number}")
        write_jsonl(export / year / f"part-{number}.jsonl", [record])
    write_jsonl(export / "_tmp" / "part-9.jsonl", ["not json"])
    metrics = ingest.run(spark, str(tmp_path / "lake"), str(export), "google_patents")
    assert metrics["records_kept"] == 4 and metrics["records_total"] == 4

    canonical = tmp_path / "canonical"
    (canonical / "patents" / "2024").mkdir(parents=True)
    rows = [patent(f"EP-{i}-A1", f"F{i}") for i in range(2)]
    pq.write_table(pa.Table.from_pylist(rows), canonical / "patents" / "2024" / "part-0.parquet")
    write_jsonl(
        canonical / "citations" / "2024" / "part-0.jsonl",
        [{"citing": "EP-0-A1", "cited": "EP-1-A1", "category": "X", "source": "SEA"}],
    )
    metrics = ingest.run(spark, str(tmp_path / "lake2"), str(canonical), "canonical")
    assert metrics["records_kept"] == 2 and metrics["citations_x_resolved"] == 1


def test_an_input_laid_out_for_the_other_format_is_refused_by_name(spark, tmp_path):
    """A Google Patents export ingested as canonical failed with Spark's PATH_NOT_FOUND for
    patents/, and a canonical folder ingested as an export with "the input holds no record"."""
    export, canonical = tmp_path / "export", tmp_path / "canonical"
    write_jsonl(export / "publications-00000.jsonl", ['{"publication_number": "EP-1-A1"}'])
    (export / "_SUCCESS").write_text("")
    write_jsonl(canonical / "patents" / "part-0.jsonl", [patent("EP-1-A1", "10")])
    write_jsonl(canonical / "citations" / "part-0.jsonl", [])
    with pytest.raises(
        ValueError,
        match=r"--format canonical reads .*export/patents/ .* no patents/ folder: it holds "
        r"'publications-00000.jsonl' \(a Google Patents export\? pass --format google_patents\)",
    ):
        ingest.run(spark, str(tmp_path / "lake"), str(export), "canonical")
    with pytest.raises(
        ValueError,
        match=r"--format google_patents reads .* only the canonical layout's folders "
        r"\(citations/, patents/\): pass --format canonical",
    ):
        ingest.run(spark, str(tmp_path / "lake"), str(canonical), "google_patents")
    (canonical / "citations" / "part-0.jsonl").unlink()
    (canonical / "citations").rmdir()
    with pytest.raises(ValueError, match=r"has no citations/ folder \(for a corpus without"):
        ingest.run(spark, str(tmp_path / "lake"), str(canonical), "canonical")
    assert not (tmp_path / "lake" / "bronze").exists()
    (canonical / "citations").mkdir()  # an empty folder: a corpus without citations
    # the right format still ingests the canonical folder
    assert ingest.run(spark, str(tmp_path / "lake"), str(canonical), "canonical")["records_kept"]


def bigquery_table(records):
    """Google Patents records as BigQuery's Parquet export types them: INT64 dates (also in
    citations), struct fields the reader does not use (``cpc.tree``), struct fields in another
    order, and columns it does not read."""
    import pyarrow as pa

    localized = pa.list_(
        pa.struct([("language", pa.string()), ("text", pa.string()), ("truncated", pa.bool_())])
    )
    code = pa.struct(
        [
            ("code", pa.string()),
            ("inventive", pa.bool_()),
            ("first", pa.bool_()),
            ("tree", pa.list_(pa.string())),
        ]
    )
    cited = pa.struct(
        [
            ("publication_number", pa.string()),
            ("application_number", pa.string()),
            ("npl_text", pa.string()),
            ("type", pa.string()),
            ("category", pa.string()),
            ("filing_date", pa.int64()),
        ]
    )
    text = ("publication_number", "application_number", "country_code", "kind_code", "family_id")
    schema = pa.schema(
        [(name, pa.string()) for name in text]
        + [(d, pa.int64()) for d in ("publication_date", "filing_date", "priority_date")]
        + [(f"{v}_localized", localized) for v in ("title", "abstract", "claims", "description")]
        + [("ipc", pa.list_(code)), ("cpc", pa.list_(code)), ("citation", pa.list_(cited))]
        + [("inventor", pa.list_(pa.string())), ("entity_status", pa.string())]
    )
    rows = [
        {
            **r,
            "ipc": [{**c, "tree": [c["code"][:4]]} for c in r["ipc"]],
            "inventor": ["A. Inventor"],
            "entity_status": "LARGE",
        }
        for r in records
    ]
    return pa.Table.from_pylist(rows, schema=schema)


def not_utf8(table):
    """``table`` with the bytes "th" of its claims texts replaced by two that are no UTF-8."""
    import pyarrow as pa

    index = table.schema.get_field_index("claims_localized")
    column = table.column(index).combine_chunks()
    texts = column.values.field("text")
    validity, offsets, data = texts.buffers()
    broken = pa.py_buffer(data.to_pybytes().replace(b"th", b"\xff\xfe"))
    texts = pa.Array.from_buffers(pa.string(), len(texts), [validity, offsets, broken])
    entries = pa.StructArray.from_arrays(
        [
            texts if f.name == "text" else column.values.field(f.name)
            for f in column.type.value_type
        ],
        fields=list(column.type.value_type),
    )
    return table.set_column(
        index, "claims_localized", pa.ListArray.from_arrays(column.offsets, entries)
    )


def test_a_google_patents_parquet_export_is_ingested_like_its_json_lines(spark, tmp_path):
    """DESIGN.md's first input is the export as BigQuery writes it, JSON lines or Parquet.
    A Parquet export was read as text: every "line" of its bytes quarantined (invalid_utf8,
    unparseable_json) and the job failed with nothing kept. The same records in both formats
    now give the same bronze rows; a folder may hold both formats."""
    import pyarrow.parquet as pq

    from lake import EmptyTableError

    cite = {
        "publication_number": "US-2-A1",
        "application_number": "US-APP-2",
        "npl_text": "",
        "type": "SEA",
        "category": "X",
        "filing_date": 20190101,
    }
    records = [
        gp_record("US-1-A1", "F1", citation=[cite]),
        gp_record("US-2-A1", "F2", lang="ja", abstract="カップ。"),
        gp_record(
            "US-3-A1", "F3", filed=0, cpc=[{"code": "A47G19/00", "inventive": False, "first": True}]
        ),
        gp_record("US-4-A1", "F4", lang="xx"),  # an unknown language: quarantined in both
        gp_record("US-5-A1", "F5"),
    ]
    json_export, mixed = tmp_path / "json", tmp_path / "mixed"
    write_jsonl(json_export / "publications-0.jsonl", records)
    # the Parquet file holds every case above; a folder may hold both formats
    write_jsonl(mixed / "publications-0.jsonl", records[4:])
    (mixed / "2024").mkdir()
    pq.write_table(bigquery_table(records[:4]), mixed / "2024" / "publications-1.parquet")

    tables = {}
    for export in (json_export, mixed):
        lake = str(tmp_path / f"lake-{export.name}")
        metrics = ingest.run(spark, lake, str(export), "google_patents")
        assert metrics["records_kept"] == 4 and metrics["files_left_out"] == 0, export.name
        pubs = DeltaTable(f"{lake}/bronze/publications").to_pandas()
        cites = DeltaTable(f"{lake}/bronze/citations").to_pandas()
        reasons = DeltaTable(f"{lake}/quarantine").to_pandas().reason
        drop = ["ingested_at", "source_file"]
        tables[export.name] = (
            pubs.drop(columns=drop, errors="ignore")
            .sort_values("publication_number")
            .reset_index(drop=True)
            .to_json(),
            cites.drop(columns=drop, errors="ignore").to_json(),
            sorted(reasons),
        )
    assert tables["mixed"] == tables["json"]
    (tmp_path / "empty").mkdir()
    pq.write_table(bigquery_table([]), tmp_path / "empty" / "publications-0.parquet")
    with pytest.raises(
        EmptyTableError, match=r"1 file\(s\) hold no record, only blank lines or Parq"
    ):
        ingest.run(spark, str(tmp_path / "lake-empty"), str(tmp_path / "empty"), "google_patents")
    pubs, cites, reasons = tables["json"]
    assert reasons == ["unknown_language:xx"]
    cited = json.loads(cites)
    assert list(cited["cited"].values()) == ["US-2-A1"] and all(cited["resolved"].values())


def test_parquet_of_another_nested_type_is_left_out_by_field_and_misnamed_parquet_by_name(
    spark, tmp_path
):
    """A struct field of another type that holds values fails its file, naming the field by
    its path; one that holds none is read as nulls, and a number where a string belongs is
    its text (as the JSON-lines reader takes it). Parquet bytes in a file read as JSON lines
    (not named *.parquet) are one quarantine row naming the cause, not a row per "line"."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    export = tmp_path / "export"
    export.mkdir()
    good = bigquery_table([gp_record("US-1-A1", "F1")])
    pq.write_table(good, export / "a.parquet")
    typed = good.set_column(
        good.schema.get_field_index("citation"),
        "citation",
        pa.array([[{"publication_number": "US-9-A1", "type": ["SEA"]}]]),  # type: a list
    )
    pq.write_table(typed, export / "b.parquet")
    empty = good.set_column(  # a citation of only nulls: null-typed fields, read as nulls
        good.schema.get_field_index("citation"),
        "citation",
        pa.array([[{"publication_number": "US-9-A1", "type": None}]]),
    )
    pq.write_table(
        empty.set_column(0, "publication_number", pa.array(["US-2-A1"])), export / "c.parquet"
    )
    pq.write_table(
        good.set_column(0, "publication_number", pa.array(["US-3-A1"])), export / "d.json"
    )
    numbered = good.set_column(0, "publication_number", pa.array(["US-4-A1"]))
    numbered = numbered.set_column(  # a number where a string belongs: its text, as in JSON
        good.schema.get_field_index("family_id"), "family_id", pa.array([4], pa.int64())
    )
    pq.write_table(numbered, export / "e.parquet")
    long = [{"text": "Cups. " * 1000, "language": "en", "truncated": False}]  # 6,000 bytes
    large = good.set_column(0, "publication_number", pa.array(["US-5-A1"]))
    index = good.schema.get_field_index("description_localized")
    large = large.set_column(index, "description_localized", pa.array([long], good[index].type))
    pq.write_table(large, export / "f.parquet")
    pq.write_table(pa.table({"pub_no": ["US-6-A1"], "title": ["Cup"]}), export / "g.parquet")
    # a claims text whose bytes are not UTF-8 (Parquet does not check them): it reached
    # bronze and stopped curate's Python code with a UnicodeDecodeError
    pq.write_table(
        not_utf8(good.set_column(0, "publication_number", pa.array(["US-7-A1"]))),
        export / "h.parquet",
    )

    metrics = ingest.run(
        spark, str(tmp_path / "lake"), str(export), "google_patents", None, None, 4096
    )

    assert metrics["records_kept"] == 3 and metrics["files_left_out"] == 3
    pubs = DeltaTable(str(tmp_path / "lake" / "bronze" / "publications")).to_pandas()
    assert dict(zip(pubs.publication_number, pubs.family_id, strict=True)) == {
        "US-1-A1": "F1",
        "US-2-A1": "F1",
        "US-4-A1": "4",
    }
    quarantine = DeltaTable(str(tmp_path / "lake" / "quarantine")).to_pandas()
    large = quarantine[quarantine.reason == "record_too_large"]  # as a line above the limit
    assert list(large.record_id) == ["US-5-A1"] and "Cups. Cups." in large.record.iloc[0]
    bad = quarantine[quarantine.reason == "invalid_utf8"]  # as a line of such bytes
    assert list(bad.record_id) == ["US-7-A1"] and "1. A \ufffd\ufffding." in bad.record.iloc[0]
    quarantine = quarantine[~quarantine.reason.isin(["record_too_large", "invalid_utf8"])]
    errors = {
        f.rsplit("/", 1)[-1]: json.loads(r)["error"]
        for f, r in zip(quarantine.source_file, quarantine.record, strict=True)
    }
    assert set(quarantine.reason) == {"unreadable_file"}
    assert set(errors) == {"b.parquet", "d.json", "g.parquet"}
    assert (
        "no column publication_number; the file's columns are pub_no, title" in errors["g.parquet"]
    )
    assert (
        "column citation.type holds array<string> values, the input schema says string"
        in errors["b.parquet"]
    )
    assert errors["d.json"] == (
        "Parquet data in d.json, which is read as JSON lines "
        "(only files named *.parquet are read as Parquet)"
    )
