"""Fault suite: empty inputs never replace good data, leaks stop at the exporter, failures
print one line. Each test replays a case of the fault campaign (README: Reliability)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from lake import EmptyTableError
from spark_jobs import build_pairs, curate, export_training, ingest
from spark_jobs.lib.leakage import LeakageError
from tests.conftest import copy_lake
from trainer.data import read_manifest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.spark, pytest.mark.faults]


def _state(lake: str, name: str) -> tuple[int, int]:
    table = DeltaTable(f"{lake}/{name}")
    return table.version(), len(table.to_pandas())


def test_an_empty_input_fails_and_leaves_a_good_lake_as_it_was(spark, pipeline, tmp_path):
    lake = copy_lake(pipeline, tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    before = {t: _state(lake, t) for t in ("bronze/publications", "bronze/citations", "quarantine")}
    with pytest.raises(EmptyTableError, match=r"would be empty.*the input holds no file"):
        ingest.run(spark, lake, str(empty), "google_patents")
    (empty / "part-0.jsonl").write_text("\n  \n")
    with pytest.raises(EmptyTableError, match=r"1 file\(s\) hold no record, only blank lines"):
        ingest.run(spark, lake, str(empty), "google_patents")
    assert {t: _state(lake, t) for t in before} == before
    runs = DeltaTable(f"{lake}/meta/job_runs").to_pandas()
    assert runs.sort_values("finished_at").iloc[-1][["job", "status"]].tolist() == [
        "ingest",
        "failed",
    ]


def test_an_input_of_only_bad_records_names_the_reasons_and_spots_a_json_document(spark, tmp_path):
    """A pretty-printed JSON array (not JSON lines) used to fail with only "bronze/
    publications would be empty": every line was unparseable and nothing said so."""
    from tests.conftest import gp_record

    source = tmp_path / "export"
    source.mkdir()
    records = [gp_record(f"EP-{i}-A1") for i in range(3)]
    (source / "export.json").write_text(json.dumps(records, indent=2))
    lines = len((source / "export.json").read_text().splitlines())
    with pytest.raises(EmptyTableError) as failed:
        ingest.run(spark, str(tmp_path / "lake"), str(source), "google_patents")
    message = str(failed.value)
    assert f"no record is valid: {lines:,} rejected (unparseable_json: {lines:,})" in message
    assert "one pretty-printed JSON document or array: the input must be JSON lines" in message


def test_allow_empty_commits_it_and_curate_then_refuses_the_empty_bronze(spark, tmp_path):
    lake, empty = str(tmp_path / "lake"), tmp_path / "empty"
    empty.mkdir()
    ingest.run(spark, lake, str(empty), "google_patents", args={"allow_empty": True})
    assert _state(lake, "bronze/publications")[1] == 0
    with pytest.raises(EmptyTableError, match="input table bronze/publications is empty"):
        curate.run(spark, lake)
    assert not (tmp_path / "lake" / "silver" / "views").exists()


