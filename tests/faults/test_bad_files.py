"""Fault suite: damaged files and foreign encodings are quarantined, never fatal, never
silently decoded into garbage (README: Reliability)."""

from __future__ import annotations

import gzip
import json

import pytest
from deltalake import DeltaTable

from lake import EmptyTableError
from spark_jobs import ingest
from tests.conftest import gp_record

pytestmark = [pytest.mark.spark, pytest.mark.faults]


def _lines(prefix: str, n: int) -> list[str]:
    return [
        json.dumps(gp_record(number=f"US-{prefix}{i}-A1", family=f"{prefix}{i}")) for i in range(n)
    ]


def _bad_input(folder):
    """good.jsonl.gz (40 records), truncated.jsonl.gz (cut in the middle of its stream),
    utf16.jsonl (UTF-16-LE with its BOM), mixed.jsonl (3 good lines, 1 with invalid UTF-8)."""
    folder.mkdir()
    (folder / "good.jsonl.gz").write_bytes(gzip.compress("\n".join(_lines("1", 40)).encode()))
    # incompressible-enough content so the cut falls in the deflate stream, not the header
    whole = gzip.compress("\n".join(_lines("2", 400)).encode(), mtime=0)
    (folder / "truncated.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    (folder / "utf16.jsonl").write_bytes("\n".join(_lines("3", 5)).encode("utf-16"))
    mixed = [line.encode() for line in _lines("4", 3)]
    bad = json.dumps(gp_record(number="US-49-A1", family="49", abstract="caf@")).encode()
    mixed.append(bad.replace(b"caf@", b"caf\xe9 \xff"))  # Latin-1 e-acute and a stray 0xff
    (folder / "mixed.jsonl").write_bytes(b"\n".join(mixed))


def test_damaged_and_foreign_files_are_quarantined_and_the_rest_ingested(spark, tmp_path):
    source, lake = tmp_path / "input", str(tmp_path / "lake")
    _bad_input(source)
    metrics = ingest.run(spark, lake, str(source), "google_patents")

    kept = DeltaTable(f"{lake}/bronze/publications").to_pandas()
    # good.jsonl.gz whole, mixed.jsonl's valid lines; nothing of the two left-out files
    assert sorted(kept.publication_number) == sorted(
        [f"US-1{i}-A1" for i in range(40)] + [f"US-4{i}-A1" for i in range(3)]
    )
    quarantine = DeltaTable(f"{lake}/quarantine").to_pandas()
    by_reason = {r: q for r, q in quarantine.groupby("reason")}
    assert set(by_reason) == {"unreadable_file", "unsupported_encoding:utf-16-le", "invalid_utf8"}

    unreadable = by_reason["unreadable_file"].iloc[0]
    assert unreadable.source_file.endswith("truncated.jsonl.gz")
    detail = json.loads(unreadable.record)
    assert "EOF" in detail["error"] or "eof" in detail["error"].lower()
    assert 0 < detail["lines_read"] < 400  # the lines before the damage are counted

    assert by_reason["unsupported_encoding:utf-16-le"].iloc[0].source_file.endswith("utf16.jsonl")

    invalid = by_reason["invalid_utf8"].iloc[0]
    assert invalid.record_id is None  # never parsed, so no id is trusted
    assert "caf\ufffd \ufffd" in invalid.record  # the bad bytes shown as U+FFFD, not guessed

    assert metrics["files_left_out"] == 2
    assert metrics["quarantined_unreadable_file"] == 1
    assert metrics["quarantined_invalid_utf8"] == 1
    assert metrics["records_total"] == 44  # lines of the files read; the invariant held


def test_only_damaged_files_fail_the_ingest_and_name_them(spark, tmp_path):
    source, lake = tmp_path / "input", str(tmp_path / "lake")
    source.mkdir()
    whole = gzip.compress("\n".join(_lines("2", 400)).encode(), mtime=0)
    (source / "truncated.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(EmptyTableError, match=r"no readable file.*truncated\.jsonl\.gz"):
        ingest.run(spark, lake, str(source), "google_patents")
    runs = DeltaTable(f"{lake}/meta/job_runs").to_pandas()
    assert runs.status.tolist() == ["failed"]
    assert not (tmp_path / "lake" / "bronze").exists()  # nothing committed
