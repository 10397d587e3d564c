"""Fault suite: damaged files and foreign encodings are quarantined, never fatal, never
silently decoded into garbage (README: Reliability)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

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
    utf16.jsonl (UTF-16-LE with its BOM), mixed.jsonl (3 good lines, 1 with invalid UTF-8),
    bom.jsonl (2 records after a UTF-8 byte-order mark, as Windows tools write it: read, its
    first record not called unparseable)."""
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
    (folder / "bom.jsonl").write_bytes("\n".join(_lines("6", 2)).encode("utf-8-sig"))


def _codec_input(spark, folder):
    """Other codecs than gzip, by file name (Hadoop picks the codec by name):
    good.jsonl.zst (30 records) and hadoop.jsonl.lz4 (20, Hadoop's block format, written by
    Spark) are readable; left out: truncated.jsonl.bz2 (cut in its first block) and
    truncated.jsonl.zst, frame.jsonl.lz4 (the lz4 tool's frame format, which Hadoop's codec
    reads as nothing), gzipped.jsonl (gzip data read as plain text), noise.jsonl.snappy
    (whose first bytes claim a 1.6 GB block)."""
    import bz2
    import shutil

    import pyarrow as pa

    folder.mkdir(exist_ok=True)

    def compressed(name, codec, lines):
        with pa.CompressedOutputStream(str(folder / name), codec) as out:
            out.write("\n".join(lines).encode())

    compressed("good.jsonl.zst", "zstd", _lines("5", 30))
    compressed("truncated.jsonl.zst", "zstd", _lines("6", 400))
    whole = (folder / "truncated.jsonl.zst").read_bytes()
    (folder / "truncated.jsonl.zst").write_bytes(whole[: len(whole) // 2])
    whole = bz2.compress("\n".join(_lines("7", 400)).encode())
    (folder / "truncated.jsonl.bz2").write_bytes(whole[: len(whole) // 2])
    compressed("frame.jsonl.lz4", "lz4", _lines("8", 10))
    (folder / "gzipped.jsonl").write_bytes(gzip.compress("\n".join(_lines("9", 10)).encode()))
    (folder / "noise.jsonl.snappy").write_bytes(b"\x00garbage-not-snappy" * 10)
    written = folder.parent / f"{folder.name}-spark-lz4"
    rows = spark.createDataFrame([(line,) for line in _lines("0", 20)], "value string")
    rows.coalesce(1).write.mode("overwrite").option("compression", "lz4").text(str(written))
    shutil.copy(next(written.glob("part-*.lz4")), folder / "hadoop.jsonl.lz4")
    shutil.rmtree(written)


def test_other_codecs_are_read_or_left_out_by_name_never_fatal_or_empty(spark, tmp_path):
    source, lake = tmp_path / "input", str(tmp_path / "lake")
    _codec_input(spark, source)
    metrics = ingest.run(spark, lake, str(source), "google_patents")

    kept = DeltaTable(f"{lake}/bronze/publications").to_pandas()
    assert sorted(kept.publication_number) == sorted(
        [f"US-5{i}-A1" for i in range(30)] + [f"US-0{i}-A1" for i in range(20)]
    )
    quarantine = DeltaTable(f"{lake}/quarantine").to_pandas()
    assert set(quarantine.reason) == {"unreadable_file"}
    errors = {
        Path(row.source_file).name: json.loads(row.record)["error"]
        for row in quarantine.itertuples()
    }
    assert sorted(errors) == [
        "frame.jsonl.lz4",
        "gzipped.jsonl",
        "noise.jsonl.snappy",
        "truncated.jsonl.bz2",
        "truncated.jsonl.zst",
    ]
    assert "LZ4 frame-compressed data" in errors["frame.jsonl.lz4"]
    assert "gzip-compressed data in gzipped.jsonl" in errors["gzipped.jsonl"]
    assert "not Hadoop's .snappy block format" in errors["noise.jsonl.snappy"]
    assert "zstd" in errors["truncated.jsonl.zst"].lower()  # zstd-jni's "Truncated source"
    assert metrics["files_left_out"] == 5 and metrics["records_total"] == 50


def test_damaged_and_foreign_files_are_quarantined_and_the_rest_ingested(spark, tmp_path):
    source, lake = tmp_path / "input", str(tmp_path / "lake")
    _bad_input(source)
    metrics = ingest.run(spark, lake, str(source), "google_patents")

    kept = DeltaTable(f"{lake}/bronze/publications").to_pandas()
    # good.jsonl.gz and bom.jsonl whole, mixed.jsonl's valid lines; nothing of the two
    # left-out files
    assert sorted(kept.publication_number) == sorted(
        [f"US-1{i}-A1" for i in range(40)]
        + [f"US-4{i}-A1" for i in range(3)]
        + [f"US-6{i}-A1" for i in range(2)]
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
    assert metrics["records_total"] == 46  # lines of the files read; the invariant held


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


def test_files_are_probed_several_at_once_and_reported_in_their_order(capsys):
    """Ingest probed an export's files one at a time (a gzip file decompressed in the driver's
    JVM, a Parquet file read by a Spark job of its own), so the thousands of files of a large
    export waited on each other. They are probed several at once; the probes keep the files'
    order, so the quarantine and the files read are the same."""
    import threading
    import time

    from lake import fs

    lock, running, most = threading.Lock(), set(), []

    def probe(path: str) -> fs.FileProbe:
        with lock:
            running.add(path)
            most.append(len(running))
        time.sleep(0.05)
        with lock:
            running.discard(path)
        return fs.FileProbe(path, error=None if int(path) % 3 else "damaged")

    paths = [str(i) for i in range(12)]
    probes = fs.probe_each(probe, paths, threads=4)
    assert [p.path for p in probes] == paths
    assert [p.readable for p in probes] == [i % 3 != 0 for i in range(12)]
    assert max(most) == 4
    most.clear()
    assert fs.probe_each(probe, paths, threads=1) == probes and max(most) == 1
    assert fs.PROBE_THREADS >= 2  # the default, also on a one-core driver
    # a large export's probes say how far they are, at every tenth of the files
    assert capsys.readouterr().err == ""  # 12 files: nothing to follow
    many = [str(i) for i in range(60)]
    assert len(fs.probe_each(lambda p: fs.FileProbe(p), many, threads=3)) == 60
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 10 and lines[-1] == "probed 60 of 60 files (3 at once)"
    heard = []  # a job hears them instead (ingest passes its JobRun.info: "[ingest] probed ...")
    fs.probe_each(lambda p: fs.FileProbe(p), many, threads=3, report=heard.append)
    assert heard == lines and capsys.readouterr().err == ""