def test_a_failing_job_prints_one_line_naming_the_job_and_cause(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    done = subprocess.run(
        [
            *(sys.executable, "spark_jobs/ingest.py", "--lake", str(tmp_path / "lake")),
            *("--input", str(empty), "--master", "local[1]"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "XEMBED_LOG_DIR": str(tmp_path / "logs")},
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ingest: bronze/publications would be empty"), last
    assert "Traceback" not in done.stderr
    log = Path(last.rsplit("(trace: ", 1)[1].rstrip(")"))
    assert "EmptyTableError" in log.read_text()


def test_an_appended_leak_stops_the_exporter_before_any_shard(spark, pipeline, tmp_path):
    lake = copy_lake(pipeline, tmp_path)
    build_pairs.run(spark, lake, seed=3)
    pairs = spark.read.format("delta").load(f"{lake}/gold/stage1_pairs")
    excluded = spark.read.format("delta").load(f"{lake}/silver/excluded_families").first()
    patents = spark.read.format("delta").load(f"{lake}/silver/patents")
    member = patents.where(patents.family_id == excluded["family_id"]).first()
    view = (
        spark.read.format("delta")
        .load(f"{lake}/silver/views")
        .where(f"publication_number = '{member['publication_number']}'")
        .first()
    )
    row = pairs.limit(1).toPandas()  # the planted pair names a real text of the excluded family
    row.loc[0, ["anchor_id", "anchor_lang", "anchor_view", "family_id"]] = [
        member["publication_number"],
        view["lang"],
        view["view"],
        member["family_id"],
    ]
    spark.createDataFrame(row, pairs.schema).write.format("delta").mode("append").save(
        f"{lake}/gold/stage1_pairs"
    )
    out = tmp_path / "shards"
    with pytest.raises(LeakageError, match=member["publication_number"]):
        export_training.run(spark, lake, "stage1", "parquet", str(out))
    assert not out.exists() or not any(out.iterdir())


def test_the_trainer_refuses_shards_without_a_passed_audit(tmp_path):
    manifest = {"dataset": "stage1", "format": "parquet", "rows": 0, "shards": []}
    (tmp_path / "_manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="no passed leakage audit"):
        read_manifest(str(tmp_path))
    manifest["leakage_audit"] = {"status": "passed", "rows_checked": 0}
    (tmp_path / "_manifest.json").write_text(json.dumps(manifest))
    assert read_manifest(str(tmp_path))["rows"] == 0


def test_the_trainer_refuses_shards_changed_after_the_audited_export(tmp_path):
    """The trainer trusted whatever the shard files held: a shard grown after the export
    (rows the leakage audit never saw) was trained on, a cut one failed mid-training."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"anchor_text": "a", "positive_text": "b", "family_id": "F1"}] * 3
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "shard-00000.parquet")
    manifest = {
        "dataset": "stage1",
        "format": "parquet",
        "rows": 3,
        "shards": [{"file": "shard-00000.parquet", "rows": 3}],
        "leakage_audit": {"status": "passed", "rows_checked": 3},
    }
    (tmp_path / "_manifest.json").write_text(json.dumps(manifest))
    assert read_manifest(str(tmp_path))["rows"] == 3
    pq.write_table(pa.Table.from_pylist(rows * 2), tmp_path / "shard-00000.parquet")
    with pytest.raises(ValueError, match="holds 6 rows, the audited export wrote 3"):
        read_manifest(str(tmp_path))
    whole = (tmp_path / "shard-00000.parquet").read_bytes()
    (tmp_path / "shard-00000.parquet").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=r"shard shard-00000\.parquet of the manifest cannot be"):
        read_manifest(str(tmp_path))
    (tmp_path / "shard-00000.parquet").unlink()
    with pytest.raises(ValueError, match="cannot be read"):
        read_manifest(str(tmp_path))
    # a row replaced (a test family's pair in place of one the audit saw): same row count
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "shard-00000.parquet")
    size = (tmp_path / "shard-00000.parquet").stat().st_size
    manifest["shards"][0]["bytes"] = size
    (tmp_path / "_manifest.json").write_text(json.dumps(manifest))
    assert read_manifest(str(tmp_path))["rows"] == 3
    leaked = [*rows[:2], {"anchor_text": "a", "positive_text": "b", "family_id": "TEST-FAMILY"}]
    pq.write_table(pa.Table.from_pylist(leaked), tmp_path / "shard-00000.parquet")
    with pytest.raises(ValueError, match=rf"is \d+ bytes, the audited export wrote {size}"):
        read_manifest(str(tmp_path))


def test_a_50_mb_garbage_line_is_quarantined_under_spark_submit_defaults(tmp_path):
    """spark-submit with its default 1 GB driver: the huge line is never parsed."""
    from tests.conftest import gp_record

    folder = tmp_path / "export"
    folder.mkdir()
    good = [json.dumps(gp_record(number=f"US-{i}-A1", family=str(100 + i))) for i in range(3)]
    garbage = "x" * (50 * 1024 * 1024)
    (folder / "part-0.jsonl").write_text("\n".join([good[0], garbage, *good[1:]]) + "\n")
    lake = tmp_path / "lake"
    done = subprocess.run(
        [
            *("spark-submit", "--master", "local[1]", "spark_jobs/ingest.py"),
            *("--lake", str(lake), "--input", str(folder)),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    quarantine = DeltaTable(f"{lake}/quarantine").to_pandas()
    assert quarantine.reason.tolist() == ["record_too_large"]
    assert len(quarantine.record.iloc[0]) == 65_536  # a prefix; source_file names the file
    assert len(DeltaTable(f"{lake}/bronze/publications").to_pandas()) == 3


def test_a_split_that_finds_no_query_fails_and_keeps_the_lakes_split(spark, pipeline, tmp_path):
    """A cutoff after every filing replaced the queries and exclusions with nothing and
    succeeded: every family went on to training, and evaluation had no query."""
    from datetime import date

    from spark_jobs import split

    lake = copy_lake(pipeline, tmp_path)
    names = ("silver/eval_queries", "silver/excluded_families")
    before = {t: _state(lake, t) for t in names}
    assert before["silver/eval_queries"][1] > 0
    with pytest.raises(
        EmptyTableError,
        match=r"split: no patent filed on or after 2100-01-01 has an X citation .*\(0 filed "
        r"since; the latest filing date is 20\d\d-\d\d-\d\d\)",
    ):
        split.run(spark, lake, date(2100, 1, 1))
    assert {t: _state(lake, t) for t in names} == before
    split.run(spark, lake, date(2100, 1, 1), args={"allow_empty": True})  # when it is meant
    assert [_state(lake, t)[1] for t in names] == [0, 0]
